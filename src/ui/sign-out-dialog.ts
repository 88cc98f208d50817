import { h } from './dom.ts';

/**
 * Sign out asks first, every time (issue 38): a modal dialog that says what signing out does here. The
 * session ends and this device's encryption keys are deleted from the browser, while the account, its
 * rooms and messages stay on the homeserver. When the recovery key was never confirmed saved it warns
 * instead: with the device's keys gone, that key is the only way left to the encrypted messages.
 */
export class SignOutDialog {
  private readonly dialog = h('dialog', { class: 'sign-out-dialog', 'aria-labelledby': 'sign-out-title', 'aria-describedby': 'sign-out-meaning' });
  private answer: ((signOut: boolean) => void) | undefined;

  constructor() {
    // Escape, or the dialog closed any other way, is Cancel (a late event of an earlier closing, once asked again, is not).
    this.dialog.addEventListener('close', () => {
      if (!this.dialog.open) this.settle(false);
    });
  }

  /** Resolves true once the person confirms, false on Cancel or Escape (or when `dismiss` runs first). */
  ask(recoveryKeyUnsaved: boolean): Promise<boolean> {
    this.settle(false);
    const answered = new Promise<boolean>((resolve) => (this.answer = resolve));
    // Cancel has the focus: Enter keeps you signed in.
    const cancel = h('button', { type: 'button', autofocus: true, onclick: () => this.settle(false) }, 'Cancel');
    const confirm = h('button', { type: 'button', class: recoveryKeyUnsaved ? 'danger' : 'primary', onclick: () => this.settle(true) }, recoveryKeyUnsaved ? 'Sign out anyway' : 'Sign out');
    this.dialog.replaceChildren(
      h('h2', { id: 'sign-out-title' }, recoveryKeyUnsaved ? 'Sign out without your recovery key?' : 'Sign out?'),
      recoveryKeyUnsaved
        ? h(
            'p',
            { id: 'sign-out-meaning' },
            'Your recovery key is not saved yet. Signing out deletes this device\u2019s encryption keys from this browser, and without the recovery key no later sign-in can read your encrypted messages: they are lost. Your account and rooms stay on your homeserver.',
          )
        : h(
            'p',
            { id: 'sign-out-meaning' },
            'Signing out ends your session here and deletes this device\u2019s encryption keys from this browser. Your account, rooms and messages stay on your homeserver: sign in again with your password, and your recovery key unlocks your earlier encrypted messages.',
          ),
      h('div', { class: 'actions' }, cancel, confirm),
    );
    // In the body, above whatever is open (the recovery key dialog is modal too).
    document.body.append(this.dialog);
    this.dialog.showModal();
    return answered;
  }

  /** The session went another way (another tab signed out, the homeserver refused it): the question is moot. */
  dismiss(): void {
    this.settle(false);
  }

  private settle(signOut: boolean): void {
    const answer = this.answer;
    this.answer = undefined;
    if (this.dialog.open) this.dialog.close();
    this.dialog.remove();
    answer?.(signOut);
  }
}

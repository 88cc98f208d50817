import type { ChatClient } from './chat.ts';
import { h } from './dom.ts';
import { describeError } from './errors.ts';

/**
 * Sign out asks first, every time (issue 38): a modal dialog that says what signing out does here. The
 * session ends and this device's encryption keys are deleted from the browser, while the account, its
 * rooms and messages stay on the homeserver. When the recovery key was never confirmed saved it warns
 * instead: with the device's keys gone, that key is the only way left to the encrypted messages. And
 * since that key opens only what the key backup holds, a sign-out waits, saying so, for the room keys
 * not uploaded yet (`untilKeysBackedUp`).
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

  /**
   * Before the device's keys are deleted: resolves true at once when the key backup holds every room key of this
   * device. Otherwise the dialog says it is saving them, and resolves true once they are saved, or when the person
   * signs out without them; false on Cancel or Escape. The SDK uploads a new key up to 10 s after it is made: a
   * message sent just before signing out is the usual case.
   */
  async untilKeysBackedUp(client: Pick<ChatClient, 'keysNotBackedUp' | 'keysBackedUp'>): Promise<boolean> {
    let missing: number | undefined;
    let saved: Promise<void>;
    try {
      missing = await client.keysNotBackedUp();
      if (missing === 0) return true;
      saved = client.keysBackedUp();
    } catch (error) {
      saved = Promise.reject(error);
    }
    this.settle(false);
    let asked!: (signOut: boolean) => void;
    const answered = new Promise<boolean>((resolve) => (this.answer = asked = resolve));
    // Still this question (not one asked again after a Cancel): what the saving ends in goes to it alone.
    const current = () => this.answer === asked;
    const one = missing === 1;
    const status = h(
      'p',
      { id: 'sign-out-meaning', role: 'status' },
      h('span', { class: 'spinner small', 'aria-hidden': 'true' }),
      `${one ? 'One' : (missing ?? 'Some')} of this device\u2019s message keys ${one ? 'is' : 'are'} not in your key backup yet. Saving ${one ? 'it' : 'them'} first, so that your recovery key opens ${one ? 'its' : 'their'} messages after you sign out\u2026`,
    );
    const cancel = h('button', { type: 'button', autofocus: true, onclick: () => this.settle(false) }, 'Cancel');
    const anyway = h('button', { type: 'button', class: 'danger', onclick: () => this.settle(true) }, 'Sign out without them');
    this.dialog.replaceChildren(h('h2', { id: 'sign-out-title' }, 'Saving your message keys'), status, h('div', { class: 'actions' }, cancel, anyway));
    document.body.append(this.dialog);
    this.dialog.showModal();
    saved.then(
      () => {
        if (current()) this.settle(true);
      },
      (error: unknown) => {
        if (!current()) return;
        status.setAttribute('role', 'alert');
        status.replaceChildren(`Could not save them: ${describeError(error)} Signing out now loses the messages only they open.`);
      },
    );
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

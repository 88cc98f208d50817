import { WrongRecoveryKey, type ChatClient } from './chat.ts';
import { copyText, h } from './dom.ts';
import { describeError } from './errors.ts';

/**
 * This device's encryption. A new account's recovery key is one step of its creation: a modal
 * dialog, open from the moment the chat screen shows (while the key is made), that says why the key
 * matters and offers Copy and Download, until the person says it is saved (issue 38: a card that came
 * 3–5 s later pushed the page down and could be missed). On a new sign-in of an account with
 * cross-signing, a card above the open room verifies this device with that key, or by emoji with another of its devices. The dialog also offers
 * to sign out without saving the key: being modal, it covers the top bar's Sign out, whose warning for an
 * unsaved key was otherwise out of reach.
 */
export class EncryptionPanel {
  readonly element = h('section', { class: 'encryption-panel', 'aria-label': 'Encryption' });
  private readonly keyInput = h('input', { id: 'recovery-key-input', autocomplete: 'off', placeholder: 'EsT1 abcd \u2026', 'aria-label': 'Recovery key' });
  private readonly error = h('p', { class: 'error', role: 'alert' });
  private readonly dialog = h('dialog', { class: 'recovery-dialog', 'aria-labelledby': 'recovery-dialog-title' });
  /** What the dialog shows now: nothing, the wait, or the key. */
  private dialogShows: string | undefined;
  private verifying = false;
  private verifyFold: HTMLDetailsElement | undefined;

  constructor(
    /** Signing out, which asks first (sign-out-dialog.ts, with its warning for an unsaved key). */
    private readonly signOut: (client: ChatClient) => void,
  ) {
    // Escape would close the dialog with the key unsaved: the only way out is to say it is saved.
    this.dialog.addEventListener('cancel', (event) => event.preventDefault());
  }

  render(client: ChatClient): void {
    const status = client.encryption();
    if (status.recoveryKey) this.showKey(client, status.recoveryKey);
    else if (status.settingUp) this.showSettingUp();
    else this.closeDialog();
    if (!status.recoveryKey && !status.settingUp && status.available && status.canVerify && !status.verified) {
      // Folded on a phone, where the open room needs the height; kept as it was across renders.
      this.verifyFold ??= h('details', { open: matchMedia('(min-width: 760px)').matches }, h('summary', {}, h('h3', {}, 'Verify this device')));
      this.verifyFold.replaceChildren(
        this.verifyFold.firstElementChild!,
        h('p', {}, 'Enter your recovery key to read your encrypted messages here, and so your other devices and contacts trust this one.'),
        h('form', { class: 'inline', onsubmit: (e: Event) => this.verify(e, client) }, this.keyInput, h('button', { type: 'submit' }, 'Verify')),
        h('p', {}, 'Or, if you are signed in on another device, compare emoji with it: ', h('button', { type: 'button', class: 'small', onclick: () => this.verifyWithOtherDevice(client) }, 'Verify with another device')),
        this.error,
      );
      return this.show(this.verifyFold);
    }
    this.element.hidden = true;
    this.element.replaceChildren();
  }

  /** The page leaves this client: the dialog goes with it. */
  leave(): void {
    this.closeDialog();
  }

  private showSettingUp(): void {
    if (this.dialogShows === 'setting-up') return;
    this.openDialog(
      'setting-up',
      h('h2', { id: 'recovery-dialog-title' }, 'Securing your account'),
      h('p', { role: 'status' }, h('span', { class: 'spinner small', 'aria-hidden': 'true' }), 'Making the keys that encrypt your messages\u2026'),
      why(),
    );
  }

  private showKey(client: ChatClient, key: string): void {
    if (this.dialogShows === key) return;
    const keyText = h('code', { class: 'recovery-key', 'aria-label': 'Your recovery key' }, key);
    const copy = h('button', { type: 'button', onclick: () => void copyText(key, keyText, copy) }, 'Copy');
    const download = h('button', { type: 'button', onclick: () => downloadKey(key, client.userId) }, 'Download');
    this.openDialog(
      key,
      h('h2', { id: 'recovery-dialog-title' }, 'Save your recovery key'),
      why(),
      keyText,
      h('div', { class: 'actions' }, copy, download),
      h('p', { class: 'hint' }, 'It is shown only until you confirm it is saved.'),
      h('button', { type: 'button', class: 'primary', onclick: () => client.confirmRecoveryKeySaved() }, 'I have saved my recovery key'),
      h('p', { class: 'hint' }, h('button', { type: 'button', class: 'link', onclick: () => this.signOut(client) }, 'Sign out without saving it')),
    );
  }

  private openDialog(shows: string, ...children: HTMLElement[]): void {
    this.dialogShows = shows;
    this.dialog.replaceChildren(...children);
    // In the body, not in the room view: a phone may hide the room view, and a hidden parent hides a modal too.
    if (!this.dialog.isConnected) document.body.append(this.dialog);
    if (!this.dialog.open) this.dialog.showModal();
  }

  private closeDialog(): void {
    this.dialogShows = undefined;
    if (this.dialog.open) this.dialog.close();
    this.dialog.remove();
    this.dialog.replaceChildren();
  }

  private show(...children: HTMLElement[]): void {
    this.element.hidden = false;
    this.element.className = 'encryption-panel card';
    this.element.replaceChildren(...children);
  }

  private verifyWithOtherDevice(client: ChatClient): void {
    this.error.textContent = '';
    client.verifyWithOtherDevice().catch((error: unknown) => (this.error.textContent = `Could not ask your other devices: ${describeError(error)}`));
  }

  private verify(event: Event, client: ChatClient): void {
    event.preventDefault();
    if (this.verifying) return;
    this.verifying = true;
    this.error.textContent = '';
    client
      .verifyWithRecoveryKey(this.keyInput.value)
      .then(
        () => (this.keyInput.value = ''),
        (error) => (this.error.textContent = error instanceof WrongRecoveryKey ? error.message : `Could not verify this device: ${describeError(error)}`),
      )
      .finally(() => (this.verifying = false));
  }
}

function why(): HTMLElement {
  return h('p', {}, 'Your messages are end-to-end encrypted: only your devices hold the keys. This recovery key lets a new device, or this one after you sign out, read them. Without it they are lost. Keep it somewhere safe, such as a password manager.');
}

/** Saves the key as a text file through an `<a download>` of a Blob (no request leaves the page). */
function downloadKey(key: string, userId: string): void {
  const url = URL.createObjectURL(new Blob([`Hearth recovery key for ${userId}\n\n${key}\n`], { type: 'text/plain' }));
  const link = h('a', { href: url, download: 'hearth-recovery-key.txt' });
  document.body.append(link);
  link.click();
  link.remove();
  // The download has its bytes once the click is handled: the URL can go after this task.
  setTimeout(() => URL.revokeObjectURL(url));
}

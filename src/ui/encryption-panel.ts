import { WrongRecoveryKey, type ChatClient } from './chat.ts';
import { copyText, h } from './dom.ts';
import { describeError } from './errors.ts';

/**
 * This device's encryption, above the open room: the recovery key made with the account, shown
 * until the person says it is saved; or, on a new sign-in of an account with cross-signing, the
 * field that verifies this device with that key.
 */
export class EncryptionPanel {
  readonly element = h('section', { class: 'encryption-panel', 'aria-label': 'Encryption' });
  private readonly keyInput = h('input', { id: 'recovery-key-input', autocomplete: 'off', placeholder: 'EsT1 abcd \u2026', 'aria-label': 'Recovery key' });
  private readonly error = h('p', { class: 'error', role: 'alert' });
  private verifying = false;

  render(client: ChatClient): void {
    const status = client.encryption();
    if (status.recoveryKey) {
      const key = status.recoveryKey;
      const keyText = h('code', { class: 'recovery-key', 'aria-label': 'Your recovery key' }, key);
      const copy = h('button', { type: 'button', class: 'small', onclick: () => void copyText(key, keyText, copy) }, 'Copy');
      return this.show(
        h('h3', {}, 'Save your recovery key'),
        h('p', {}, 'Your messages are end-to-end encrypted. This key lets a new device, or this one after you sign out, read them: keep it somewhere safe, such as a password manager. It is shown only until you confirm it is saved.'),
        keyText,
        copy,
        h('button', { type: 'button', class: 'primary', onclick: () => client.confirmRecoveryKeySaved() }, 'I have saved my recovery key'),
      );
    }
    if (status.available && status.canVerify && !status.verified) {
      return this.show(
        h('h3', {}, 'Verify this device'),
        h('p', {}, 'Enter your recovery key to read your encrypted messages here, and so your other devices and contacts trust this one.'),
        h('form', { class: 'inline', onsubmit: (e: Event) => this.verify(e, client) }, this.keyInput, h('button', { type: 'submit' }, 'Verify')),
        this.error,
      );
    }
    this.element.hidden = true;
    this.element.replaceChildren();
  }

  private show(...children: HTMLElement[]): void {
    this.element.hidden = false;
    this.element.className = 'encryption-panel card';
    this.element.replaceChildren(...children);
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

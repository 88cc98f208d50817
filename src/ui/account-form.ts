import type { ChatAccounts, ChatClient } from './chat.ts';
import { h } from './dom.ts';
import { describeAccountError } from './errors.ts';

/** A Matrix localpart as this homeserver takes it: lower case, a-z 0-9 . _ = - / (capitals are lower-cased first). */
export const USERNAME_PATTERN = /^[a-z0-9._=\-/]+$/;

export type AccountMode = 'register' | 'login';

/** The first-run screen: create an account, or sign in to one on this homeserver. */
export class AccountForm {
  /** What was typed, kept when switching between sign-in and create-account. */
  private readonly draft = { username: '', password: '', confirm: '' };

  constructor(
    private readonly accounts: ChatAccounts,
    /** Runs with the new client once the homeserver has taken the account. */
    private readonly onSignedIn: (client: ChatClient) => void,
    private readonly persistStorage: () => void,
  ) {}

  /** Builds the form in `mode` and shows it in `container`, focused. */
  show(container: HTMLElement, mode: AccountMode): void {
    const draft = this.draft;
    const error = h('p', { class: 'error', role: 'alert' });
    const username = h('input', { id: 'username', name: 'username', autocomplete: 'username', required: true, value: draft.username, 'aria-describedby': mode === 'register' ? 'username-hint' : undefined });
    const password = h('input', { id: 'password', name: 'password', type: 'password', autocomplete: mode === 'register' ? 'new-password' : 'current-password', required: true, value: draft.password });
    const confirm = h('input', { id: 'password-confirm', name: 'password-confirm', type: 'password', autocomplete: 'new-password', required: true, value: draft.confirm });
    username.oninput = () => (draft.username = username.value);
    password.oninput = () => (draft.password = password.value);
    confirm.oninput = () => (draft.confirm = confirm.value);
    const submit = h('button', { type: 'submit', class: 'primary' }, mode === 'register' ? 'Create account' : 'Sign in');
    const form = h(
      'form',
      {
        class: 'card auth',
        onsubmit: async (event: Event) => {
          event.preventDefault();
          error.textContent = '';
          // Matrix user IDs are lower case: take "Alice" as "alice", refuse what no localpart may hold.
          const name = username.value.trim().replace(/^@/, '').replace(/:.*$/, '').toLowerCase();
          if (mode === 'register' && !USERNAME_PATTERN.test(name)) {
            error.textContent = 'Usernames may use only the letters a\u2013z, digits and . _ = - / (no spaces).';
            return username.focus();
          }
          if (mode === 'register' && password.value !== confirm.value) {
            error.textContent = 'The two passwords do not match. Type the same password in both fields.';
            return confirm.focus();
          }
          submit.disabled = true;
          try {
            const client = mode === 'register' ? await this.accounts.register(name, password.value) : await this.accounts.login(name, password.value);
            draft.username = draft.password = draft.confirm = '';
            // Ask the browser not to evict this origin's data under storage pressure: it is a homeserver.
            this.persistStorage();
            this.onSignedIn(client);
          } catch (e) {
            error.textContent = describeAccountError(e, mode);
            submit.disabled = false;
          }
        },
      },
      h('h1', {}, mode === 'register' ? 'Create your account' : 'Sign in'),
      h(
        'p',
        { class: 'hint' },
        mode === 'register'
          ? 'This homeserver runs in your browser. Your account, rooms and keys are stored here, on this device.'
          : 'Sign in to an account on this homeserver.',
      ),
      h('label', { for: 'username' }, 'Username'),
      username,
      mode === 'register' ? h('p', { id: 'username-hint', class: 'hint field-hint' }, 'Letters a\u2013z, digits and . _ = - /; capitals become lower case.') : null,
      h('label', { for: 'password' }, 'Password'),
      password,
      mode === 'register' ? h('label', { for: 'password-confirm' }, 'Confirm password') : null,
      mode === 'register' ? confirm : null,
      error,
      submit,
      h(
        'button',
        { type: 'button', class: 'link', onclick: () => this.show(container, mode === 'register' ? 'login' : 'register') },
        mode === 'register' ? 'I already have an account here' : 'Create a new account instead',
      ),
    );
    container.replaceChildren(form);
    (username.value ? password : username).focus();
  }
}

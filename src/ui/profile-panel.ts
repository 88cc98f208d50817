import type { ChatClient } from './chat.ts';
import { h } from './dom.ts';
import { describeError } from './errors.ts';
import { ErrorSlot } from './error-slot.ts';

/** Your own display name and avatar (the profile API), in the Settings view (chat-screen.ts): read each time it opens, saved on submit. */
export class ProfilePanel {
  readonly element = h('section', { class: 'profile-panel', 'aria-labelledby': 'profile-title' });
  private readonly displayName = h('input', { id: 'profile-display-name', 'aria-label': 'Display name', maxLength: 255 });
  private readonly avatarFile = h('input', { type: 'file', accept: 'image/*', 'aria-label': 'Your avatar image' });
  private readonly avatar = h('img', { class: 'avatar large', alt: 'Your avatar', hidden: true });
  private readonly error = new ErrorSlot();
  private client: ChatClient | undefined;

  constructor() {
    const save = (action: (client: ChatClient) => Promise<void>) => {
      const client = this.client;
      if (!client) return;
      this.error.run('settings', () => action(client).then(() => this.load(client)));
    };
    this.avatarFile.onchange = () => {
      const file = this.avatarFile.files?.[0];
      if (file) save((client) => client.setAvatar(file).finally(() => (this.avatarFile.value = '')));
    };
    this.element.append(
      h('h3', { id: 'profile-title' }, 'Your profile'),
      h(
        'form',
        { class: 'inline', onsubmit: (e: Event) => (e.preventDefault(), save((client) => client.setDisplayName(this.displayName.value.trim()))) },
        h('label', { for: 'profile-display-name' }, 'Display name'),
        this.displayName,
        h('button', { type: 'submit' }, 'Save'),
      ),
      h('div', { class: 'inline' }, this.avatar, h('label', { class: 'hint' }, 'Avatar ', this.avatarFile)),
      this.error.element,
    );
  }

  /** At each sign-in. */
  show(client: ChatClient): void {
    this.client = client;
    this.displayName.value = '';
    this.avatar.hidden = true;
    this.error.clear();
  }

  /** The Settings view opened: what the homeserver holds now (another device may have changed it). */
  refresh(): void {
    if (this.client) this.load(this.client);
  }

  private load(client: ChatClient): void {
    client.profile().then(
      (profile) => {
        if (client !== this.client) return;
        if (document.activeElement !== this.displayName) this.displayName.value = profile.displayName ?? '';
        this.avatar.hidden = !profile.avatarUrl;
        if (profile.avatarUrl) this.avatar.src = profile.avatarUrl;
      },
      (error) => this.error.show('settings', describeError(error)),
    );
  }
}

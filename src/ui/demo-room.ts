import type { ChatClient } from './chat.ts';
import { h } from './dom.ts';
import { describeError, describeInviteError } from './errors.ts';
import { ErrorSlot, succeeded } from './error-slot.ts';
import { invitedUserFromHash, shortUserId } from './ids.ts';

const DEMO_ROOM_NAME = 'P2P demo';

/** The invite link for `userId` has been answered: it leaves the address, so a reload does not ask again. */
function forgetInviteLink(userId: string): void {
  if (invitedUserFromHash(location.hash) === userId) history.replaceState(null, '', location.pathname + location.search);
}

/** What the demo room needs of the chat screen. */
export interface DemoRoomContext {
  client(): ChatClient | undefined;
  /** Opens a room; `behind`: behind the Peers view, which stays (to show why an invite failed) until closed. */
  select(roomId: string, options?: { behind?: boolean }): void;
  /** The open room's invite field, filled by an invite link too. */
  readonly inviteInput: HTMLInputElement;
  /** Opens the Peers view, where the demo room form is. */
  openPanel(): void;
  /** Starts a direct chat with `userId` (which invites them), as the sidebar's form does. */
  startDirect(userId: string): void;
}

/**
 * "Start a P2P demo room" (shown in the Peers view) and invite links: `#invite=@user:server` in the
 * address asks once, in a dialog, whether to start a direct chat with that user (which invites them,
 * as the sidebar's invite link promises); it also fills the invite fields with that ID.
 */
export class DemoRoom {
  private readonly invitee = h('input', { id: 'demo-invitee', placeholder: '@friend:server', 'aria-label': 'Invite to the demo room' });
  private readonly error = new ErrorSlot();
  private readonly notice = h('p', { class: 'invite-notice', role: 'status' });
  private readonly confirmDialog = h('dialog', { class: 'invite-link-dialog', 'aria-labelledby': 'invite-link-title' });

  constructor(private readonly context: DemoRoomContext) {}

  /** For the Peers view's actions. */
  elements(): HTMLElement[] {
    return [
      h('h3', {}, 'Start a P2P demo room'),
      h('form', { class: 'inline demo-room', onsubmit: (e: Event) => this.start(e) }, this.invitee, h('button', { type: 'submit' }, 'Start')),
      this.error.element,
      this.notice,
    ];
  }

  /** `#invite=@user:server` in the address: fill both invite forms with it, for the person to confirm. */
  applyInviteLink(): void {
    const userId = invitedUserFromHash(location.hash);
    const client = this.context.client();
    if (!userId || !client) return;
    if (userId === client.userId) {
      this.notice.textContent = 'This is your own invite link: send it to someone else.';
      return;
    }
    this.context.inviteInput.value = userId;
    this.invitee.value = userId;
    this.context.openPanel();
    this.notice.textContent = `Invite ${shortUserId(userId)}: start a P2P demo room with them, or invite them to the open room.`;
    this.confirm(userId);
  }

  /** The one confirmation an invite link asks: a direct chat with `userId`, or not now. */
  private confirm(userId: string): void {
    const dialog = this.confirmDialog;
    // Escape is Not now: the dialog's close answers too.
    const done = () => {
      forgetInviteLink(userId);
      dialog.close();
      dialog.remove();
    };
    dialog.replaceChildren(
      h('h2', { id: 'invite-link-title' }, 'Start a direct chat?'),
      h('p', {}, 'You opened an invite link of ', h('code', { class: 'invite-link-user' }, userId), '. A direct chat sends them an invite from you; it is end-to-end encrypted.'),
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'button', class: 'primary', onclick: () => (done(), this.context.startDirect(userId)) }, 'Start chat'),
        h('button', { type: 'button', onclick: done }, 'Not now'),
      ),
    );
    dialog.onclose = () => (forgetInviteLink(userId), dialog.remove());
    if (!dialog.isConnected) document.body.append(dialog);
    if (!dialog.open) dialog.showModal();
  }

  /**
   * Creates a private room named "P2P demo" and, if given, invites someone to it, then shows it. When the invite
   * fails the Peers view stays, saying why; the room is open behind it, where Close goes.
   */
  private start(event: Event): void {
    event.preventDefault();
    const button = (event.target as HTMLFormElement).querySelector('button')!;
    const client = this.context.client();
    if (button.disabled || !client) return;
    this.error.clear();
    const invitee = this.invitee.value.trim();
    button.disabled = true;
    void (async () => {
      let roomId: string;
      try {
        roomId = await client.createRoom(DEMO_ROOM_NAME);
      } catch (error) {
        this.error.show('create', `Could not create the room: ${describeError(error)}`);
        return;
      }
      succeeded('create');
      if (!invitee) return this.context.select(roomId);
      // Opened behind the Peers view while the invite goes, so that a failed one is said here, beside its form.
      this.context.select(roomId, { behind: true });
      this.notice.textContent = `Inviting ${shortUserId(invitee)}\u2026`;
      try {
        // Invited apart from the creation, so an unreachable invitee leaves the room made and says why.
        await client.invite(roomId, invitee);
      } catch (error) {
        this.notice.textContent = '';
        this.error.show('invite', `The room was created, but the invite failed. ${describeInviteError(error, invitee)}`);
        return;
      }
      succeeded('invite');
      this.invitee.value = '';
      if (this.context.inviteInput.value.trim() === invitee) this.context.inviteInput.value = '';
      this.notice.textContent = `Invited ${shortUserId(invitee)} to \u201c${DEMO_ROOM_NAME}\u201d.`;
      forgetInviteLink(invitee);
      this.context.select(roomId);
    })().finally(() => (button.disabled = false));
  }
}

import { DirectInviteFailed, DirectTargetUnknown, type ChatClient, type ChatRoom, type MatrixEvent } from './chat.ts';
import { copyText, h } from './dom.ts';
import { describeDirectError, describeError, describeInviteError, describeJoinError, notAMatrixId } from './errors.ts';
import { isMatrixUserId } from './ids.ts';
import { ErrorSlot, succeeded, type ActionKind } from './error-slot.ts';

/** What the sidebar asks of the chat screen. */
export interface SidebarActions {
  /** Opens a room; `after` runs once it is the selected one (to clear a field). */
  select(roomId: string, after?: () => void): void;
}

/**
 * The attribution CC BY 4.0 asks for the emoji art, which the page ships as a font (style.css); the build carries the
 * font's licences at `licenses/twemoji-colr-font.txt` (vite.config.ts).
 */
function credits(): HTMLElement {
  const link = (href: string, text: string) => h('a', { href, target: '_blank', rel: 'noopener noreferrer' }, text);
  return h(
    'p',
    { class: 'credits hint' },
    'Emoji: ',
    link('https://github.com/twitter/twemoji', 'Twemoji'),
    ' by Twitter, Inc and other contributors, ',
    link('https://creativecommons.org/licenses/by/4.0/', 'CC BY 4.0'),
    ' (',
    link('licenses/twemoji-colr-font.txt', 'licences'),
    ')',
  );
}

/**
 * The sidebar: the room lists (invites first, with Accept and Decline), then the ways to have a new one: create a
 * room, join one by ID or alias, start a direct chat. Nothing else: the peer tools and your profile have views of
 * their own, opened from the top bar (chat-screen.ts). At its foot, the credits.
 */
export class Sidebar {
  readonly element = h('nav', { class: 'sidebar', 'aria-label': 'Chats' });
  private readonly roomList = h('ul', { class: 'room-list', 'aria-label': 'Rooms' });
  private readonly directList = h('ul', { class: 'room-list direct-list', 'aria-label': 'Direct chats' });
  private readonly leftHeading = h('h3', { class: 'room-list-heading' }, 'Left rooms');
  private readonly leftList = h('ul', { class: 'room-list left-list', 'aria-label': 'Left rooms' });
  private readonly error = new ErrorSlot();

  /** The "Start a direct chat with" form, once built: an invite link submits it too. */
  private directForm: HTMLFormElement | undefined;

  constructor(private readonly actions: SidebarActions) {}

  /** Starts a direct chat with `userId` as the form does (the same checks, the same errors in the same place). */
  startDirectWith(userId: string): void {
    const form = this.directForm;
    if (!form) return;
    (form.elements.namedItem('direct-user-id') as HTMLInputElement).value = userId;
    form.requestSubmit();
  }

  /** Builds the sidebar for `client` (again at each sign-in): the room lists, then the forms. */
  build(client: ChatClient): void {
    const newRoomName = h('input', { id: 'new-room-name', placeholder: 'Room name', 'aria-label': 'New room name', required: true });
    // Private rooms are end-to-end encrypted; a public one (anyone may join) is not.
    const isPublic = h('input', { type: 'checkbox', id: 'new-room-public', 'aria-label': 'Public room (not encrypted)' });
    const directTo = h('input', { id: 'direct-user-id', name: 'direct-user-id', placeholder: '@someone:server', 'aria-label': 'Start a direct chat with', required: true });
    const joinId = h('input', { id: 'join-room-id', placeholder: '#alias:server or !id', 'aria-label': 'Room ID to join', required: true });
    // Rooms first, as Element has them, on a desktop as on a phone: direct messages and rooms, then the
    // forms (new room, join, direct chat).
    this.element.replaceChildren(
      h('h3', { class: 'room-list-heading' }, 'Direct messages'),
      this.directList,
      h('h3', { class: 'room-list-heading' }, 'Rooms'),
      this.roomList,
      this.leftHeading,
      this.leftList,
      h('h3', { class: 'room-list-heading' }, 'New room, direct chat, join'),
      h(
        'form',
        { class: 'inline', onsubmit: (e: Event) => this.guard(e, 'create', async () => this.actions.select(await client.createRoom(newRoomName.value, { public: isPublic.checked }), () => (newRoomName.value = ''))) },
        newRoomName,
        h('label', { class: 'hint', title: 'Anyone may join a public room, and its messages are not encrypted' }, isPublic, ' Public'),
        h('button', { type: 'submit' }, 'Create'),
      ),
      h(
        'form',
        {
          class: 'inline',
          onsubmit: (e: Event) =>
            this.guard(e, 'join', async () => {
              const target = joinId.value.trim();
              let roomId: string;
              try {
                roomId = await client.join(target);
              } catch (error) {
                // Kept in the field, and said plainly: the join did not happen.
                throw new Error(describeJoinError(error, target));
              }
              this.actions.select(roomId, () => (joinId.value = ''));
            }),
        },
        joinId,
        h('button', { type: 'submit' }, 'Join'),
      ),
      (this.directForm = h(
        'form',
        {
          class: 'inline',
          onsubmit: (e: Event) =>
            this.guard(e, 'create', async () => {
              const userId = directTo.value.trim();
              // The ID's grammar first, then (in startDirect) its homeserver's answer: nothing is created for a wrong one.
              if (!isMatrixUserId(userId)) throw new Error(notAMatrixId(userId));
              try {
                this.actions.select(await client.startDirect(userId), () => (directTo.value = ''));
              } catch (error) {
                if (error instanceof DirectTargetUnknown) throw new Error(describeDirectError(error, userId));
                if (!(error instanceof DirectInviteFailed)) throw error;
                this.actions.select(error.roomId);
                throw new Error(`The direct message was created, but the invite failed. ${describeInviteError(error.cause, userId)}`);
              }
            }),
        },
        directTo,
        h('button', { type: 'submit' }, 'Start chat'),
      )),
      this.error.element,
      credits(),
    );
  }

  /** Runs a sidebar action, showing its error instead of throwing; once it succeeds, older errors of its kind go. */
  private guard(event: Event, kind: ActionKind, action: () => Promise<void>): void {
    event.preventDefault();
    this.error.run(kind, action);
  }

  /** "invited by @someone:<64 hex digits>": cut short to the card's width, the whole ID on hover and copied by Copy. */
  private inviterLine(inviter: string | undefined): HTMLElement {
    if (!inviter) return h('span', { class: 'hint inviter-line' }, 'invited by someone');
    const id = h('code', { class: 'inviter', title: inviter }, inviter);
    const copy: HTMLButtonElement = h('button', { type: 'button', class: 'small link', 'aria-label': `Copy ${inviter}`, onclick: () => void copyText(inviter, id, copy) }, 'Copy');
    return h('span', { class: 'hint inviter-line' }, 'invited by\u00a0', id, copy);
  }

  /** `rooms`: the client's `sortedRooms()`; `loading` until the first sync has answered (an empty list is not known to be empty yet). */
  renderRooms(client: ChatClient, rooms: readonly ChatRoom[], selectedRoomId: string | undefined, loading = false): void {
    const item = (room: ChatRoom) => this.roomItem(client, room, selectedRoomId);
    const direct = rooms.filter((room) => room.isDirect).map(item);
    const items = rooms.filter((room) => !room.isDirect).map(item);
    const empty = (words: string) => (loading ? h('li', { class: 'hint loading', role: 'status' }, h('span', { class: 'spinner small', 'aria-hidden': 'true' }), 'Loading…') : h('li', { class: 'hint' }, words));
    this.directList.setAttribute('aria-busy', String(loading));
    this.roomList.setAttribute('aria-busy', String(loading));
    this.directList.replaceChildren(...(direct.length > 0 ? direct : [empty('None yet: start one with a Matrix ID.')]));
    this.roomList.replaceChildren(...(items.length > 0 ? items : [empty('No rooms yet: create one, or join one by its ID.')]));
    // Left (or kicked from) and not forgotten: Forget takes a room from every list, for good.
    const left = client.leftRooms();
    this.leftHeading.hidden = this.leftList.hidden = left.length === 0;
    this.leftList.replaceChildren(
      ...left.map((room) =>
        h(
          'li',
          { class: 'left-room' },
          h('span', { class: 'name' }, client.roomName(room)),
          h('button', { type: 'button', class: 'small link', onclick: () => void client.forget(room.id).then(() => succeeded('leave'), (e) => this.error.show('leave', describeError(e))) }, 'Forget'),
        ),
      ),
    );
  }

  private roomItem(client: ChatClient, room: ChatRoom, selectedRoomId: string | undefined): HTMLLIElement {
    if (room.membership === 'invite') {
      return h(
        'li',
        { class: 'invite' },
        h('span', { class: 'name' }, client.roomName(room)),
        this.inviterLine(room.inviter),
        h('button', { onclick: () => void client.join(room.id).then(() => (succeeded('join'), this.actions.select(room.id)), (e) => this.error.show('join', describeJoinError(e, room.id))) }, 'Accept'),
        h('button', { class: 'link', onclick: () => void client.leave(room.id).then(() => succeeded('leave'), (e) => this.error.show('leave', describeError(e))) }, 'Decline'),
      );
    }
    const last = room.timeline.filter((e) => e.type === 'm.room.message').at(-1);
    return h(
      'li',
      {},
      h(
        'button',
        { class: room.id === selectedRoomId ? 'room-item selected' : 'room-item', 'aria-current': room.id === selectedRoomId ? 'true' : undefined, onclick: () => this.actions.select(room.id) },
        h('span', { class: 'name' }, client.roomName(room)),
        // The homeserver's notification counts: mentions (highlights) stand out.
        room.unread > 0 && room.id !== selectedRoomId
          ? h('span', { class: room.highlights > 0 ? 'unread-badge highlight' : 'unread-badge', title: `${room.unread} unread${room.highlights > 0 ? `, ${room.highlights} mentioning you` : ''}` }, String(room.unread))
          : null,
        h('span', { class: 'preview' }, last ? `${client.displayName(room, last.sender)}: ${previewText(last)}` : ''),
      ),
    );
  }
}

/** A message's text for the room list: an edit's new text, not its "* …" fallback (the newest event may be an edit alone). */
function previewText(event: MatrixEvent): string {
  const newContent = event.content['m.relates_to']?.rel_type === 'm.replace' ? event.content['m.new_content'] : undefined;
  return String((newContent && typeof newContent === 'object' ? newContent.body : event.content.body) ?? '');
}

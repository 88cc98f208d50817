import type { ChatClient, ChatRoom, SearchResults } from './chat.ts';
import { formatTime, h } from './dom.ts';
import { describeError } from './errors.ts';
import { ErrorSlot } from './error-slot.ts';

/** What the search panel asks of the chat screen. */
export interface SearchActions {
  /** Opens the room a result is in. */
  select(roomId: string): void;
}

/**
 * Search in the open room or across rooms: the homeserver's search (`POST /search`), and in encrypted
 * rooms, which the homeserver cannot read, the messages this page has loaded and decrypted; the panel says so.
 */
export class SearchPanel {
  readonly element = h('details', { class: 'search-panel' }, h('summary', {}, 'Search'));
  private readonly term = h('input', { id: 'search-term', type: 'search', 'aria-label': 'Search for', placeholder: 'Words to find', required: true });
  private readonly scope = h('select', { 'aria-label': 'Search in' }, h('option', { value: 'room' }, 'This room'), h('option', { value: 'all' }, 'All rooms'));
  private readonly note = h('p', { class: 'hint search-note' });
  private readonly results = h('ol', { class: 'search-results', 'aria-label': 'Search results' });
  private readonly error = new ErrorSlot();
  private target: { client: ChatClient; room: ChatRoom | undefined } | undefined;

  constructor(private readonly actions: SearchActions) {
    this.element.append(
      h('form', { class: 'inline', role: 'search', onsubmit: (e: Event) => (e.preventDefault(), this.run()) }, this.term, this.scope, h('button', { type: 'submit' }, 'Search')),
      this.note,
      this.error.element,
      this.results,
    );
    this.scope.onchange = () => this.target && this.render(this.target.client, this.target.room);
  }

  render(client: ChatClient, room: ChatRoom | undefined): void {
    if (this.target?.client !== client) this.results.replaceChildren();
    this.target = { client, room };
    // Says before searching what search can see here.
    if (this.scope.value === 'room' && room?.encrypted) {
      this.note.textContent = 'This room is end-to-end encrypted: the server cannot search it, so only the messages this page has loaded and decrypted are searched.';
    } else if (this.scope.value === 'all') {
      this.note.textContent = 'In encrypted rooms the server cannot see the messages: only those this page has loaded and decrypted are searched there.';
    } else this.note.textContent = '';
  }

  private run(): void {
    const target = this.target;
    const term = this.term.value.trim();
    if (!target || term === '') return;
    const roomId = this.scope.value === 'room' ? target.room?.id : undefined;
    this.error.clear();
    this.results.replaceChildren(h('li', { class: 'hint' }, 'Searching\u2026'));
    target.client.search(term, roomId).then(
      (found) => this.show(target.client, found),
      (error) => {
        this.results.replaceChildren();
        this.error.show('search', describeError(error));
      },
    );
  }

  private show(client: ChatClient, found: SearchResults): void {
    if (found.hits.length === 0) return this.results.replaceChildren(h('li', { class: 'hint' }, 'No messages found.'));
    this.results.replaceChildren(
      ...found.hits.map((hit) => {
        const room = client.room(hit.roomId);
        const roomName = room ? client.roomName(room) : hit.roomId;
        return h(
          'li',
          { class: 'search-hit', 'data-event-id': hit.eventId },
          h(
            'button',
            { type: 'button', class: 'link', onclick: () => this.actions.select(hit.roomId) },
            h('span', { class: 'search-room' }, roomName),
            ' ',
            h('span', { class: 'sender' }, room ? client.displayName(room, hit.sender) : hit.sender),
            ' ',
            h('time', { class: 'hint' }, formatTime(hit.ts)),
          ),
          h('span', { class: 'body' }, hit.body),
          hit.local ? h('span', { class: 'hint', title: 'Found among the messages decrypted on this page' }, ' (decrypted here)') : null,
        );
      }),
    );
  }
}

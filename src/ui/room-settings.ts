import type { ChatClient, ChatRoom, RoomSettings } from './chat.ts';
import { h } from './dom.ts';
import { ErrorSlot } from './error-slot.ts';

/** What the settings panel asks of the chat screen. */
export interface RoomSettingsActions {
  /** Leaves the room and keeps it under "Left rooms", where it can be forgotten. */
  leave(): void;
}

/**
 * The open room's settings (a fold under its header): name, topic and avatar image (`m.room.avatar`),
 * each editable only when the room's power levels let this user change it, else shown read-only with
 * the reason; and Leave, which keeps the room under "Left rooms" until it is forgotten.
 */
export class RoomSettingsPanel {
  readonly element = h('details', { class: 'room-settings' }, h('summary', {}, 'Room settings'));
  // Kept across renders, so a sync does not wipe what is being typed.
  private readonly name = h('input', { id: 'room-settings-name', 'aria-label': 'Room name', maxLength: 255 });
  private readonly topic = h('textarea', { id: 'room-settings-topic', 'aria-label': 'Room topic', rows: 2 });
  private readonly avatarFile = h('input', { type: 'file', accept: 'image/*', 'aria-label': 'Room avatar image' });
  private readonly avatar = h('img', { class: 'avatar large', alt: 'Room avatar', hidden: true });
  private readonly reasons = h('ul', { class: 'hint settings-reasons', 'aria-label': 'Why settings are read-only' });
  private readonly error = new ErrorSlot();
  private readonly saveName = h('button', { type: 'submit' }, 'Save name');
  private readonly saveTopic = h('button', { type: 'submit' }, 'Save topic');
  private roomId: string | undefined;
  private shown: RoomSettings | undefined;
  /** What the forms act on: the room shown at the last render. */
  private actions: { client: ChatClient; roomId: string; leave(): void } | undefined;

  constructor() {
    const save = (action: (client: ChatClient, roomId: string) => Promise<void>) => {
      const target = this.actions;
      if (target) this.error.run('settings', () => action(target.client, target.roomId));
    };
    this.avatarFile.onchange = () => {
      const file = this.avatarFile.files?.[0];
      if (file) save((client, roomId) => client.setRoomAvatar(roomId, file).finally(() => (this.avatarFile.value = '')));
    };
    // Built once: a render moves no field, so typing keeps its focus.
    this.element.append(
      h(
        'div',
        { class: 'settings-body' },
        h(
          'form',
          { class: 'inline', onsubmit: (e: Event) => (e.preventDefault(), save((client, roomId) => client.setRoomName(roomId, this.name.value.trim()))) },
          h('label', { for: 'room-settings-name' }, 'Name'),
          this.name,
          this.saveName,
        ),
        h(
          'form',
          { class: 'inline', onsubmit: (e: Event) => (e.preventDefault(), save((client, roomId) => client.setRoomTopic(roomId, this.topic.value.trim()))) },
          h('label', { for: 'room-settings-topic' }, 'Topic'),
          this.topic,
          this.saveTopic,
        ),
        h('div', { class: 'inline' }, this.avatar, h('label', { class: 'hint' }, 'Avatar ', this.avatarFile)),
        this.reasons,
        this.error.element,
        h('button', { type: 'button', class: 'link', onclick: () => this.actions?.leave() }, 'Leave without forgetting'),
      ),
    );
  }

  /** `settings`: the client's `roomSettings(room.id)`. */
  render(client: ChatClient, room: ChatRoom | undefined, settings: RoomSettings | undefined, actions: RoomSettingsActions): void {
    this.element.hidden = !room;
    if (!room || !settings) return;
    const changedRoom = room.id !== this.roomId;
    if (changedRoom) this.error.clear();
    // A field shows the room's value unless the person is editing it.
    if (changedRoom || (document.activeElement !== this.name && this.name.value === this.shown?.name)) this.name.value = settings.name;
    if (changedRoom || (document.activeElement !== this.topic && this.topic.value === this.shown?.topic)) this.topic.value = settings.topic;
    this.roomId = room.id;
    this.shown = settings;
    this.avatar.hidden = !settings.avatarUrl;
    if (settings.avatarUrl && this.avatar.src !== settings.avatarUrl) this.avatar.src = settings.avatarUrl;
    const { denied } = settings;
    this.name.readOnly = !!denied.name;
    this.topic.readOnly = !!denied.topic;
    this.avatarFile.disabled = !!denied.avatar;
    const reasons = [...new Set([denied.name, denied.topic, denied.avatar].filter((r): r is string => !!r))];
    this.reasons.replaceChildren(...reasons.map((r) => h('li', {}, r)));
    this.reasons.hidden = reasons.length === 0;
    this.saveName.hidden = !!denied.name;
    this.saveTopic.hidden = !!denied.topic;
    this.actions = { client, roomId: room.id, leave: actions.leave };
  }
}

/**
 * Which new messages deserve a notification, by the account's push rules as matrix-js-sdk's push
 * processor reads them (mentions, DMs, keywords, muted rooms; Hearth serves `/pushrules`). An
 * encrypted event is judged once decrypted, since its rules read the cleartext.
 */
import { EventType, MatrixEventEvent, RoomEvent, type IRoomTimelineData, type MatrixClient, type MatrixEvent, type Room } from 'matrix-js-sdk';
import type { ChatNotification } from '../chat.ts';
import { displayName, roomName } from './rooms.ts';

export class NotificationWatcher {
  private readonly seen = new Set<string>();
  /** Events older than this client were sent before the page was here: not news (a reload, a limited timeline replayed as live). */
  private readonly since = Date.now();

  constructor(
    private readonly client: MatrixClient,
    private readonly notify: (notification: ChatNotification) => void,
  ) {
    client.on(RoomEvent.Timeline, (event: MatrixEvent, room: Room | undefined, toStart: boolean | undefined, _removed: boolean, data: IRoomTimelineData) => {
      if (toStart || !data?.liveEvent || !room) return;
      if (event.isBeingDecrypted() || event.shouldAttemptDecryption()) event.once(MatrixEventEvent.Decrypted, () => this.consider(event, room));
      else this.consider(event, room);
    });
  }

  private consider(event: MatrixEvent, room: Room): void {
    const id = event.getId();
    if (!id || this.seen.has(id) || event.getSender() === this.client.getUserId() || event.getTs() < this.since) return;
    if (event.getType() !== EventType.RoomMessage || event.isDecryptionFailure() || event.isRedacted()) return;
    // Recalculated: the actions the SDK kept were worked out on the ciphertext.
    if (!this.client.getPushActionsForEvent(event, true)?.notify) return;
    this.seen.add(id);
    const content = event.getContent();
    this.notify({
      roomId: room.roomId,
      roomName: roomName(this.client, room),
      sender: displayName(room, event.getSender()!),
      body: typeof content.body === 'string' ? content.body : '',
      encrypted: event.isEncrypted(),
    });
  }
}

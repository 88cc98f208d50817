import { EventType, MatrixEvent as SdkEvent, type MatrixClient, type Room } from 'matrix-js-sdk';
import { toChatError } from './convert.ts';

/**
 * What the person has read, told to the homeserver: the read receipt (the newest message from others) and
 * the fully-read marker (the newest event), each sent once per event.
 */
export class ReadMarkers {
  private readonly receiptsSent = new Map<string, string>();
  private readonly markersSent = new Map<string, string>();

  constructor(private readonly client: MatrixClient) {}

  /** The person has seen the end of `room`'s live timeline. */
  read(room: Room): void {
    const roomId = room.roomId;
    const events = room
      .getLiveTimeline()
      .getEvents()
      .filter((e) => e.getId() && !e.isSending());
    this.moveFullyRead(room, events.at(-1)?.getId());
    const last = events.filter((e) => e.getSender() !== this.client.getSafeUserId()).at(-1);
    const eventId = last?.getId();
    if (!last || !eventId || this.receiptsSent.get(roomId) === eventId) return;
    this.receiptsSent.set(roomId, eventId);
    void this.client.sendReadReceipt(last).catch((error) => {
      this.receiptsSent.delete(roomId);
      return toChatError(error);
    });
  }

  /**
   * The fully-read marker up to `eventId`, as Element moves it: `m.fully_read` through POST /read_markers, which
   * every device of the account gets as room account data. Alone, not with the receipt: /read_markers' receipt has
   * no thread ID, and the page's receipts are the main timeline's (`sendReadReceipt`).
   */
  private moveFullyRead(room: Room, eventId: string | undefined): void {
    const roomId = room.roomId;
    if (!eventId || this.markersSent.get(roomId) === eventId) return;
    if (room.getAccountData(EventType.FullyRead)?.getContent()['event_id'] === eventId) return;
    this.markersSent.set(roomId, eventId);
    this.client.setRoomReadMarkers(roomId, eventId).then(
      // Known here at once, not at the next sync: the room opened again before it shows no line above what was read.
      () => {
        if (this.markersSent.get(roomId) === eventId) room.addAccountData([new SdkEvent({ type: EventType.FullyRead, content: { event_id: eventId } })]);
      },
      () => {
        if (this.markersSent.get(roomId) === eventId) this.markersSent.delete(roomId);
      },
    );
  }
}

import type { JsonObject } from '../crypto/canonical-json.ts';
import { redactEvent } from '../events/redaction.ts';
import { redactsOf } from '../events/auth.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';

/** An event as clients see it (client-server §Room event format: ClientEvent). */
export interface ClientEvent {
  event_id: string;
  type: string;
  content: JsonObject;
  sender: string;
  origin_server_ts: number;
  room_id: string;
  state_key?: string;
  redacts?: string;
  unsigned?: Record<string, unknown>;
}

export interface Viewer {
  userId: string;
  deviceId?: string;
}

/** Turns stored PDUs into client events: redactions applied, unsigned filled in. */
export class EventFormatter {
  constructor(
    private readonly rooms: Rooms,
    private readonly now: () => number,
  ) {}

  async format(stored: StoredEvent, viewer?: Viewer, options: { withRedactedBecause?: boolean } = {}): Promise<ClientEvent> {
    const event = stored.event;
    const version = (await this.rooms.roomVersion(event.room_id))!;
    const redaction = stored.redactedBy ? await this.rooms.getEvent(stored.redactedBy) : undefined;
    const content = (redaction ? redactEvent(event, version)['content'] : event.content) as JsonObject;
    const out: ClientEvent = {
      event_id: event.event_id,
      type: event.type,
      content,
      sender: event.sender,
      origin_server_ts: event.origin_server_ts,
      room_id: event.room_id,
    };
    if (event.state_key !== undefined) out.state_key = event.state_key;
    if (event.type === 'm.room.redaction' && !redaction) {
      const target = redactsOf(version, event);
      if (target) out.redacts = target;
    }
    const unsigned: Record<string, unknown> = { age: Math.max(0, this.now() - event.origin_server_ts) };
    if (stored.replacesState !== null) {
      const previous = await this.rooms.getEventByNid(stored.replacesState);
      if (previous) {
        unsigned['replaces_state'] = previous.event.event_id;
        unsigned['prev_content'] = previous.redactedBy ? redactEvent(previous.event, version)['content'] : previous.event.content;
        unsigned['prev_sender'] = previous.event.sender;
      }
    }
    if (redaction && options.withRedactedBecause !== false) {
      unsigned['redacted_because'] = await this.format(redaction, viewer, { withRedactedBecause: false });
    }
    if (viewer?.deviceId && viewer.userId === event.sender) {
      const txnId = await this.rooms.transactionIdOf(event.event_id, viewer.userId, viewer.deviceId);
      if (txnId !== undefined) unsigned['transaction_id'] = txnId;
    }
    if (event.unsigned?.['invite_room_state']) unsigned['invite_room_state'] = event.unsigned['invite_room_state'];
    out.unsigned = unsigned;
    return out;
  }

  formatAll(events: StoredEvent[], viewer?: Viewer): Promise<ClientEvent[]> {
    return Promise.all(events.map((e) => this.format(e, viewer)));
  }
}

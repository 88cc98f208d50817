import type { RoomEvent } from '../events/event.ts';
import type { PDU } from '../events/pdu.ts';
import { redactEvent } from '../events/redaction.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { RoomGraph } from '../rooms/dag.ts';
import { RoomError } from '../rooms/errors.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { Visibility } from '../sync/visibility.ts';
import { serverAllowedInRoom } from './acl.ts';
import { toPdu } from './pdus.ts';

export interface ServedHistoryOptions {
  rooms: Pick<Rooms, 'roomVersion' | 'joinedServers' | 'getEvent' | 'stateAtEvent' | 'loadStateEvents' | 'currentStateEvent'>;
  graph: Pick<RoomGraph, 'authChain' | 'authChainOf' | 'backfill' | 'missingEvents'>;
  /** Whether a server's users could see an event under the room's history visibility. */
  visibility: Pick<Visibility, 'serverMaySee'>;
}

/**
 * A room's events and state as other servers read them (`/event`, `/state`, `/state_ids`,
 * `/event_auth`, `/backfill`, `/get_missing_events`): only to servers in the room that its server
 * ACL allows, and history each as that server may see it.
 */
export class ServedHistory {
  constructor(private readonly options: ServedHistoryOptions) {}

  /** One event, for `origin`; undefined when we do not hold it (or hold it rejected). */
  async event(origin: string, eventId: string): Promise<PDU[] | undefined> {
    const stored = await this.options.rooms.getEvent(eventId);
    if (!stored || stored.rejected) return undefined;
    const version = await this.roomFor(origin, stored.event.room_id);
    return this.historyFor(origin, [stored], version);
  }

  /** The state before an event of the room, with its auth chain. */
  async stateBefore(origin: string, roomId: string, eventId: string): Promise<{ version: RoomVersion; state: RoomEvent[]; authChain: RoomEvent[] }> {
    const { rooms, graph } = this.options;
    const version = await this.roomFor(origin, roomId);
    await this.eventInRoom(roomId, eventId);
    const nids = await rooms.stateAtEvent(eventId, 'before');
    if (!nids) throw new RoomError('not_found', `no state is known at ${eventId}`);
    const state = [...(await rooms.loadStateEvents(nids)).values()].map((s) => s.event);
    return { version, state, authChain: await graph.authChainOf(state, version) };
  }

  /** An event's auth chain, as PDUs. */
  async eventAuth(origin: string, roomId: string, eventId: string): Promise<PDU[]> {
    const version = await this.roomFor(origin, roomId);
    await this.eventInRoom(roomId, eventId);
    return (await this.options.graph.authChain([eventId], version)).map((e) => toPdu(e, version));
  }

  /** Up to `limit` events before those named, newest first, as `origin` may see them. */
  async backfill(origin: string, roomId: string, from: string[], limit: number): Promise<PDU[]> {
    const version = await this.roomFor(origin, roomId);
    return this.historyFor(origin, await this.options.graph.backfill(roomId, from, limit), version);
  }

  /** The events between what `origin` has and what it asks for, as it may see them. */
  async missingEvents(origin: string, roomId: string, earliest: string[], latest: string[], limit: number, minDepth: number): Promise<PDU[]> {
    const version = await this.roomFor(origin, roomId);
    return this.historyFor(origin, await this.options.graph.missingEvents(roomId, earliest, latest, limit, minDepth), version);
  }

  /** History and state are served to servers in the room that its ACL allows, never to others. */
  private async roomFor(origin: string, roomId: string): Promise<RoomVersion> {
    const { rooms } = this.options;
    const version = await rooms.roomVersion(roomId);
    if (!version) throw new RoomError('not_found', `room ${roomId} is unknown here`);
    if (!(await rooms.joinedServers(roomId)).includes(origin)) throw new RoomError('forbidden', `${origin} is not in room ${roomId}`);
    if (!(await serverAllowedInRoom(rooms, roomId, origin))) throw new RoomError('forbidden', `${origin} is denied by the server ACL of ${roomId}`);
    return version;
  }

  /** The event must be one of this room's that we hold. */
  private async eventInRoom(roomId: string, eventId: string): Promise<StoredEvent> {
    const stored = await this.options.rooms.getEvent(eventId);
    if (!stored || stored.event.room_id !== roomId || stored.rejected) throw new RoomError('not_found', `event ${eventId} is unknown here`);
    return stored;
  }

  /**
   * History as another server may see it: events its users could not see under the room's
   * history visibility go redacted (`Visibility.serverMaySee`), keeping their place in the DAG,
   * and so do events a redaction applied to.
   */
  private async historyFor(origin: string, events: StoredEvent[], version: RoomVersion): Promise<PDU[]> {
    const pdus: PDU[] = [];
    for (const stored of events) {
      const pdu = toPdu(stored.event, version);
      const whole = stored.redactedBy === null && (await this.options.visibility.serverMaySee(origin, stored));
      pdus.push(whole ? pdu : (redactEvent(pdu, version) as unknown as PDU));
    }
    return pdus;
  }
}

import { eventIdOf, roomIdOfPdu, type PDU } from '../events/pdu.ts';
import { RoomError } from '../rooms/errors.ts';
import type { Rooms } from '../rooms/rooms.ts';
import { FederationRequestError, type FederationClient } from './client.ts';
import type { GapFiller } from './gap-filling.ts';
import { isPduShaped } from './pdus.ts';
import { GapNotFilled } from './transaction-gaps.ts';

export interface BackfillOptions {
  serverName: string;
  rooms: Pick<Rooms, 'roomVersion' | 'joinedServers' | 'getEvent'>;
  client: Pick<FederationClient, 'backfill'>;
  /** Places each fetched event by the DAG, fetching what it lacks (gap-filling.ts). */
  gaps: Pick<GapFiller, 'receivePulled'>;
  log: (message: string, error?: unknown) => void;
}

/** Older history of a room, from the servers in it (`/backfill`), for a client paging back past what we hold. */
export class Backfill {
  constructor(private readonly options: BackfillOptions) {}

  /**
   * Fetches older history from a server in the room (server-server §Backfilling) and
   * stores it in its place by the DAG. Returns how many events were added.
   */
  async backfill(roomId: string, fromEventIds: string[], limit: number): Promise<number> {
    const { rooms } = this.options;
    const version = await rooms.roomVersion(roomId);
    if (!version || fromEventIds.length === 0) return 0;
    const servers = (await rooms.joinedServers(roomId)).filter((s) => s !== this.options.serverName);
    let added = 0;
    next: for (const server of servers) {
      let pdus: PDU[];
      try {
        pdus = (await this.options.client.backfill(server, roomId, fromEventIds, limit)).pdus ?? [];
      } catch (error) {
        this.options.log(`federation: backfill from ${server} failed`, error);
        continue;
      }
      for (const pdu of pdus.filter(isPduShaped).sort((a, b) => a.depth - b.depth)) {
        const id = eventIdOf(pdu, version);
        if (!id || roomIdOfPdu(pdu) !== roomId) continue;
        const known = await rooms.getEvent(id);
        if (known && !known.outlier) continue;
        try {
          const stored = await this.options.gaps.receivePulled(server, pdu, id, version, true);
          if (!stored.rejected) added++;
        } catch (error) {
          // What the event needs could not be had from this server (the stream reset, a timeout, a refusal): the next one is asked.
          if (error instanceof GapNotFilled || error instanceof FederationRequestError) {
            this.options.log(`federation: backfill from ${server} failed`, error);
            continue next;
          }
          if (!(error instanceof RoomError)) throw error;
          this.options.log(`federation: backfilled event ${id} refused: ${error.message}`);
        }
      }
      if (added > 0) return added;
    }
    // Every server failed (or had nothing): the caller answers with what is held.
    return added;
  }
}

import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { TIMELINE_END, TIMELINE_START, positionAfter, positionBefore, type TopologicalPosition } from '../rooms/timeline.ts';
import type { ClientEvent, EventFormatter, Viewer } from './format.ts';
import { formatTopologicalToken, parsePaginationToken, TokenError } from './token.ts';
import type { Visibility } from './visibility.ts';

/** How many levels `recurse=true` follows (the spec asks for at least 3). */
export const RELATIONS_RECURSION_DEPTH = 3;

export interface RelationsPage {
  chunk: ClientEvent[];
  next_batch?: string;
  prev_batch?: string;
  recursion_depth?: number;
}

export interface ThreadsPage {
  chunk: ClientEvent[];
  next_batch?: string;
}

/**
 * GET /relations and GET /threads (client-server §Relationships, §Threading): read from the
 * room engine's relations index, filtered by history visibility, formatted with bundled
 * aggregations.
 */
export class RelationsReader {
  constructor(
    private readonly rooms: Rooms,
    private readonly visibility: Visibility,
    private readonly formatter: EventFormatter,
  ) {}

  /**
   * The children of an event the user may see, in topological order (newest first going
   * back). Undefined when the parent is unknown, elsewhere, or hidden from the user.
   */
  async relations(
    roomId: string,
    eventId: string,
    viewer: Viewer,
    options: { relType?: string; eventType?: string; from?: string; to?: string; dir: 'b' | 'f'; limit: number; recurse?: boolean },
  ): Promise<RelationsPage | undefined> {
    const parent = await this.rooms.getEvent(eventId);
    if (!parent || parent.event.room_id !== roomId || parent.streamOrdering === null) return undefined;
    const membership = await this.rooms.membership(roomId, viewer.userId);
    if (!(await this.visibility.canSee(viewer.userId, parent, membership))) return undefined;
    const { dir, limit } = options;
    const from = options.from ? await this.positionOf(roomId, options.from) : dir === 'b' ? TIMELINE_END : TIMELINE_START;
    const bound = options.to ? await this.positionOf(roomId, options.to) : dir === 'b' ? TIMELINE_START : TIMELINE_END;
    const depth = options.recurse ? RELATIONS_RECURSION_DEPTH : 1;
    const picked: StoredEvent[] = [];
    let next: TopologicalPosition | undefined;
    let position = from;
    const query = { from, bound, dir, depth, ...(options.relType !== undefined ? { relType: options.relType } : {}), ...(options.eventType !== undefined ? { eventType: options.eventType } : {}) };
    for await (const stored of this.rooms.relations.children(roomId, eventId, query, limit + 1)) {
      // One more visible child than a page: there is a next page, starting after the last one given.
      if (picked.length === limit) {
        next = position;
        break;
      }
      position = dir === 'b' ? positionBefore(stored) : positionAfter(stored);
      if (await this.visibility.canSee(viewer.userId, stored, membership)) picked.push(stored);
    }
    const page: RelationsPage = { chunk: await this.formatter.formatAll(picked, viewer) };
    if (next) page.next_batch = formatTopologicalToken(next);
    if (options.from) page.prev_batch = options.from;
    if (options.recurse !== undefined) page.recursion_depth = depth;
    return page;
  }

  /**
   * Thread roots of a room the user may see, by their thread's latest activity, newest
   * first; `participated`: only threads the user started or replied in. `from` is a
   * `next_batch` (the latest activity, a stream position, of the last thread given).
   */
  async threads(roomId: string, viewer: Viewer, options: { include: 'all' | 'participated'; from?: string; limit: number }): Promise<ThreadsPage> {
    let before = Number.MAX_SAFE_INTEGER;
    if (options.from !== undefined) {
      if (!/^-?\d{1,15}$/.test(options.from)) throw new TokenError(`invalid token ${JSON.stringify(options.from)}`);
      before = Number(options.from);
    }
    const membership = await this.rooms.membership(roomId, viewer.userId);
    const roots: StoredEvent[] = [];
    let next: number | undefined;
    let lastLatest: number | undefined;
    const participant = options.include === 'participated' ? viewer.userId : undefined;
    outer: for (;;) {
      const rows = await this.rooms.relations.threads(roomId, { before, limit: options.limit + 1, ...(participant ? { participant } : {}) });
      for (const row of rows) {
        before = row.latest;
        const root = await this.rooms.getEvent(row.rootId);
        if (!root || root.event.room_id !== roomId || !(await this.visibility.canSee(viewer.userId, root, membership))) continue;
        if (roots.length === options.limit) {
          next = lastLatest;
          break outer;
        }
        roots.push(root);
        lastLatest = row.latest;
      }
      if (rows.length < options.limit + 1) break;
    }
    const page: ThreadsPage = { chunk: await this.formatter.formatAll(roots, viewer) };
    if (next !== undefined) page.next_batch = String(next);
    return page;
  }

  /** Where a pagination token (ours, /messages' or /sync's) lies in the room's topological order. */
  private async positionOf(roomId: string, text: string): Promise<TopologicalPosition> {
    const token = parsePaginationToken(text);
    return 'topological' in token ? token.topological : this.rooms.timeline.positionAtStream(roomId, token.sync.stream);
  }
}

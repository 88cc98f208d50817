import { splitStateKey, stateKey } from '../events/event.ts';
import { isValidRoomId } from '../events/identifiers.ts';
import { publicRoomChunk } from '../rooms/directory.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { CodedError } from '../util/coded-error.ts';

/**
 * The space hierarchy (client-server GET /rooms/{roomId}/hierarchy, §Spaces): a depth-first
 * walk from a space through its `m.space.child` state events, over the rooms this server
 * holds, with each room the user may see summarised. `m.space.parent` is not read: the spec
 * has the walk follow children only.
 */

export const DEFAULT_HIERARCHY_LIMIT = 50;
export const MAX_HIERARCHY_LIMIT = 100;
export const MAX_HIERARCHY_DEPTH = 50;
/** Rooms one walk visits at most, whatever the pages asked for, so a huge or cyclic tree is bounded. */
const MAX_ROOMS_WALKED = 1000;

export class HierarchyError extends CodedError {
  override name = 'HierarchyError';
  constructor(
    override readonly status: 400 | 403,
    override readonly errcode: 'M_INVALID_PARAM' | 'M_FORBIDDEN',
    message: string,
  ) {
    super(status, errcode, message);
  }
}

export interface HierarchyRequest {
  userId: string;
  roomId: string;
  suggestedOnly: boolean;
  limit: number;
  maxDepth: number;
  from?: string;
}

export type StrippedChildState = { type: string; state_key: string; content: Record<string, unknown>; sender: string; origin_server_ts: number };

export type HierarchyRoom = Record<string, unknown> & { room_id: string; children_state: StrippedChildState[] };

export interface HierarchyPage {
  rooms: HierarchyRoom[];
  next_batch?: string;
}

/** An `m.space.child` event that names a child: its state key is a room ID and `via` a non-empty list of servers. */
function validChild(stored: StoredEvent): boolean {
  const via = stored.event.content['via'];
  return isValidRoomId(stored.event.state_key ?? '') && Array.isArray(via) && via.length > 0 && via.every((v) => typeof v === 'string');
}

/** `order` as the spec has it: printable ASCII, at most 50 characters; anything else counts as absent. */
function orderOf(content: Record<string, unknown>): string | undefined {
  const order = content['order'];
  return typeof order === 'string' && order.length <= 50 && /^[\x20-\x7E]*$/.test(order) ? order : undefined;
}

/** Children in the spec's order: those with `order` first, by it; then by origin_server_ts; then by room ID. */
function compareChildren(a: StoredEvent, b: StoredEvent): number {
  return compareStripped(
    { content: a.event.content, origin_server_ts: a.event.origin_server_ts, state_key: a.event.state_key! },
    { content: b.event.content, origin_server_ts: b.event.origin_server_ts, state_key: b.event.state_key! },
  );
}

function compareStripped(a: Pick<StrippedChildState, 'content' | 'origin_server_ts' | 'state_key'>, b: Pick<StrippedChildState, 'content' | 'origin_server_ts' | 'state_key'>): number {
  const [oa, ob] = [orderOf(a.content), orderOf(b.content)];
  if (oa !== undefined && ob === undefined) return -1;
  if (oa === undefined && ob !== undefined) return 1;
  if (oa !== undefined && ob !== undefined && oa !== ob) return oa < ob ? -1 : 1;
  if (a.origin_server_ts !== b.origin_server_ts) return a.origin_server_ts - b.origin_server_ts;
  return a.state_key < b.state_key ? -1 : a.state_key > b.state_key ? 1 : 0;
}

/** A child as another server described it, if it has the shape of one (the walk trusts nothing else of it). */
function wellFormedChild(c: unknown): c is StrippedChildState {
  if (typeof c !== 'object' || c === null) return false;
  const child = c as Record<string, unknown>;
  const content = child['content'];
  return child['type'] === 'm.space.child' && typeof child['state_key'] === 'string' && isValidRoomId(child['state_key']) && typeof child['origin_server_ts'] === 'number'
    && typeof content === 'object' && content !== null && Array.isArray((content as Record<string, unknown>)['via']) && ((content as Record<string, unknown>)['via'] as unknown[]).length > 0;
}

/** `from`: where the last page ended in the walk, with the walk's parameters, which may not change between pages. */
function formatFrom(offset: number, maxDepth: number, suggestedOnly: boolean): string {
  return `h${offset}_${maxDepth}_${suggestedOnly ? 1 : 0}`;
}

function parseFrom(text: string, maxDepth: number, suggestedOnly: boolean): number {
  const match = /^h(\d{1,6})_(\d{1,3})_([01])$/.exec(text);
  if (!match) throw new HierarchyError(400, 'M_INVALID_PARAM', `unknown from token ${JSON.stringify(text)}`);
  if (Number(match[2]) !== maxDepth || (match[3] === '1') !== suggestedOnly) {
    throw new HierarchyError(400, 'M_INVALID_PARAM', 'suggested_only and max_depth cannot change on paginated requests');
  }
  return Number(match[1]);
}

/** What another server answers on /_matrix/federation/v1/hierarchy/{roomId} (server-server §Spaces). */
export interface FederationHierarchy {
  room: HierarchyRoom;
  children: HierarchyRoom[];
  inaccessible_children: string[];
}

/** Asks a server for a room's hierarchy (the federation client, from the composition root's services). */
export type RemoteHierarchy = (server: string, roomId: string, suggestedOnly: boolean) => Promise<FederationHierarchy>;

/** Servers asked at most per walk, so a space full of unreachable rooms answers in bounded time. */
const MAX_REMOTE_ASKS = 10;

export class SpaceHierarchy {
  constructor(
    private readonly rooms: Rooms,
    /** Without it, rooms this server does not hold are left out. */
    private readonly remote?: RemoteHierarchy,
  ) {}

  /**
   * Whether another server may see a room's summary (server-server GET /hierarchy): anyone may
   * join or knock, its history is world-readable, one of that server's users is joined or
   * invited, or the join rule is restricted (the asking server checks the allowed rooms).
   */
  async accessibleToServer(roomId: string, server: string, state: Map<string, StoredEvent>): Promise<boolean> {
    const content = (type: string) => state.get(stateKey(type, ''))?.event.content ?? {};
    if (content('m.room.history_visibility')['history_visibility'] === 'world_readable') return true;
    const rule = content('m.room.join_rules')['join_rule'];
    if (rule === 'public' || rule === 'knock' || rule === 'knock_restricted' || rule === 'restricted') return true;
    for (const membership of ['join', 'invite']) {
      if ((await this.rooms.members(roomId, membership)).some((u) => u.endsWith(`:${server}`))) return true;
    }
    return false;
  }

  /** This server's answer to another's GET /_matrix/federation/v1/hierarchy/{roomId}; undefined for 404. */
  async forServer(roomId: string, server: string, suggestedOnly: boolean): Promise<FederationHierarchy | undefined> {
    if (!(await this.rooms.exists(roomId))) return undefined;
    const state = await this.stateByKey(roomId);
    if (!(await this.accessibleToServer(roomId, server, state))) return undefined;
    const answer: FederationHierarchy = { room: await this.summary(roomId, state), children: [], inaccessible_children: [] };
    for (const child of this.children(state)) {
      if (suggestedOnly && child.event.content['suggested'] !== true) continue;
      const childId = child.event.state_key!;
      if (!(await this.rooms.exists(childId))) continue;
      const childState = await this.stateByKey(childId);
      if (await this.accessibleToServer(childId, server, childState)) answer.children.push(await this.summary(childId, childState));
      else answer.inaccessible_children.push(childId);
    }
    return answer;
  }

  /** A summary another server gave: may the user see it (the same list as for local rooms, from what the summary says)? */
  private async remoteAccessible(summary: HierarchyRoom, userId: string): Promise<boolean> {
    const membership = await this.rooms.localMembership(userId, summary.room_id);
    if (membership?.membership === 'ban') return false;
    if (membership?.membership === 'join' || membership?.membership === 'invite') return true;
    if (summary['world_readable'] === true) return true;
    const rule = summary['join_rule'] ?? 'public';
    if (rule === 'public' || rule === 'knock' || rule === 'knock_restricted') return true;
    if (rule === 'restricted' && Array.isArray(summary['allowed_room_ids'])) {
      for (const allowed of summary['allowed_room_ids'] as unknown[]) {
        if (typeof allowed === 'string' && (await this.rooms.membership(allowed, userId).catch(() => undefined)) === 'join') return true;
      }
    }
    return false;
  }

  /**
   * Whether a user may see a room's summary (the spec's list for `rooms`): they are joined or
   * invited, anyone may join or knock, they belong to a room a restricted join rule allows, or
   * its history is world-readable.
   */
  async accessible(roomId: string, userId: string, state: Map<string, StoredEvent>): Promise<boolean> {
    const membership = (await this.rooms.membership(roomId, userId)) ?? 'leave';
    if (membership === 'ban') return false;
    if (membership === 'join' || membership === 'invite') return true;
    const content = (type: string) => state.get(stateKey(type, ''))?.event.content ?? {};
    if (content('m.room.history_visibility')['history_visibility'] === 'world_readable') return true;
    const rule = content('m.room.join_rules')['join_rule'];
    if (rule === 'public' || rule === 'knock' || rule === 'knock_restricted') return true;
    if (rule === 'restricted') {
      for (const roomIdAllowed of allowedRoomIds(content('m.room.join_rules'))) {
        if ((await this.rooms.membership(roomIdAllowed, userId)) === 'join') return true;
      }
    }
    return false;
  }

  async page(request: HierarchyRequest): Promise<HierarchyPage> {
    const { userId, roomId, suggestedOnly, maxDepth } = request;
    const offset = request.from === undefined ? 0 : parseFrom(request.from, maxDepth, suggestedOnly);
    const rootState = (await this.rooms.exists(roomId)) ? await this.stateByKey(roomId) : undefined;
    if (!rootState || !(await this.accessible(roomId, userId, rootState))) {
      throw new HierarchyError(403, 'M_FORBIDDEN', 'You are not allowed to view this room.');
    }

    // The whole walk, up to the page's end and one room past it: local rooms are cheap to summarise again.
    const wanted = offset + request.limit + 1;
    const out: HierarchyRoom[] = [];
    const visited = new Set<string>();
    const stack: { roomId: string; depth: number; via: string[] }[] = [{ roomId, depth: 0, via: [] }];
    let asks = 0;
    while (stack.length > 0 && out.length < wanted && visited.size < MAX_ROOMS_WALKED) {
      const next = stack.pop()!;
      if (visited.has(next.roomId)) continue;
      visited.add(next.roomId);
      let summary: HierarchyRoom;
      if (await this.rooms.exists(next.roomId)) {
        const state = next.roomId === roomId ? rootState : await this.stateByKey(next.roomId);
        if (!(await this.accessible(next.roomId, userId, state))) continue;
        summary = await this.summary(next.roomId, state);
      } else {
        // A room this server does not hold: asked of the servers its m.space.child event names, in order.
        let found: HierarchyRoom | undefined;
        for (const server of next.via) {
          if (!this.remote || asks >= MAX_REMOTE_ASKS) break;
          asks++;
          try {
            const answer = await this.remote(server, next.roomId, suggestedOnly);
            if (answer.room?.room_id === next.roomId && Array.isArray(answer.room.children_state)) found = answer.room;
          } catch {
            // unreachable, or it does not hold the room either: the next server
          }
          if (found) break;
        }
        if (!found || !(await this.remoteAccessible(found, userId))) continue;
        summary = found;
      }
      out.push(summary);
      if (next.depth >= maxDepth) continue;
      const children = (summary.children_state as unknown[]).filter(wellFormedChild).filter((c) => !suggestedOnly || c.content['suggested'] === true).sort(compareStripped);
      // Pushed last-first, so the first child is walked next (depth first, in the spec's order).
      for (const child of children.reverse()) {
        const via = (child.content['via'] as unknown[]).filter((v): v is string => typeof v === 'string');
        stack.push({ roomId: child.state_key, depth: next.depth + 1, via });
      }
    }
    const page: HierarchyPage = { rooms: out.slice(offset, offset + request.limit) };
    if (out.length > offset + request.limit) page.next_batch = formatFrom(offset + request.limit, maxDepth, suggestedOnly);
    return page;
  }

  private stateByKey(roomId: string): Promise<Map<string, StoredEvent>> {
    return this.rooms.currentState(roomId);
  }

  /** A space's valid children, in order; none for a room that is not a space. */
  private children(state: Map<string, StoredEvent>): StoredEvent[] {
    if (state.get(stateKey('m.room.create', ''))?.event.content['type'] !== 'm.space') return [];
    const children: StoredEvent[] = [];
    for (const [key, stored] of state) {
      if (splitStateKey(key)[0] === 'm.space.child' && validChild(stored)) children.push(stored);
    }
    return children.sort(compareChildren);
  }

  /** The room's `SpaceHierarchyRoomsChunk`. */
  async summary(roomId: string, state: Map<string, StoredEvent>): Promise<HierarchyRoom> {
    const content = (type: string) => state.get(stateKey(type, ''))?.event.content ?? {};
    const joinRules = content('m.room.join_rules');
    const room: HierarchyRoom = {
      ...(await publicRoomChunk(this.rooms, roomId, state)),
      children_state: this.children(state).map((c) => ({
        type: c.event.type,
        state_key: c.event.state_key!,
        content: c.event.content,
        sender: c.event.sender,
        origin_server_ts: c.event.origin_server_ts,
      })),
    };
    const version = await this.rooms.roomVersion(roomId);
    if (version) room['room_version'] = version.id;
    if (content('m.room.encryption')['algorithm'] === 'm.megolm.v1.aes-sha2') room['encryption'] = 'm.megolm.v1.aes-sha2';
    const allowed = allowedRoomIds(joinRules);
    if (allowed.length > 0) room['allowed_room_ids'] = allowed;
    return room;
  }
}

/** The rooms a restricted join rule's `allow` list names. */
function allowedRoomIds(joinRules: Record<string, unknown>): string[] {
  const rule = joinRules['join_rule'];
  if (rule !== 'restricted' && rule !== 'knock_restricted') return [];
  const allow = Array.isArray(joinRules['allow']) ? (joinRules['allow'] as unknown[]) : [];
  return allow
    .map((a) => (typeof a === 'object' && a !== null && (a as Record<string, unknown>)['type'] === 'm.room_membership' ? (a as Record<string, unknown>)['room_id'] : undefined))
    .filter((id): id is string => typeof id === 'string' && isValidRoomId(id));
}

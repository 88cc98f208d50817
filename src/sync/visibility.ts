import { splitStateKey, stateKey, type StateKey } from '../events/event.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { comparePositions, positionAfter, positionBefore } from '../rooms/timeline.ts';
import { CodedError } from '../util/coded-error.ts';

/** An event or room the user may not read: 403 `M_FORBIDDEN`, as Synapse answers (not a 404 that hides it). */
export class NotVisibleError extends CodedError {
  override name = 'NotVisibleError';
  constructor(message: string) {
    super(403, 'M_FORBIDDEN', message);
  }
}

/** How far back through a user's membership changes the `shared` rule looks for their last join. */
const MAX_MEMBERSHIP_STEPS = 100;

/**
 * History visibility (client-server §Room history visibility): whether a user may
 * see an event, from the room's state at that event. Rejected, soft-failed and
 * outlier events are never served.
 */
export class Visibility {
  constructor(
    private readonly rooms: Rooms,
    /** Whom a user ignores: their non-state events are never shown to that user. */
    private readonly ignoredBy: (userId: string) => Promise<ReadonlySet<string>> = async () => new Set(),
    /** The stream position a sender's account was erased at, if it was: what they said goes redacted to those not there. */
    private readonly erasedAt: (userId: string) => Promise<number | undefined> = async () => undefined,
  ) {}

  /** Whether the account that sent an event was erased (`/account/deactivate` with `erase`). */
  async senderErased(userId: string): Promise<boolean> {
    return (await this.erasedAt(userId)) !== undefined;
  }

  /**
   * Whether the viewer is served only a redacted copy of an event: its sender's account was
   * erased, and the viewer was not joined to the room when it was sent (client-server §Account
   * deactivation, `erase`; who was not there at the event, as Synapse decides it).
   */
  async erasedFor(viewer: string, stored: StoredEvent): Promise<boolean> {
    if (!(await this.senderErased(stored.event.sender))) return false;
    const state = await this.rooms.stateBefore(stored);
    const memberNid = state?.get(stateKey('m.room.member', viewer));
    const member = memberNid === undefined ? undefined : await this.rooms.getEventByNid(memberNid);
    return member?.event.content['membership'] !== 'join';
  }

  async canSee(userId: string, stored: StoredEvent, currentMembership?: string): Promise<boolean> {
    if (stored.rejected || stored.softFailed || stored.outlier || stored.stateSnapshot === null) return false;
    const event = stored.event;
    // A redaction is shown once it applies: never one of an event of another room, of an event not
    // yet received, or by a server that may not redact it (rooms/fragments/v3-handling-redactions).
    if (event.type === 'm.room.redaction' && !(await this.rooms.redactionApplies(event.event_id))) return false;
    // Ignoring a user hides what they say, not the room's state (client-server §Ignoring users).
    if (event.state_key === undefined && (await this.ignoredBy(userId)).has(event.sender)) return false;
    // Users always see their own membership changes (a leave, a kick, a ban).
    if (event.type === 'm.room.member' && event.state_key === userId) return true;
    const state = await this.rooms.stateBefore(stored);
    if (!state) return false;
    const visibilityNid = state.get(stateKey('m.room.history_visibility', ''));
    const visibilityEvent = visibilityNid === undefined ? undefined : await this.rooms.getEventByNid(visibilityNid);
    const visibility = String(visibilityEvent?.event.content['history_visibility'] ?? 'shared');
    if (visibility === 'world_readable') return true;

    const memberNid = state.get(stateKey('m.room.member', userId));
    const member = memberNid === undefined ? undefined : await this.rooms.getEventByNid(memberNid);
    const membership = member?.event.content['membership'] as string | undefined;
    if (membership === 'join') return true;
    if (visibility === 'invited') return membership === 'invite';
    if (visibility === 'shared') {
      // Visible to a user joined at any point after the event: a member now, or one whose
      // last time in the room ended after it (a former member sees what came before they left).
      const current = currentMembership ?? (await this.rooms.membership(event.room_id, userId));
      if (current === 'join') return true;
      const until = await this.lastJoinEnded(event.room_id, userId);
      return until !== undefined && comparePositions(positionAfter(stored), positionBefore(until)) <= 0;
    }
    return false;
  }

  /**
   * Whether another server may see an event in full (server-server §Backfilling: history
   * visibility applies to servers too): under `shared` and `world_readable` always; under
   * `invited` when one of its users was invited or joined at the event, under `joined` when
   * one was joined. A server always sees its own users' membership events. Events it may
   * not see are served redacted, so its copy of the DAG stays whole.
   */
  async serverMaySee(serverName: string, stored: StoredEvent): Promise<boolean> {
    const event = stored.event;
    // An erased account's events go redacted to every server, as Synapse serves them.
    if (await this.senderErased(event.sender)) return false;
    const ofServer = (userId: string) => userId.endsWith(`:${serverName}`);
    if (event.type === 'm.room.member' && event.state_key !== undefined && ofServer(event.state_key)) return true;
    const state = await this.rooms.stateBefore(stored);
    if (!state) return false;
    const visibilityNid = state.get(stateKey('m.room.history_visibility', ''));
    const visibility = String((visibilityNid === undefined ? undefined : await this.rooms.getEventByNid(visibilityNid))?.event.content['history_visibility'] ?? 'shared');
    if (visibility === 'shared' || visibility === 'world_readable') return true;
    const allowed = visibility === 'invited' ? ['join', 'invite'] : ['join'];
    for (const [key, nid] of state) {
      const [type, userId] = splitStateKey(key);
      if (type !== 'm.room.member' || !ofServer(userId)) continue;
      const membership = (await this.rooms.getEventByNid(nid))?.event.content['membership'];
      if (typeof membership === 'string' && allowed.includes(membership)) return true;
    }
    return false;
  }

  /** The member event that ended the user's latest time joined to the room (a leave, a ban), if they were ever joined. */
  private async lastJoinEnded(roomId: string, userId: string): Promise<StoredEvent | undefined> {
    let event = await this.rooms.currentStateEvent(roomId, 'm.room.member', userId);
    for (let steps = 0; event && event.streamOrdering !== null && steps < MAX_MEMBERSHIP_STEPS; steps++) {
      const previous = event.replacesState === null ? undefined : await this.rooms.getEventByNid(event.replacesState);
      if (previous?.event.content['membership'] === 'join') return event;
      event = previous;
    }
    return undefined;
  }

  /**
   * The room state a user may read (GET /state, /members, /joined_members): the current
   * state for members and world-readable rooms, the state as it was when they left for
   * former members; undefined for anyone else, a banned user too (as Synapse: no state at
   * the ban, which clients and the suites take for being out).
   */
  async readableState(roomId: string, userId: string): Promise<Map<StateKey, StoredEvent> | undefined> {
    if (!(await this.rooms.exists(roomId))) return undefined;
    const membership = await this.rooms.membership(roomId, userId);
    if (membership === 'join') return this.rooms.currentState(roomId);
    const history = (await this.rooms.currentStateEvent(roomId, 'm.room.history_visibility', ''))?.event.content['history_visibility'];
    if (history === 'world_readable') return this.rooms.currentState(roomId);
    if (membership === 'leave') {
      const member = await this.rooms.currentStateEvent(roomId, 'm.room.member', userId);
      const state = member ? await this.rooms.stateAtEvent(member.event.event_id, 'after') : undefined;
      if (state) return this.rooms.loadStateEvents(state);
    }
    return undefined;
  }

  /** Whether the user may read the room at all (what readableState decides), without loading its state when the answer is plain. */
  async mayRead(roomId: string, userId: string): Promise<boolean> {
    if (!(await this.rooms.exists(roomId))) return false;
    if ((await this.rooms.membership(roomId, userId)) === 'join') return true;
    if ((await this.rooms.currentStateEvent(roomId, 'm.room.history_visibility', ''))?.event.content['history_visibility'] === 'world_readable') return true;
    return (await this.readableState(roomId, userId)) !== undefined;
  }

  async filter(userId: string, events: StoredEvent[]): Promise<StoredEvent[]> {
    if (events.length === 0) return events;
    const current = await this.rooms.membership(events[0]!.event.room_id, userId);
    const out: StoredEvent[] = [];
    for (const stored of events) if (await this.canSee(userId, stored, current)) out.push(stored);
    return out;
  }
}

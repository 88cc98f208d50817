import type { JsonObject } from '../crypto/canonical-json.ts';
import { redactEvent } from '../events/redaction.ts';
import { redactsOf } from '../events/auth.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import { relationOf, type RelationSummary } from '../rooms/relations.ts';
import type { Visibility } from './visibility.ts';

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

/** A client event without `room_id`, as /sync nests it under its room. */
export type RoomlessClientEvent = Omit<ClientEvent, 'room_id'>;

/**
 * `event` without `room_id`, copied field by field: eight times faster than a rest spread, which
 * counts in a big room's initial /sync (10,000 state events). The check below fails to compile
 * when ClientEvent gains a field this does not copy.
 */
export function withoutRoomId(event: ClientEvent): RoomlessClientEvent {
  const out: RoomlessClientEvent = { event_id: event.event_id, type: event.type, content: event.content, sender: event.sender, origin_server_ts: event.origin_server_ts };
  if (event.state_key !== undefined) out.state_key = event.state_key;
  if (event.redacts !== undefined) out.redacts = event.redacts;
  if (event.unsigned !== undefined) out.unsigned = event.unsigned;
  return out;
}
const copiedFields = ['event_id', 'type', 'content', 'sender', 'origin_server_ts', 'state_key', 'redacts', 'unsigned'] as const;
type Uncopied = Exclude<keyof RoomlessClientEvent, (typeof copiedFields)[number]>;
const allCopied: [Uncopied] extends [never] ? true : Uncopied = true;
void allCopied;

/**
 * Whether a message has passed its `org.matrix.self_destruct_after` (MSC2228), a time in ms since the epoch
 * its sender set: from then on it is served as if redacted. State events never self-destruct (as in Synapse).
 */
export function selfDestructed(event: { state_key?: string; content: Record<string, unknown> }, now: number): boolean {
  const after = event.content['org.matrix.self_destruct_after'];
  return event.state_key === undefined && typeof after === 'number' && Number.isSafeInteger(after) && now >= after;
}

export interface Viewer {
  userId: string;
  deviceId?: string;
}

/** Turns stored PDUs into client events: redactions applied, unsigned filled in. */
export class EventFormatter {
  /** Relation summaries asked for in the same tick, per viewer: one batched index query for them all. */
  private readonly summaryBatches = new Map<string, { ids: Set<string>; result: Promise<Map<string, RelationSummary>> }>();

  constructor(
    private readonly rooms: Rooms,
    private readonly now: () => number,
    /** Erased accounts: their events go redacted to viewers who were not there (sync's Visibility). */
    private readonly erasure?: Pick<Visibility, 'senderErased' | 'erasedFor'>,
  ) {}

  /** Whether a message has self-destructed by now (MSC2228): search leaves it out, as its words are gone. */
  hasSelfDestructed(event: { state_key?: string; content: Record<string, unknown> }): boolean {
    return selfDestructed(event, this.now());
  }

  /** `bundle: false` leaves out bundled aggregations (for events inside another event's). */
  async format(stored: StoredEvent, viewer?: Viewer, options: { withRedactedBecause?: boolean; bundle?: boolean } = {}): Promise<ClientEvent> {
    const event = stored.event;
    // Asked before the first await, so events formatted together share one query.
    const summary = options.bundle === false || event.state_key !== undefined ? undefined : this.relationSummary(event.event_id, viewer?.userId ?? '');
    const version = (await this.rooms.roomVersion(event.room_id))!;
    const redaction = stored.redactedBy ? await this.rooms.getEvent(stored.redactedBy) : undefined;
    const previous = stored.replacesState !== null ? await this.rooms.getEventByNid(stored.replacesState) : undefined;
    const erased = viewer !== undefined && this.erasure !== undefined && (await this.erasure.erasedFor(viewer.userId, stored));
    const out = this.build(stored, version, redaction, previous, erased);
    const unsigned = out.unsigned!;
    if (redaction) {
      // The ID beside the event, as Synapse sends both: clients read either.
      unsigned['redacted_by'] = redaction.event.event_id;
      if (options.withRedactedBecause !== false) unsigned['redacted_because'] = await this.format(redaction, viewer, { withRedactedBecause: false, bundle: false });
    }
    if (viewer?.deviceId && viewer.userId === event.sender) {
      const txnId = await this.rooms.transactionIdOf(event.event_id, viewer.userId, viewer.deviceId);
      if (txnId !== undefined) unsigned['transaction_id'] = txnId;
    }
    if (!redaction && this.hasSelfDestructed(event)) {
      // Past its org.matrix.self_destruct_after (MSC2228): shown as if redacted, with nothing bundled.
      out.content = redactEvent(event, version)['content'] as JsonObject;
      return out;
    }
    const relations = summary && (await this.bundledAggregations(stored, await summary, viewer));
    if (relations) unsigned['m.relations'] = relations;
    return out;
  }

  /** The client event with what format() reads already at hand (its redaction, the state event it replaces). */
  private build(stored: StoredEvent, version: RoomVersion, redaction: StoredEvent | undefined, previous: StoredEvent | undefined, erased = false): ClientEvent {
    const event = stored.event;
    const content = (redaction || erased ? redactEvent(event, version)['content'] : event.content) as JsonObject;
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
    if (previous) {
      unsigned['replaces_state'] = previous.event.event_id;
      unsigned['prev_content'] = previous.redactedBy ? redactEvent(previous.event, version)['content'] : previous.event.content;
      unsigned['prev_sender'] = previous.event.sender;
    }
    for (const key of ['invite_room_state', 'knock_room_state']) if (event.unsigned?.[key]) unsigned[key] = event.unsigned[key];
    out.unsigned = unsigned;
    return out;
  }

  private relationSummary(eventId: string, userId: string): Promise<RelationSummary | undefined> {
    let batch = this.summaryBatches.get(userId);
    if (!batch) {
      const ids = new Set<string>();
      const result = Promise.resolve().then(() => {
        this.summaryBatches.delete(userId);
        return this.rooms.relations.summaries([...ids], userId);
      });
      batch = { ids, result };
      this.summaryBatches.set(userId, batch);
    }
    batch.ids.add(eventId);
    return batch.result.then((all) => all.get(eventId));
  }

  /**
   * unsigned.m.relations (client-server §Aggregations of child events, v1.7+): the applicable
   * edit as a whole event (none on a redacted event or on an edit), the thread's count, latest
   * event and whether the viewer took part, and the IDs of references. Annotations are not bundled.
   */
  private async bundledAggregations(stored: StoredEvent, summary: RelationSummary | undefined, viewer: Viewer | undefined): Promise<Record<string, unknown> | undefined> {
    if (!summary) return undefined;
    const event = stored.event;
    const out: Record<string, unknown> = {};
    if (summary.has('m.replace') && !stored.redactedBy && relationOf(event)?.relType !== 'm.replace') {
      const edit = await this.rooms.relations.latestEdit(event);
      if (edit) out['m.replace'] = await this.format(edit, viewer, { bundle: false });
    }
    const thread = summary.get('m.thread');
    if (thread) {
      const latest = await this.rooms.relations.latestInThread(event);
      if (latest) {
        // The latest event shows as edited, as Synapse bundles it, so a thread summary is current.
        const latestEvent = await this.format(latest, viewer, { bundle: false });
        const latestEdit = await this.rooms.relations.latestEdit(latest.event);
        if (latestEdit && !latest.redactedBy) latestEvent.unsigned = { ...latestEvent.unsigned, 'm.relations': { 'm.replace': await this.format(latestEdit, viewer, { bundle: false }) } };
        out['m.thread'] = {
          latest_event: latestEvent,
          count: thread.count,
          current_user_participated: thread.mine > 0 || (viewer !== undefined && viewer.userId === event.sender),
        };
      }
    }
    if (summary.has('m.reference')) out['m.reference'] = { chunk: (await this.rooms.relations.references(event)).map((id) => ({ event_id: id })) };
    return Object.keys(out).length > 0 ? out : undefined;
  }

  /**
   * format() of each event. State events that are not redacted nor the viewer's (a big room's
   * 10,000 in an initial /sync) are built without a turn of the event loop each: the room
   * version read once per room, the state events they replace read together.
   */
  async formatAll(events: readonly StoredEvent[], viewer?: Viewer): Promise<ClientEvent[]> {
    // Senders whose accounts were erased: their events go through format(), which may redact them for the viewer.
    const erasedSenders = new Set<string>();
    if (viewer && this.erasure) {
      for (const sender of new Set(events.map((e) => e.event.sender))) if (await this.erasure.senderErased(sender)) erasedSenders.add(sender);
    }
    const plain = (e: StoredEvent) => e.event.state_key !== undefined && !e.redactedBy && !(viewer?.deviceId && viewer.userId === e.event.sender) && !erasedSenders.has(e.event.sender);
    const versions = new Map<string, RoomVersion>();
    const replaced: number[] = [];
    for (const e of events) {
      if (!plain(e)) continue;
      if (!versions.has(e.event.room_id)) versions.set(e.event.room_id, (await this.rooms.roomVersion(e.event.room_id))!);
      if (e.replacesState !== null) replaced.push(e.replacesState);
    }
    const previous = new Map((await this.rooms.getEventsByNid(replaced)).map((p, i) => [replaced[i]!, p]));
    // The plain ones built here and now, not each through a promise of its own (10,000 microtasks in a big room).
    const out = new Array<ClientEvent>(events.length);
    const others: Promise<void>[] = [];
    events.forEach((e, i) => {
      if (plain(e)) out[i] = this.build(e, versions.get(e.event.room_id)!, undefined, e.replacesState === null ? undefined : previous.get(e.replacesState));
      else others.push(this.format(e, viewer).then((formatted) => void (out[i] = formatted)));
    });
    await Promise.all(others);
    return out;
  }
}

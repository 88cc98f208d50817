import { canonicalJson, utf8 } from '../crypto/canonical-json.ts';
import { randomToken } from '../crypto/random.ts';
import { authEventSelection, checkEventAuth } from '../events/auth.ts';
import { stateKey, type RoomEvent, type StateKey } from '../events/event.ts';
import { byteLength, MAX_ID_BYTES } from '../events/identifiers.ts';
import { asRoomEvent, isCreateEvent, signNewEvent, withoutDerivedRoomId, type PDU } from '../events/pdu.ts';
import { AuthError, domainOf } from '../events/power-levels.ts';
import type { RoomVersion } from '../events/room-versions.ts';
import { RoomError, roomNotFound } from './errors.ts';
import type { RoomStore } from './room-store.ts';
import type { EventTemplate } from './types.ts';

export const MAX_EVENT_BYTES = 65_536;
const MAX_PREV_EVENTS = 10;

/** Looks up a state event by (type, state key) in the state a new event is built against. */
export type StateLookup = (key: StateKey) => Promise<RoomEvent | undefined>;

/**
 * Builds new local events: prev events, depth and auth events from the room as it
 * is, then hashed and signed (the event ID comes from the same bytes the signature
 * covers) and checked against the auth rules.
 */
export class EventBuilder {
  constructor(private readonly store: RoomStore) {}

  /**
   * A signed event built from a template, refused (`RoomError('forbidden')`) when the auth rules
   * do not allow it. `roomId` is undefined only for a v12+ create event, whose ID gives the room's.
   * `originServerTs` replaces the clock's time (another try at a v12+ room ID already taken).
   */
  async build(
    roomId: string | undefined,
    version: RoomVersion,
    template: EventTemplate,
    prevEvents: RoomEvent[],
    lookup: StateLookup,
    originServerTs?: number,
  ): Promise<RoomEvent> {
    const { serverName, keyId, signingKey } = this.store.options;
    const { unsigned, authEvents } = await this.skeleton(roomId, version, template, prevEvents, lookup, originServerTs);
    const signed = await signNewEvent(unsigned, version, serverName, keyId, signingKey);
    const event = asRoomEvent(signed.event as unknown as PDU, signed.eventId, version);
    checkEventSize(event, version);
    await this.authorise(event, version, authEvents);
    return event;
  }

  /**
   * An unsigned event built against the room's current state (prev events, auth
   * events, depth) and checked against the auth rules: what make_join, make_leave
   * and make_knock hand a remote server to sign.
   */
  async prepare(roomId: string, template: EventTemplate): Promise<{ version: RoomVersion; event: Record<string, unknown> }> {
    const head = await this.store.head(roomId);
    if (!head?.current) throw roomNotFound(roomId);
    const state = head.current.state;
    const lookup = async (key: StateKey) => {
      const nid = state.get(key);
      return nid === undefined ? undefined : (await this.store.getEventByNid(nid))?.event;
    };
    const prevEvents = await this.eventsOf(head.extremities);
    const { unsigned, authEvents } = await this.skeleton(roomId, head.version, template, prevEvents, lookup);
    // Checked as it will be once signed: a restricted join's authoriser's server (us, the resident) signs it at send_join.
    const authoriser = (unsigned['content'] as { join_authorised_via_users_server?: unknown } | undefined)?.join_authorised_via_users_server;
    const signatures = typeof authoriser === 'string' ? { [domainOf(authoriser)]: { 'ed25519:at_send_join': '' } } : {};
    await this.authorise({ ...unsigned, signatures } as unknown as RoomEvent, head.version, authEvents);
    return { version: head.version, event: unsigned };
  }

  /** The events of some IDs we hold (a room's extremities, for prev events). */
  async eventsOf(eventIds: readonly string[]): Promise<RoomEvent[]> {
    return (await Promise.all(eventIds.map((id) => this.store.getEvent(id)))).filter((e) => !!e).map((e) => e.event);
  }

  private async authorise(event: RoomEvent, version: RoomVersion, authEvents: RoomEvent[]): Promise<void> {
    const authMap = new Map(authEvents.map((e) => [stateKey(e.type, e.state_key ?? ''), e]));
    try {
      await checkEventAuth(event, (type, key) => authMap.get(stateKey(type, key)), version, this.store.options.ed25519);
    } catch (e) {
      if (e instanceof AuthError) throw new RoomError('forbidden', e.message);
      throw e;
    }
  }

  /**
   * The fields of a new event other than hashes and signatures, and the events the auth rules
   * read for it. From v12 the create event is among those but not listed in auth_events (its
   * room_id implies it), and the create event itself has no room_id.
   */
  private async skeleton(
    roomId: string | undefined,
    version: RoomVersion,
    template: EventTemplate,
    prevEvents: RoomEvent[],
    lookup: StateLookup,
    originServerTs?: number,
  ): Promise<{ unsigned: Record<string, unknown>; authEvents: RoomEvent[] }> {
    const { serverName } = this.store.options;
    const authEvents: RoomEvent[] = [];
    const partial = { type: template.type, sender: template.sender, state_key: template.state_key, content: template.content };
    for (const [type, key] of authEventSelection(version, partial)) {
      const event = await lookup(stateKey(type, key));
      if (event && !authEvents.includes(event)) authEvents.push(event);
    }
    const listed = version.roomIdFromCreateEvent ? authEvents.filter((e) => !isCreateEvent(e)) : authEvents;
    const reference = (e: RoomEvent) => (version.eventReferences === 'pairs' ? ([e.event_id, { sha256: e.hashes.sha256 }] as [string, { sha256: string }]) : e.event_id);
    const unsigned: Record<string, unknown> = {
      sender: template.sender,
      type: template.type,
      content: template.content,
      origin_server_ts: originServerTs ?? this.store.options.now(),
      depth: Math.min(Number.MAX_SAFE_INTEGER, Math.max(0, ...prevEvents.map((e) => e.depth)) + 1),
      prev_events: prevEvents.slice(0, MAX_PREV_EVENTS).map(reference),
      auth_events: listed.map(reference),
    };
    const namesRoom = version.roomIdFromCreateEvent && isCreateEvent(partial);
    if (namesRoom !== (roomId === undefined)) {
      throw new Error(namesRoom ? `a room ${version.id} create event carries no room_id` : `a ${template.type} event needs its room ID`);
    }
    if (roomId !== undefined) unsigned['room_id'] = roomId;
    if (template.state_key !== undefined) unsigned['state_key'] = template.state_key;
    if (!version.redactsInContent && template.redacts !== undefined) unsigned['redacts'] = template.redacts;
    if (version.redaction !== 'v11') unsigned['origin'] = serverName;
    if (version.eventIdFormat === 'local') unsigned['event_id'] = `$${randomToken(this.store.options.random, 18)}:${serverName}`;
    return { unsigned, authEvents };
  }
}

/**
 * The size and identifier limits every event must keep, ours as we build it and others' as they arrive.
 * `encodedBytes`: the event's canonical size when the caller has measured it already (receivedEventForms).
 */
export function checkEventSize(event: RoomEvent, version: RoomVersion, encodedBytes?: number): void {
  if (encodedBytes === undefined) {
    const sent = withoutDerivedRoomId(event, version);
    const { event_id: _id, ...pdu } = sent;
    const body = version.eventIdFormat === 'local' ? sent : pdu;
    try {
      encodedBytes = utf8(canonicalJson(body, { strict: version.strictCanonicalJson })).length;
    } catch (e) {
      throw new RoomError('bad_event', (e as Error).message);
    }
  }
  if (encodedBytes > MAX_EVENT_BYTES) throw new RoomError('too_large', `event exceeds ${MAX_EVENT_BYTES} bytes`);
  for (const id of [event.sender, event.room_id, event.type, event.state_key ?? '']) {
    if (byteLength(id) > MAX_ID_BYTES) throw new RoomError('bad_event', 'an identifier exceeds 255 bytes');
  }
}

// Builds real room events for tests and benchmarks: content hashes, Ed25519
// signatures from each server's key, v1–v2 reference pairs and v3+ event IDs, and from
// v12 the room ID its create event's hash gives (the create event itself implied, not
// listed, in the others' auth events).
import { encodeBase64 } from '../../../src/crypto/base64.ts';
import type { JsonObject } from '../../../src/crypto/canonical-json.ts';
import { defaultEd25519Backend, type Ed25519Backend, type SigningKey } from '../../../src/crypto/ed25519.ts';
import { sha256 } from '../../../src/crypto/sha256.ts';
import { utf8 } from '../../../src/crypto/canonical-json.ts';
import { signJson } from '../../../src/crypto/signing.ts';
import {
  asRoomEvent,
  authEventSelection,
  checkEventAuth,
  isCreateEvent,
  computeEventId,
  computeReferenceHash,
  hashAndSignEvent,
  requireRoomVersion,
  stateKey,
  type EventReference,
  type PDU,
  type RoomEvent,
  type RoomVersion,
  type StateMap,
} from '../../../src/events/index.ts';
import { domainOf } from '../../../src/events/power-levels.ts';
import type { EventSource } from '../../../src/events/event-cache.ts';

export const KEY_ID = 'ed25519:test';
const keys = new Map<string, Promise<SigningKey>>();

/** A deterministic signing key per server name (or identity server), seeded from its name. */
export async function keyFor(name: string): Promise<SigningKey> {
  let key = keys.get(name);
  if (!key) {
    key = defaultEd25519Backend().then((backend) => backend.keyFromSeed(sha256(utf8(`hearth test key ${name}`))));
    keys.set(name, key);
  }
  return key;
}

export async function signAs<T extends object>(object: T, signer: string): Promise<T & { signatures: Record<string, Record<string, string>> }> {
  return signJson(object, signer, KEY_ID, await keyFor(signer));
}

export interface EventFields {
  type: string;
  sender: string;
  state_key?: string;
  content?: JsonObject;
  redacts?: string;
  /** Event IDs; default: the room's current forward extremity. */
  prev_events?: string[];
  /** Event IDs; default: chosen from the current state by the auth events selection. */
  auth_events?: string[];
  /** Servers that sign besides the sender's. */
  alsoSignedBy?: string[];
  /** Any other top-level field to set or override (room_id, origin_server_ts, depth…). */
  extra?: Partial<PDU> & Record<string, unknown>;
}

/** A room under construction: tracks its state and builds events that fit it. */
export class TestRoom {
  readonly version: RoomVersion;
  /** `!room:server`; from v12 the create event's ID with `!` once it is built, `!` until then. */
  roomId: string;
  /** Every event built in this room and its branches. */
  readonly events: Map<string, RoomEvent>;
  state: StateMap = new Map();
  extremity: string[] = [];
  private readonly clock: { counter: number; ts: number };

  constructor(versionId: string, readonly server = 'example.org', shared?: TestRoom) {
    this.version = requireRoomVersion(versionId);
    this.roomId = shared?.roomId ?? (this.version.roomIdFromCreateEvent ? '!' : `!room:${server}`);
    this.events = shared?.events ?? new Map();
    this.clock = shared?.clock ?? { counter: 0, ts: 1_700_000_000_000 };
  }

  /** An independent copy: its own events map, state, extremity and clock (events themselves are immutable). */
  copy(): TestRoom {
    const room = new TestRoom(this.version.id, this.server);
    room.roomId = this.roomId;
    for (const [id, event] of this.events) room.events.set(id, event);
    room.state = new Map(this.state);
    room.extremity = [...this.extremity];
    Object.assign(room.clock, this.clock);
    return room;
  }

  private static readonly bootstraps = new Map<string, Promise<TestRoom>>();

  /** `new TestRoom(version).bootstrap(...)`, built once per arguments and copied: tests need many. */
  static bootstrapped(versionId: string, creator: string, joinRule = 'public', users: JsonObject = {}): Promise<TestRoom> {
    const key = JSON.stringify([versionId, creator, joinRule, users]);
    let room = TestRoom.bootstraps.get(key);
    if (!room) TestRoom.bootstraps.set(key, (room = new TestRoom(versionId).bootstrap(creator, joinRule, users)));
    return room.then((r) => r.copy());
  }

  /** A fork from the current point: shares the events, has its own state and extremity. */
  branch(): TestRoom {
    const fork = new TestRoom(this.version.id, this.server, this);
    fork.state = new Map(this.state);
    fork.extremity = [...this.extremity];
    return fork;
  }

  private ref(id: string): EventReference {
    if (this.version.eventReferences === 'ids') return id;
    const event = this.events.get(id);
    return [id, { sha256: event ? encodeBase64(computeReferenceHash(event, this.version)) : '' }];
  }

  /** Builds (hashes and signs) an event without adding it to the room. */
  async build(fields: EventFields): Promise<RoomEvent> {
    const prevs = fields.prev_events ?? this.extremity;
    const implied = this.version.roomIdFromCreateEvent;
    const auths =
      fields.auth_events ??
      authEventSelection(this.version, { type: fields.type, sender: fields.sender, state_key: fields.state_key, content: fields.content ?? {} })
        .filter(([type, key]) => !(implied && isCreateEvent({ type, state_key: key })))
        .map(([type, key]) => this.state.get(stateKey(type, key)))
        .filter((id): id is string => id !== undefined);
    const depth = Math.max(0, ...prevs.map((id) => this.events.get(id)?.depth ?? 0)) + 1;
    const draft: Record<string, unknown> = {
      ...(implied && isCreateEvent(fields) ? {} : { room_id: this.roomId }),
      sender: fields.sender,
      origin: domainOf(fields.sender),
      origin_server_ts: this.clock.ts++,
      type: fields.type,
      content: fields.content ?? {},
      prev_events: prevs.map((id) => this.ref(id)),
      auth_events: auths.map((id) => this.ref(id)),
      depth,
    };
    if (fields.state_key !== undefined) draft['state_key'] = fields.state_key;
    if (fields.redacts !== undefined) draft['redacts'] = fields.redacts;
    if (this.version.eventIdFormat === 'local') draft['event_id'] = `$${++this.clock.counter}:${domainOf(fields.sender)}`;
    Object.assign(draft, fields.extra ?? {});
    let signed: Record<string, unknown> = draft;
    for (const server of [domainOf(fields.sender), ...(fields.alsoSignedBy ?? [])]) {
      signed = await hashAndSignEvent(signed, this.version, server, KEY_ID, await keyFor(server));
    }
    const pdu = signed as unknown as PDU;
    return asRoomEvent(pdu, computeEventId(pdu, this.version), this.version);
  }

  /** Adds an event to the room (no auth check): it becomes the extremity and, if state, part of the state. */
  add(event: RoomEvent): RoomEvent {
    if (this.version.roomIdFromCreateEvent && isCreateEvent(event) && this.roomId === '!') this.roomId = event.room_id;
    this.events.set(event.event_id, event);
    this.extremity = [event.event_id];
    if (typeof event.state_key === 'string') this.state.set(stateKey(event.type, event.state_key), event.event_id);
    return event;
  }

  async send(fields: EventFields): Promise<RoomEvent> {
    return this.add(await this.build(fields));
  }

  lookup = (type: string, key: string): RoomEvent | undefined => {
    const id = this.state.get(stateKey(type, key));
    return id === undefined ? undefined : this.events.get(id);
  };

  /** Checks an event against the room's current state. */
  async check(event: RoomEvent, verifier?: Ed25519Backend): Promise<void> {
    await checkEventAuth(event, this.lookup, this.version, verifier ?? (await defaultEd25519Backend()));
  }

  source(): EventSource {
    return { getEvent: async (id) => this.events.get(id) };
  }

  // Shorthands for the usual events.
  create(creator: string, content: JsonObject = {}): Promise<RoomEvent> {
    const base: JsonObject = this.version.creatorInContent ? { creator } : {};
    return this.send({ type: 'm.room.create', sender: creator, state_key: '', content: { ...base, room_version: this.version.id, ...content } });
  }
  member(sender: string, membership: string, target = sender, content: JsonObject = {}): Promise<RoomEvent> {
    return this.send({ type: 'm.room.member', sender, state_key: target, content: { membership, ...content } });
  }
  powerLevels(sender: string, content: JsonObject): Promise<RoomEvent> {
    return this.send({ type: 'm.room.power_levels', sender, state_key: '', content });
  }
  joinRules(sender: string, joinRule: string, content: JsonObject = {}): Promise<RoomEvent> {
    return this.send({ type: 'm.room.join_rules', sender, state_key: '', content: { join_rule: joinRule, ...content } });
  }

  /** create, creator join, power levels (creator 100, except from v12 where creators are not listed, plus `users`), join rules. */
  async bootstrap(creator: string, joinRule = 'public', users: JsonObject = {}): Promise<this> {
    await this.create(creator);
    await this.member(creator, 'join');
    await this.powerLevels(creator, { users: { ...(this.version.privilegedCreators ? {} : { [creator]: 100 }), ...users } });
    await this.joinRules(creator, joinRule);
    return this;
  }
}

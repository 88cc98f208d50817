import { beforeAll, describe, expect, it } from 'vitest';
import { api, type Account } from '../integration/harness.ts';
import { sdk } from '../integration/sdk.ts';
import { synapseAndHearth, type InteropServer } from '../support/synapse-interop.ts';
import { longPollUntil, syncPath, type SyncBody, type Syncer } from '../support/sync-until.ts';

// State resolution under a real conflict between a Hearth host and Synapse (issue 35, item 6).
// Two rooms, one made on each server, with two people on each server in both. The servers are
// cut apart by stopping one and then the other, so that each changes the same state (power
// levels, the topic, a ban) without the other knowing; then both run again and must reach the
// same state, the one the room's version gives: each server makes its default, so the room made
// on Hearth is version 10 (state resolution v2) and Synapse's version 12 (v2.1, its creator's
// power unbounded); the reasoning below holds for both.
//
// In each room the creator (power 100) and the other server's moderator (power 50, which may set
// power levels, the topic and bans) act while apart:
//   - the creator's side: demotes the moderator to 0, sets the topic, bans a member of the other server;
//   - the moderator's side, later in time: sets the topic, bans a member of the creator's server,
//     raises a member of their own server to 50.
// Resolution: the power events (both power-level changes and both bans) are ordered by their
// senders' power first, so the creator's demotion (sender at 100) is applied before anything the
// moderator (50) sent; each of the moderator's power events then fails its auth check against
// the partly resolved state, in which the moderator has 0. The topics are ordered along the
// mainline of the resolved power levels: the moderator's topic, authorised by the old power levels,
// comes before the creator's, which is authorised by the demotion, and fails anyway (power 0 <
// 50). The member the creator banned stays banned: their earlier join, applied after the ban,
// fails. So the creator's side wins whole, though the moderator acted last; a server that let the
// latest change win would keep the moderator's topic and ban.

const servers = synapseAndHearth({ synapseUsers: ['sam', 'sid'], hearthUsers: ['hana', 'hugo'], restartable: true });

interface Person {
  server: () => InteropServer;
  account: Account;
}
let sam: Person;
let sid: Person;
let hana: Person;
let hugo: Person;

let txn = 0;
async function call(who: Person, method: string, path: string, body?: unknown): Promise<any> {
  const r = await api(who.server(), method, path, { token: who.account.accessToken, body, unchecked: true });
  expect(r.status, `${method} ${path} as ${who.account.userId}: ${JSON.stringify(r.body)}`).toBe(200);
  return r.body;
}
const room = (roomId: string) => `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}`;
const putState = async (who: Person, roomId: string, type: string, content: unknown, key = '') => (await call(who, 'PUT', `${room(roomId)}/state/${type}/${encodeURIComponent(key)}`, content)).event_id as string;
const say = async (who: Person, roomId: string, body: string) => (await call(who, 'PUT', `${room(roomId)}/send/m.room.message/sr${++txn}`, { msgtype: 'm.text', body })).event_id as string;
const ban = (who: Person, roomId: string, target: Person) => call(who, 'POST', `${room(roomId)}/ban`, { user_id: target.account.userId, reason: 'while apart' });
const levelsOf = (who: Person, roomId: string) => call(who, 'GET', `${room(roomId)}/state/m.room.power_levels/`);

/** /sync as one person, unchecked against the spec (the answers of both servers are compared, not validated, here). */
const syncer = (who: Person): Syncer => async (since) => {
  const r = await api(who.server(), 'GET', syncPath(since, 10_000), { token: who.account.accessToken, unchecked: true });
  if (r.status !== 200) throw new Error(`/sync on ${who.server().name}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body as SyncBody;
};
/** Whether a /sync answer's timeline of the room has the event. */
const hasEvent = (roomId: string, eventId: string) => (body: SyncBody) =>
  (body.rooms?.join?.[roomId]?.timeline?.events ?? []).some((e: any) => e.event_id === eventId);

/** A room's whole current state on a server, as (type, state key) → event ID, and the events themselves. */
async function currentState(who: Person, roomId: string): Promise<{ ids: Record<string, string>; events: any[] }> {
  const events: any[] = await call(who, 'GET', `${room(roomId)}/state`);
  return { ids: Object.fromEntries(events.map((e) => [`${e.type}|${e.state_key}`, e.event_id]).sort()), events };
}

interface Conflict {
  roomId: string;
  creator: Person;
  /** The creator at 100 in the power levels, or nothing from room version 12 on. */
  creatorListed: Record<string, number>;
  moderator: Person;
  /** The moderator's server's other member, whom the creator bans. */
  creatorsTarget: Person;
  /** The creator's server's other member, whom the moderator bans and… */
  moderatorsTarget: Person;
  /** …the member of the moderator's server the moderator raises. */
  raised: Person;
  /** The events each side made while apart. */
  creatorSide?: { topic: string; levels: string };
  moderatorSide?: { topic: string; levels: string };
}

/** A room made by `creator` with `moderator` at 50 and all four people joined. */
async function conflictRoom(creator: Person, moderator: Person, others: { creatorsTarget: Person; moderatorsTarget: Person; raised: Person }): Promise<Conflict> {
  // A creator is listed at 100 before room version 12, and never from it (Synapse's default), when their power is unbounded.
  const { capabilities } = await call(creator, 'GET', '/_matrix/client/v3/capabilities');
  const creatorListed = Number(capabilities['m.room_versions'].default) < 12 ? { [creator.account.userId]: 100 } : {};
  const { room_id: roomId } = await call(creator, 'POST', '/_matrix/client/v3/createRoom', {
    preset: 'public_chat',
    name: 'Contested',
    topic: 'the topic before',
    power_level_content_override: {
      users: { ...creatorListed, [moderator.account.userId]: 50 },
      events: { 'm.room.power_levels': 50, 'm.room.topic': 50 },
      state_default: 50,
      ban: 50,
      kick: 50,
    },
  });
  const creatorServer = creator.server().name;
  for (const member of [moderator, others.creatorsTarget, others.moderatorsTarget, others.raised]) {
    if (member === moderator || member.server() !== creator.server()) await call(member, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}?server_name=${encodeURIComponent(creatorServer)}`, {});
    else await call(member, 'POST', `/_matrix/client/v3/join/${encodeURIComponent(roomId)}`, {});
  }
  return { roomId, creator, creatorListed, moderator, ...others };
}

/** Every join of the room is on both servers: the creator's and the moderator's /sync have shown all four members joining. */
async function untilAllJoined(conflict: Conflict): Promise<void> {
  const everyone = [conflict.creator, conflict.moderator, conflict.creatorsTarget, conflict.moderatorsTarget].map((p) => p.account.userId);
  for (const who of [conflict.creator, conflict.moderator]) {
    const joined = new Set<string>();
    await longPollUntil(syncer(who), (body) => {
      const seen = body.rooms?.join?.[conflict.roomId];
      for (const e of [...(seen?.state?.events ?? []), ...(seen?.timeline?.events ?? [])]) if (e.type === 'm.room.member' && e.content?.membership === 'join') joined.add(e.state_key);
      return everyone.every((u) => joined.has(u));
    }, { who: who.account.userId });
  }
}

/** The creator's side, while the other server is down: demote the moderator, set the topic, ban the other server's member. */
async function creatorActs(c: Conflict): Promise<void> {
  const before = await levelsOf(c.creator, c.roomId);
  const levels = await putState(c.creator, c.roomId, 'm.room.power_levels', { ...before, users: { ...before.users, [c.moderator.account.userId]: 0 } });
  await ban(c.creator, c.roomId, c.creatorsTarget);
  const topic = await putState(c.creator, c.roomId, 'm.room.topic', { topic: `the creator's topic` });
  c.creatorSide = { topic, levels };
}

/** The moderator's side, later, while the creator's server is down: set the topic, ban the creator's server's member, raise their own. */
async function moderatorActs(c: Conflict): Promise<void> {
  const topic = await putState(c.moderator, c.roomId, 'm.room.topic', { topic: `the moderator's topic` });
  await ban(c.moderator, c.roomId, c.moderatorsTarget);
  const before = await levelsOf(c.moderator, c.roomId);
  const levels = await putState(c.moderator, c.roomId, 'm.room.power_levels', { ...before, users: { ...before.users, [c.raised.account.userId]: 50 } });
  c.moderatorSide = { topic, levels };
}

let madeOnHearth: Conflict;
let madeOnSynapse: Conflict;

beforeAll(async () => {
  const [onSynapse, onHearth] = [() => servers.synapse as InteropServer, () => servers.hearth as InteropServer];
  sam = { server: onSynapse, account: servers.onSynapse.account };
  hana = { server: onHearth, account: servers.onHearth.account };
  sid = { server: onSynapse, account: await servers.login(servers.synapse, 'sid') };
  hugo = { server: onHearth, account: await servers.login(servers.hearth, 'hugo') };
  // Made on Hearth: hana creates, sam moderates; hana bans sid, sam bans hugo and raises sid.
  madeOnHearth = await conflictRoom(hana, sam, { creatorsTarget: sid, moderatorsTarget: hugo, raised: sid });
  // Made on Synapse: sam creates, hana moderates; sam bans hugo, hana bans sid and raises hugo.
  madeOnSynapse = await conflictRoom(sam, hana, { creatorsTarget: hugo, moderatorsTarget: sid, raised: hugo });
  await untilAllJoined(madeOnHearth);
  await untilAllJoined(madeOnSynapse);
});

describe('state resolution after Hearth and Synapse changed the same state apart', () => {
  it('both servers reach the state the spec’s algorithm gives, in the room made on each', async () => {
    // Apart, first: Synapse is down, Hearth's people act (as the creator in one room, the moderator in the other).
    await servers.synapse.halt();
    await creatorActs(madeOnHearth);
    await moderatorActs(madeOnSynapse);
    // Then Hearth is down and Synapse is back, and Synapse's people act, later in time.
    await servers.haltHearth();
    await servers.synapse.resume();
    await creatorActs(madeOnSynapse);
    await moderatorActs(madeOnHearth);
    // Together again: Hearth starts, sends what it holds for Synapse, and Synapse, hearing from it, sends its own.
    await servers.resumeHearth();

    for (const c of [madeOnHearth, madeOnSynapse]) {
      // The moderator's server takes the creator's side's events (they pass against its state);
      // the creator's server soft-fails the moderator's (they fail against its state). Once the
      // moderator's server has the creator's topic, the moderator says something: that event's
      // prev_events are both sides' last events, so the creator's server must resolve the two states.
      await longPollUntil(syncer(c.moderator), hasEvent(c.roomId, c.creatorSide!.topic), { who: `${c.moderator.account.userId}, for the creator's topic` });
      const merge = await say(c.moderator, c.roomId, 'together again');
      await longPollUntil(syncer(c.creator), hasEvent(c.roomId, merge), { who: `${c.creator.account.userId}, for the merge` });

      const [onCreators, onModerators] = [await currentState(c.creator, c.roomId), await currentState(c.moderator, c.roomId)];
      expect(onCreators.ids, 'the same state on both servers').toEqual(onModerators.ids);
      for (const [label, state] of [['the creator’s server', onCreators], ['the moderator’s server', onModerators]] as const) {
        const get = (type: string, key = '') => state.events.find((e) => e.type === type && e.state_key === key);
        expect(get('m.room.power_levels').event_id, `${label}: power levels`).toBe(c.creatorSide!.levels);
        expect(get('m.room.power_levels').content.users, `${label}: power levels`).toEqual({ ...c.creatorListed, [c.moderator.account.userId]: 0 });
        expect(get('m.room.topic').event_id, `${label}: topic`).toBe(c.creatorSide!.topic);
        expect(get('m.room.topic').content.topic, `${label}: topic`).toBe(`the creator's topic`);
        expect(get('m.room.member', c.creatorsTarget.account.userId).content.membership, `${label}: the creator's ban`).toBe('ban');
        expect(get('m.room.member', c.moderatorsTarget.account.userId).content.membership, `${label}: the moderator's ban, undone`).toBe('join');
      }
    }
  }, 120_000);
});

import { beforeEach, describe, expect, it } from 'vitest';
import { encodeBase64 } from '../../src/crypto/base64.ts';
import { tweetnaclBackend } from '../../src/crypto/ed25519.ts';
import { signJson, verifyJsonSignature } from '../../src/crypto/signing.ts';
import { signNewEvent, type PDU } from '../../src/events/pdu.ts';
import { redactEvent } from '../../src/events/redaction.ts';
import { requireRoomVersion } from '../../src/events/room-versions.ts';
import { hearthBesideScriptedRemote, type HttpsServer } from '../support/hearth-beside-scripted-remote.ts';
import type { ScriptedRemote } from '../support/scripted-remote.ts';
import { validateFederationResponse } from '../support/spec-schema.ts';
import { api, register, type Account } from './harness.ts';

// Keys, joins, invites and server ACLs (issue 35, "Server-server behaviours an independent remote
// server found missing"), against a remote server that is not Hearth: a DNS-named Hearth host in
// this process, over real HTTPS, beside the scripted remote of test/support/scripted-remote.ts
// (set up by test/support/hearth-beside-scripted-remote.ts). The remote signs its own requests and
// events and answers each request as a case needs: a key its origin no longer lists, a server that
// only speaks the v1 endpoints, a send_join answer with a bad event in it, a float in an invite.
// Each case is named after what it checks; the conformance suite that found them is sytest's
// tests/50federation.

const enc = encodeURIComponent;
const V3 = '/_matrix/client/v3';
const DAY = 24 * 60 * 60 * 1000;

const servers = hearthBesideScriptedRemote();
let host: HttpsServer;
let remote: ScriptedRemote;
let alice: Account;
let userCount: number;
beforeEach(() => ({ hearth: host, remote, alice, testNumber: userCount } = servers));

/** A request of the test's own to the host's key server, which needs no X-Matrix. */
async function keyQuery(method: 'GET' | 'POST', path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await host.fetch(`${host.url}${path}`, { method, headers: body === undefined ? {} : { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

/** A key document of `serverName`'s, signed by a key of its own under `keyId`, valid until `validUntil`. */
async function keyDocument(serverName: string, keyId: string, validUntil: number): Promise<Record<string, unknown>> {
  const key = await tweetnaclBackend.keyFromSeed(crypto.getRandomValues(new Uint8Array(32)));
  return signJson({ server_name: serverName, valid_until_ts: validUntil, verify_keys: { [keyId]: { key: encodeBase64(key.publicKey) } }, old_verify_keys: {} }, serverName, keyId, key);
}

const keyServerPath = /^\/_matrix\/key\/v2\/server$/;
const keyIdsIn = (answer: { server_keys: Record<string, any>[] }) => answer.server_keys.map((d) => Object.keys(d['verify_keys']));

describe('keys: Hearth as a notary for a server that is not Hearth', () => {
  it('serves a server’s keys by GET, with and without the key ID that the form before Matrix 1.6 names, to anyone, countersigned', async () => {
    for (const path of [`/_matrix/key/v2/query/${enc(remote.name)}`, `/_matrix/key/v2/query/${enc(remote.name)}/${enc(remote.keys.keyId)}`]) {
      const answer = await keyQuery('GET', path);
      expect(answer.status, `${path}: ${JSON.stringify(answer.body)}`).toBe(200);
      validateFederationResponse('GET', `/_matrix/key/v2/query/${enc(remote.name)}`, 200, answer.body);
      expect(keyIdsIn(answer.body), path).toEqual([[remote.keys.keyId]]);
      const document = answer.body.server_keys[0];
      const ours = await keyQuery('GET', '/_matrix/key/v2/server');
      const [notaryKeyId, notaryKey] = Object.entries(ours.body.verify_keys as Record<string, { key: string }>)[0]!;
      expect(await verifyJsonSignature(document, host.name, notaryKeyId, Buffer.from(notaryKey.key, 'base64'), tweetnaclBackend), path).toBe(true);
    }
  });

  it('keeps serving a key its origin no longer lists, for a query that names it, and the kept key when the origin fails', async () => {
    const expired = Date.now() - DAY;
    const first = await keyDocument(remote.name, 'ed25519:key_1', expired);
    const query = (keyId: string, minimum: number) => keyQuery('POST', '/_matrix/key/v2/query', { server_keys: { [remote.name]: { [keyId]: { minimum_valid_until_ts: minimum } } } });

    remote.answerNext('GET', keyServerPath, () => ({ status: 200, body: first }));
    const one = await query('ed25519:key_1', 0);
    expect(keyIdsIn(one.body)).toEqual([['ed25519:key_1']]);

    // Asked for a later validity, the notary asks the origin again, which now lists another key only.
    const second = remote.answerNext('GET', keyServerPath, async () => ({ status: 200, body: await keyDocument(remote.name, 'ed25519:key_2', expired + 1000) }));
    await query('ed25519:key_1', Date.now());
    await second;

    // Asked for key_1 again, valid until when it was: the document that has it, and only that.
    const fetchesBefore = remote.received.filter((r) => keyServerPath.test(r.path)).length;
    const three = await query('ed25519:key_1', expired);
    expect(three.status, JSON.stringify(three.body)).toBe(200);
    expect(keyIdsIn(three.body)).toEqual([['ed25519:key_1']]);
    expect(three.body.server_keys[0].valid_until_ts).toBe(expired);
    // What it kept was valid long enough: the origin was not asked.
    expect(remote.received.filter((r) => keyServerPath.test(r.path)).length).toBe(fetchesBefore);

    // An origin that answers 400, or a document whose signature does not verify, takes nothing away.
    remote.answerNext('GET', keyServerPath, () => ({ status: 400, body: {} }));
    expect(keyIdsIn((await query('ed25519:key_1', expired + 1)).body)).toEqual([['ed25519:key_1']]);
    const forged = { ...(await keyDocument(remote.name, 'ed25519:key_1', Date.now() + DAY)), valid_until_ts: Date.now() + 2 * DAY };
    remote.answerNext('GET', keyServerPath, () => ({ status: 200, body: forged }));
    const afterForgery = await query('ed25519:key_1', expired + 1);
    expect(afterForgery.body.server_keys.map((d: any) => d.verify_keys['ed25519:key_1'].key)).toEqual([(first['verify_keys'] as any)['ed25519:key_1'].key]);
  });

  it('refuses a request whose X-Matrix origin has a port that is not a number with 400', async () => {
    const profile = `/_matrix/federation/v1/query/profile?user_id=${enc(alice.userId)}`;
    const refused = await remote.call(host.name, 'GET', profile, undefined, { origin: 'localhost:http' });
    expect([refused.status, refused.body.errcode], JSON.stringify(refused.body)).toEqual([400, 'M_UNAUTHORIZED']);
    // The same request from a proper name is answered.
    expect((await remote.call(host.name, 'GET', profile)).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------------

async function createRoom(account: Account, body: Record<string, unknown> = { preset: 'public_chat' }): Promise<string> {
  const r = await api(host, 'POST', `${V3}/createRoom`, { token: account.accessToken, body });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body.room_id;
}

/** A local user's join through the client API, its answer unchecked (a refusal is what some cases want). */
const clientJoin = (account: Account, roomId: string, via?: string) =>
  api(host, 'POST', `${V3}/join/${enc(roomId)}${via ? `?server_name=${enc(via)}` : ''}`, { token: account.accessToken, body: {}, unchecked: true });

/** The member event of `userId` in a room as a local user's client reads it (404 when there is none). */
const memberContent = (account: Account, roomId: string, userId: string) =>
  api(host, 'GET', `${V3}/rooms/${enc(roomId)}/state/m.room.member/${enc(userId)}`, { token: account.accessToken, unchecked: true });

/** Polls the member state until it is `membership`: the event reaches the room through a queue. */
async function untilMembership(account: Account, roomId: string, userId: string, membership: string): Promise<Record<string, unknown>> {
  let since: string | undefined;
  for (;;) {
    const member = await memberContent(account, roomId, userId);
    if (member.status === 200 && member.body.membership === membership) return member.body;
    const sync = await api(host, 'GET', `${V3}/sync?timeout=5000${since ? `&since=${enc(since)}` : ''}`, { token: account.accessToken, unchecked: true });
    since = sync.body.next_batch;
  }
}

/** A membership event of the remote's from a make_ template of the host's: signed by the remote, or not. */
async function fromTemplate(template: Record<string, unknown>, version: string, signatures?: Record<string, Record<string, string>>): Promise<{ event: PDU; eventId: string }> {
  const { event, eventId } = await signNewEvent({ ...template, origin: remote.name, origin_server_ts: Date.now() }, requireRoomVersion(version), remote.name, remote.keys.keyId, remote.keys.signingKey);
  return { event: (signatures ? { ...event, signatures } : event) as unknown as PDU, eventId };
}

const unrecognized = { status: 404, body: { errcode: 'M_UNRECOGNIZED', error: 'Unrecognized request' } };
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const pathOf = (prefix: string, roomId: string) => new RegExp(`^${escape(prefix)}/${escape(roomId)}/`);

describe('joins: Hearth joining a room on a server that is not Hearth', () => {
  it('falls back to the v1 send_join and send_leave (answered [200, {...}]) when the server answers v2 with 404 M_UNRECOGNIZED', async () => {
    const creator = `@creator:${remote.name}`;
    const roomId = await remote.createRoom(creator);
    remote.answerAlways('PUT', /^\/_matrix\/federation\/v2\/send_(join|leave)\//, () => unrecognized);
    const joined = await clientJoin(alice, roomId, remote.name);
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    await remote.waitFor((r) => r.method === 'PUT' && pathOf('/_matrix/federation/v1/send_join', roomId).test(r.path));
    expect((await memberContent(alice, roomId, creator)).body.membership).toBe('join');

    // An invite from the remote to a room of its own, rejected: make_leave, then send_leave v2, then v1.
    const other = await remote.createRoom(creator);
    await remote.invite(other, creator, alice.userId, host.name);
    const rejected = await api(host, 'POST', `${V3}/rooms/${enc(other)}/leave`, { token: alice.accessToken, body: {} });
    expect(rejected.status, JSON.stringify(rejected.body)).toBe(200);
    const v1 = await remote.waitFor((r) => r.method === 'PUT' && pathOf('/_matrix/federation/v1/send_leave', other).test(r.path));
    expect(v1.body).toMatchObject({ type: 'm.room.member', state_key: alice.userId, content: { membership: 'leave' } });
  });

  it('refuses a send_join answer with no m.room.create in its state', async () => {
    const roomId = await remote.createRoom(`@creator:${remote.name}`);
    remote.answerNext('PUT', pathOf('/_matrix/federation/v2/send_join', roomId), async (request) => {
      const answer = await remote.defaultAnswer(request);
      const body = answer.body as { state: PDU[] };
      return { ...answer, body: { ...body, state: body.state.filter((e) => e.type !== 'm.room.create') } };
    });
    const refused = await clientJoin(alice, roomId, remote.name);
    expect(refused.status, JSON.stringify(refused.body)).toBe(502);
    expect(refused.body.error).toMatch(/no m\.room\.create in its state/);
    expect((await memberContent(alice, roomId, alice.userId)).status).not.toBe(200);
  });

  it('drops an event with a bad signature from a send_join answer’s state and auth chain, and joins without it', async () => {
    const creator = `@creator:${remote.name}`;
    const roomId = await remote.createRoom(creator);
    // Changed after they were signed: their signatures no longer verify (and, from v3 on, their IDs are others).
    const inState = await remote.signEvent(roomId, { type: 'org.example.test', sender: creator, state_key: '', content: { body: 'signed' } });
    const inChain = await remote.signEvent(roomId, { type: 'org.example.other', sender: creator, state_key: '', content: { body: 'signed' } });
    const tampered = (pdu: PDU) => ({ ...pdu, state_key: 'something' });
    remote.answerNext('PUT', pathOf('/_matrix/federation/v2/send_join', roomId), async (request) => {
      const answer = await remote.defaultAnswer(request);
      const body = answer.body as { state: PDU[]; auth_chain: PDU[] };
      return { ...answer, body: { ...body, state: [...body.state, tampered(inState.pdu)], auth_chain: [...body.auth_chain, tampered(inChain.pdu)] } };
    });
    const joined = await clientJoin(alice, roomId, remote.name);
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    const state = await api(host, 'GET', `${V3}/rooms/${enc(roomId)}/state`, { token: alice.accessToken });
    expect(state.body.map((e: any) => e.type)).not.toContain('org.example.test');
    expect(state.body.find((e: any) => e.type === 'm.room.member' && e.state_key === alice.userId)?.content.membership).toBe('join');
  });

  it('passes a make_join refusal through to the client: its errcode, and M_INCOMPATIBLE_ROOM_VERSION with the version the room needs', async () => {
    const roomId = await remote.createRoom(`@creator:${remote.name}`);
    remote.answerNext('GET', pathOf('/_matrix/federation/v1/make_join', roomId), () => ({ status: 400, body: { errcode: 'M_INCOMPATIBLE_ROOM_VERSION', error: 'upgrade', room_version: 'org.example.future' } }));
    const incompatible = await clientJoin(alice, roomId, remote.name);
    expect([incompatible.status, incompatible.body.errcode, incompatible.body.room_version], JSON.stringify(incompatible.body)).toEqual([400, 'M_INCOMPATIBLE_ROOM_VERSION', 'org.example.future']);
    remote.answerNext('GET', pathOf('/_matrix/federation/v1/make_join', roomId), () => ({ status: 400, body: { errcode: 'ORG_EXAMPLE_DENIED', error: 'denied!' } }));
    const denied = await clientJoin(alice, roomId, remote.name);
    expect([denied.status, denied.body.errcode], JSON.stringify(denied.body)).toEqual([400, 'ORG_EXAMPLE_DENIED']);
  });
});

describe('invites: Hearth inviting to a server that is not Hearth', () => {
  it('falls back to the v1 invite for a room of version 2 when the server answers v2 with 404 M_UNRECOGNIZED; a room of version 10 cannot go by v1', async () => {
    remote.answerAlways('PUT', /^\/_matrix\/federation\/v2\/invite\//, () => unrecognized);
    remote.answerAlways('PUT', /^\/_matrix\/federation\/v1\/invite\//, async (request) => {
      const { unsigned: _unsigned, ...event } = request.body as PDU;
      const signed = await signJson(redactEvent(event, requireRoomVersion('2')), remote.name, remote.keys.keyId, remote.keys.signingKey);
      return { status: 200, body: [200, { event: { ...event, signatures: signed.signatures } }] };
    });
    const bob = `@bob:${remote.name}`;
    const old = await createRoom(alice, { preset: 'private_chat', room_version: '2' });
    const invited = await api(host, 'POST', `${V3}/rooms/${enc(old)}/invite`, { token: alice.accessToken, body: { user_id: bob } });
    expect(invited.status, JSON.stringify(invited.body)).toBe(200);
    const v1 = await remote.waitFor((r) => r.method === 'PUT' && pathOf('/_matrix/federation/v1/invite', old).test(r.path));
    expect(v1.body).toMatchObject({ type: 'm.room.member', state_key: bob, content: { membership: 'invite' } });
    expect(v1.body.unsigned?.invite_room_state).toEqual(expect.arrayContaining([expect.objectContaining({ type: 'm.room.join_rules' })]));
    expect((await memberContent(alice, old, bob)).body.membership).toBe('invite');

    const current = await createRoom(alice, { preset: 'private_chat', room_version: '10' });
    const refused = await api(host, 'POST', `${V3}/rooms/${enc(current)}/invite`, { token: alice.accessToken, body: { user_id: bob }, unchecked: true });
    expect([refused.status, refused.body.errcode], JSON.stringify(refused.body)).toEqual([400, 'M_UNSUPPORTED_ROOM_VERSION']);
    expect((await memberContent(alice, current, bob)).status).toBe(404);
  });
});

describe('joins and invites into Hearth from a server that is not Hearth', () => {
  it('a join with no signature or a bad one is refused with 403 M_FORBIDDEN on v1 and v2, one with a float 400 M_BAD_JSON; signed, v1 answers [200, {...}]', async () => {
    const roomId = await createRoom(alice);
    const bob = `@bob:${remote.name}`;
    const made = await remote.call(host.name, 'GET', `/_matrix/federation/v1/make_join/${enc(roomId)}/${enc(bob)}?ver=10`);
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    const floating = await fromTemplate({ ...made.body.event, content: { ...made.body.event.content, bad_val: 1.1 } }, '10');
    const notJson = await remote.call(host.name, 'PUT', `/_matrix/federation/v2/send_join/${enc(roomId)}/${enc(floating.eventId)}`, floating.event);
    expect([notJson.status, notJson.body.errcode], JSON.stringify(notJson.body)).toEqual([400, 'M_BAD_JSON']);
    const fake = { [remote.name]: { [remote.keys.keyId]: 'a'.repeat(86) } };
    for (const signatures of [{}, fake]) {
      const { event, eventId } = await fromTemplate(made.body.event, '10', signatures);
      for (const v of ['v1', 'v2']) {
        const refused = await remote.call(host.name, 'PUT', `/_matrix/federation/${v}/send_join/${enc(roomId)}/${enc(eventId)}`, event);
        expect([refused.status, refused.body.errcode], `${v} ${JSON.stringify(signatures)}: ${JSON.stringify(refused.body)}`).toEqual([403, 'M_FORBIDDEN']);
      }
    }
    expect((await memberContent(alice, roomId, bob)).status).toBe(404);
    const { event, eventId } = await fromTemplate(made.body.event, '10');
    const accepted = await remote.call(host.name, 'PUT', `/_matrix/federation/v1/send_join/${enc(roomId)}/${enc(eventId)}`, event);
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(200);
    expect(accepted.body[0]).toBe(200);
    expect(accepted.body[1].state.map((e: PDU) => e.type)).toContain('m.room.create');
    expect(accepted.body[1].auth_chain.length).toBeGreaterThan(0);
    expect((await memberContent(alice, roomId, bob)).body.membership).toBe('join');
  });

  it('make_join without the room’s version in `ver` is 400 M_INCOMPATIBLE_ROOM_VERSION naming it; so is an invite for a version Hearth does not know', async () => {
    const roomId = await createRoom(alice, { preset: 'public_chat', room_version: '10' });
    const bob = `@bob:${remote.name}`;
    const made = await remote.call(host.name, 'GET', `/_matrix/federation/v1/make_join/${enc(roomId)}/${enc(bob)}?ver=2&ver=org.example.future`);
    expect([made.status, made.body.errcode, made.body.room_version]).toEqual([400, 'M_INCOMPATIBLE_ROOM_VERSION', '10']);

    const creator = `@creator:${remote.name}`;
    const theirs = await remote.createRoom(creator);
    const { pdu, eventId } = await remote.signEvent(theirs, { type: 'm.room.member', sender: creator, state_key: alice.userId, content: { membership: 'invite' } });
    const invite = await remote.call(host.name, 'PUT', `/_matrix/federation/v2/invite/${enc(theirs)}/${enc(eventId)}`, { room_version: 'org.example.future', event: pdu, invite_room_state: [] });
    expect([invite.status, invite.body.errcode, invite.body.room_version], JSON.stringify(invite.body)).toEqual([400, 'M_INCOMPATIBLE_ROOM_VERSION', 'org.example.future']);
  });

  it('an invite whose JSON its room version forbids (v6+: a float, an integer out of range) is refused with 400 M_BAD_JSON', async () => {
    const creator = `@creator:${remote.name}`;
    const roomId = await remote.createRoom(creator, { version: '6' });
    for (const bad of [1.1, 2 ** 60]) {
      const { pdu, eventId } = await remote.signEvent(roomId, { type: 'm.room.member', sender: creator, state_key: alice.userId, content: { membership: 'invite', bad_val: bad } });
      const refused = await remote.call(host.name, 'PUT', `/_matrix/federation/v2/invite/${enc(roomId)}/${enc(eventId)}`, { room_version: '6', event: pdu, invite_room_state: [] });
      expect([refused.status, refused.body.errcode], `${bad}: ${JSON.stringify(refused.body)}`).toEqual([400, 'M_BAD_JSON']);
    }
    const sync = await api(host, 'GET', `${V3}/sync`, { token: alice.accessToken });
    expect(Object.keys(sync.body.rooms?.invite ?? {})).not.toContain(roomId);
  });

  it('an invite is rejected through make_leave and send_leave (v1 and v2); a rejection with a bad signature is refused with 403', async () => {
    const roomId = await createRoom(alice, { preset: 'private_chat' });
    for (const [localpart, v] of [['bob', 'v1'], ['carol', 'v2']] as const) {
      const invitee = `@${localpart}:${remote.name}`;
      const invited = await api(host, 'POST', `${V3}/rooms/${enc(roomId)}/invite`, { token: alice.accessToken, body: { user_id: invitee } });
      expect(invited.status, JSON.stringify(invited.body)).toBe(200);
      const made = await remote.call(host.name, 'GET', `/_matrix/federation/v1/make_leave/${enc(roomId)}/${enc(invitee)}`);
      expect(made.status, JSON.stringify(made.body)).toBe(200);
      const forged = await fromTemplate(made.body.event, made.body.room_version, { [remote.name]: { [remote.keys.keyId]: 'a'.repeat(86) } });
      const refused = await remote.call(host.name, 'PUT', `/_matrix/federation/${v}/send_leave/${enc(roomId)}/${enc(forged.eventId)}`, forged.event);
      expect([refused.status, refused.body.errcode], JSON.stringify(refused.body)).toEqual([403, 'M_FORBIDDEN']);
      expect((await memberContent(alice, roomId, invitee)).body.membership).toBe('invite');

      const { event, eventId } = await fromTemplate(made.body.event, made.body.room_version);
      const left = await remote.call(host.name, 'PUT', `/_matrix/federation/${v}/send_leave/${enc(roomId)}/${enc(eventId)}`, event);
      expect([left.status, left.body], JSON.stringify(left.body)).toEqual([200, v === 'v1' ? [200, {}] : {}]);
      expect((await memberContent(alice, roomId, invitee)).body.membership).toBe('leave');
    }
  });
});

describe('server ACLs, against a server named by its IP literal', () => {
  it('a server the room’s ACL denies cannot /invite or /get_missing_events, which it could before', async () => {
    remote = await servers.replaceRemote({ host: '127.0.0.1' });
    const roomId = await createRoom(alice);
    const bob = `@bob:${remote.name}`;
    await remote.joinRoom(host.name, roomId, bob);
    const invite = async (target: string) => {
      const { pdu, eventId } = await remote.signEvent(roomId, { type: 'm.room.member', sender: bob, state_key: target, content: { membership: 'invite' } });
      return remote.call(host.name, 'PUT', `/_matrix/federation/v2/invite/${enc(roomId)}/${enc(eventId)}`, { room_version: '10', event: pdu, invite_room_state: [] });
    };
    const missingEvents = () => remote.call(host.name, 'POST', `/_matrix/federation/v1/get_missing_events/${enc(roomId)}`, {});

    // Before the ACL: an invite (of a user the room may name, whether or not they exist), and an empty question answered.
    const before = await invite(`@someone:${host.name}`);
    expect(before.status, JSON.stringify(before.body)).toBe(200);
    expect(await missingEvents()).toEqual({ status: 200, body: { events: [] } });

    const acl = await api(host, 'PUT', `${V3}/rooms/${enc(roomId)}/state/m.room.server_acl/`, { token: alice.accessToken, body: { allow: ['*'], deny: ['127.0.0.1'], allow_ip_literals: true } });
    expect(acl.status, JSON.stringify(acl.body)).toBe(200);
    for (const answer of [await invite(`@someone-else:${host.name}`), await missingEvents()]) {
      expect([answer.status, answer.body.errcode], JSON.stringify(answer.body)).toEqual([403, 'M_FORBIDDEN']);
    }
  });
});

describe('restricted rooms with Hearth as the resident server', () => {
  async function restrictedPair(): Promise<{ club: string; annex: string }> {
    const club = await createRoom(alice);
    const annex = await createRoom(alice, {
      preset: 'private_chat',
      initial_state: [{ type: 'm.room.join_rules', state_key: '', content: { join_rule: 'restricted', allow: [{ type: 'm.room_membership', room_id: club }] } }],
    });
    return { club, annex };
  }

  it('a remote member of the allowed room joins, vouched for by a local user who may invite and countersigned; a remote user in no allowed room is refused at make_join', async () => {
    const { club, annex } = await restrictedPair();
    const bob = `@bob:${remote.name}`;
    const outsider = `@outsider:${remote.name}`;
    const refused = await remote.call(host.name, 'GET', `/_matrix/federation/v1/make_join/${enc(annex)}/${enc(outsider)}?ver=10`);
    expect([refused.status, refused.body.errcode], JSON.stringify(refused.body)).toEqual([403, 'M_FORBIDDEN']);

    await remote.joinRoom(host.name, club, bob);
    const join = await remote.joinRoom(host.name, annex, bob);
    expect(join.content).toMatchObject({ membership: 'join', join_authorised_via_users_server: alice.userId });
    expect(Object.keys(join.signatures)).toEqual(expect.arrayContaining([remote.name, host.name]));
    expect(await untilMembership(alice, annex, bob, 'join')).toMatchObject({ join_authorised_via_users_server: alice.userId });
  });

  it('send_join checks again: a join naming another server’s authoriser, or by a user who left the allowed room meanwhile, is refused', async () => {
    const { club, annex } = await restrictedPair();
    const bob = `@bob:${remote.name}`;
    await remote.joinRoom(host.name, club, bob);
    const made = await remote.call(host.name, 'GET', `/_matrix/federation/v1/make_join/${enc(annex)}/${enc(bob)}?ver=10`);
    expect(made.body.event.content.join_authorised_via_users_server).toBe(alice.userId);

    const theirs = await fromTemplate({ ...made.body.event, content: { membership: 'join', join_authorised_via_users_server: `@friend:${remote.name}` } }, '10');
    const notOurs = await remote.call(host.name, 'PUT', `/_matrix/federation/v2/send_join/${enc(annex)}/${enc(theirs.eventId)}`, theirs.event);
    expect([notOurs.status, notOurs.body.errcode], JSON.stringify(notOurs.body)).toEqual([403, 'M_FORBIDDEN']);

    await remote.sendEvent(club, { type: 'm.room.member', sender: bob, state_key: bob, content: { membership: 'leave' } });
    await untilMembership(alice, club, bob, 'leave');
    const { event, eventId } = await fromTemplate(made.body.event, '10');
    const left = await remote.call(host.name, 'PUT', `/_matrix/federation/v2/send_join/${enc(annex)}/${enc(eventId)}`, event);
    expect([left.status, left.body.errcode], JSON.stringify(left.body)).toEqual([403, 'M_FORBIDDEN']);
    expect((await memberContent(alice, annex, bob)).status).toBe(404);
  });

  it('a local member of the allowed room joins, vouched for by a local user who may invite; a local user in no allowed room is refused', async () => {
    const { club, annex } = await restrictedPair();
    const dave = await register(host, `dave${userCount}`);
    const eve = await register(host, `eve${userCount}`);
    expect((await clientJoin(dave, club)).status).toBe(200);
    const joined = await clientJoin(dave, annex);
    expect(joined.status, JSON.stringify(joined.body)).toBe(200);
    expect((await memberContent(alice, annex, dave.userId)).body).toMatchObject({ membership: 'join', join_authorised_via_users_server: alice.userId });
    const refused = await clientJoin(eve, annex);
    expect([refused.status, refused.body.errcode], JSON.stringify(refused.body)).toEqual([403, 'M_FORBIDDEN']);
  });
});

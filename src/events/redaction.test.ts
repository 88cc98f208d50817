import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../crypto/canonical-json.ts';
import { redactEvent } from './redaction.ts';
import { requireRoomVersion } from './room-versions.ts';

const redact = (event: object, version: string) => redactEvent(event, requireRoomVersion(version));
const canonical = (event: object, version: string) => canonicalJson(redact(event, version));

// spec-vectors §6, from gomatrixserverlib redactevent_test.go
const M = {
  content: {
    avatar_url: 'mxc://something/somewhere',
    displayname: 'Someone',
    join_authorised_via_users_server: '@someoneelse:somewhere.org',
    membership: 'join',
  },
  origin_server_ts: 1633108629915,
  sender: '@someone:somewhere.org',
  state_key: '@someone:somewhere.org',
  type: 'm.room.member',
  unsigned: { age: 539338 },
  room_id: '!someroom:matrix.org',
};
const C = {
  content: { placeholder: 'value' },
  origin_server_ts: 1633108629915,
  sender: '@someone:somewhere.org',
  state_key: '@someone:somewhere.org',
  type: 'm.room.create',
  unsigned: { age: 539338 },
  room_id: '!someroom:matrix.org',
  origin: 'matrix.org',
  membership: 'join',
  prev_state: '',
};

describe('redaction: gomatrixserverlib vectors', () => {
  it('member, v8', () => {
    expect(canonical(M, '8')).toBe(
      '{"content":{"membership":"join"},"origin_server_ts":1633108629915,"room_id":"!someroom:matrix.org","sender":"@someone:somewhere.org","state_key":"@someone:somewhere.org","type":"m.room.member"}',
    );
  });
  it('member, v9 keeps join_authorised_via_users_server', () => {
    expect(canonical(M, '9')).toBe(
      '{"content":{"join_authorised_via_users_server":"@someoneelse:somewhere.org","membership":"join"},"origin_server_ts":1633108629915,"room_id":"!someroom:matrix.org","sender":"@someone:somewhere.org","state_key":"@someone:somewhere.org","type":"m.room.member"}',
    );
  });
  it('create, v10', () => {
    expect(canonical(C, '10')).toBe(
      '{"content":{},"membership":"join","origin":"matrix.org","origin_server_ts":1633108629915,"prev_state":"","room_id":"!someroom:matrix.org","sender":"@someone:somewhere.org","state_key":"@someone:somewhere.org","type":"m.room.create"}',
    );
  });
  it('create, v11 keeps all content and drops origin, membership, prev_state', () => {
    expect(canonical(C, '11')).toBe(
      '{"content":{"placeholder":"value"},"origin_server_ts":1633108629915,"room_id":"!someroom:matrix.org","sender":"@someone:somewhere.org","state_key":"@someone:somewhere.org","type":"m.room.create"}',
    );
  });
  it('v11 applied to the v10 output', () => {
    const { membership: _m, origin: _o, prev_state: _p, ...rest } = redact(C, '10');
    expect(redact(redact(C, '10'), '11')).toEqual(rest);
  });
  it('power levels v11 keeps invite; redaction v11 keeps redacts', () => {
    expect(redact({ ...C, type: 'm.room.power_levels', content: { invite: '', placeholder: 'value' } }, '11')['content']).toEqual({ invite: '' });
    expect(redact({ ...C, type: 'm.room.power_levels', content: { invite: '', placeholder: 'value' } }, '10')['content']).toEqual({});
    expect(redact({ ...C, type: 'm.room.redaction', content: { redacts: '', placeholder: 'value' } }, '11')['content']).toEqual({ redacts: '' });
    expect(redact({ ...C, type: 'm.room.redaction', content: { redacts: '', placeholder: 'value' } }, '10')['content']).toEqual({});
  });
});

describe('redaction: synapse PruneEventTestCase and ruma cases', () => {
  it('always emits content, even when the event had none', () => {
    expect(redact({ type: 'X', event_id: '$a:b' }, '1')).toEqual({ type: 'X', event_id: '$a:b', content: {} });
    expect(redact({ type: 'X', content: 'not an object' }, '11')).toEqual({ type: 'X', content: {} });
  });
  it('drops unknown top-level keys and unsigned', () => {
    expect(redact({ type: 'X', content: {}, other_key: 1, unsigned: { age: 1 } }, '1')).toEqual({ type: 'X', content: {} });
  });
  it('v11 member keeps only third_party_invite.signed', () => {
    const signed = { mxid: '@a:b', token: 't', signatures: { s: { 'ed25519:0': 'x' } } };
    const event = { type: 'm.room.member', content: { membership: 'invite', third_party_invite: { display_name: 'alice', signed } } };
    expect(redact(event, '11')['content']).toEqual({ membership: 'invite', third_party_invite: { signed } });
    expect(redact(event, '10')['content']).toEqual({ membership: 'invite' });
    const stripped = { type: 'm.room.member', content: { membership: 'invite', third_party_invite: 'stripped' } };
    expect(redact(stripped, '11')['content']).toEqual({ membership: 'invite' });
  });
  it('aliases keep their content before v6 and lose it from v6', () => {
    const event = { type: 'm.room.aliases', state_key: 'domain', content: { aliases: ['#a:domain'], other: 1 } };
    expect(redact(event, '5')['content']).toEqual({ aliases: ['#a:domain'] });
    expect(redact(event, '6')['content']).toEqual({});
  });
  it('join rules keep allow from v8', () => {
    const event = { type: 'm.room.join_rules', state_key: '', content: { join_rule: 'restricted', allow: [{ type: 'm.room_membership', room_id: '!r:d' }], extra: 1 } };
    expect(redact(event, '1')['content']).toEqual({ join_rule: 'restricted' });
    expect(redact(event, '7')['content']).toEqual({ join_rule: 'restricted' });
    expect(redact(event, '8')['content']).toEqual({ join_rule: 'restricted', allow: event.content.allow });
  });
  it('power levels keep their fields in every version', () => {
    const content = { ban: 50, events: { 'm.room.name': 100 }, events_default: 0, kick: 50, redact: 50, state_default: 50, users: { '@a:b': 100 }, users_default: 0, notifications: { room: 50 }, invite: 0 };
    const { notifications: _n, invite: _i, ...kept } = content;
    expect(redact({ type: 'm.room.power_levels', state_key: '', content }, '1')['content']).toEqual(kept);
    expect(redact({ type: 'm.room.power_levels', state_key: '', content }, '11')['content']).toEqual({ ...kept, invite: 0 });
  });
  it('history visibility keeps history_visibility', () => {
    expect(redact({ type: 'm.room.history_visibility', content: { history_visibility: 'shared', x: 1 } }, '11')['content']).toEqual({ history_visibility: 'shared' });
  });
  it('create keeps creator before v11', () => {
    expect(redact({ type: 'm.room.create', content: { creator: '@a:b', room_version: '10', 'm.federate': true } }, '10')['content']).toEqual({ creator: '@a:b' });
  });
  it('v1 keeps origin, membership and prev_state; v11 drops them', () => {
    const event = { type: 'X', content: {}, origin: 'o', membership: 'join', prev_state: [] };
    expect(redact(event, '1')).toEqual(event);
    expect(redact(event, '11')).toEqual({ type: 'X', content: {} });
  });
});

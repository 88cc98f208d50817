import { describe, it } from 'vitest';
import { encodeBase64, encodeBase64Url } from '../crypto/base64.ts';
import type { JsonObject } from '../crypto/canonical-json.ts';
import { keyFor, signAs, TestRoom, type EventFields } from '../../test/unit/events/room-builder.ts';
import { ALICE, ALL, BOB, CAROL, DAVE, allows, denies, member, range, room, state } from '../../test/unit/events/auth-cases.ts';

// m.room.member, each membership and each room-version difference, with cases that allow and cases that deny.

describe('m.room.member basics', () => {
  it('denies a member event without membership', async () => {
    const r = await room('10');
    await denies(r, { type: 'm.room.member', sender: BOB, state_key: BOB, content: {} }, /membership/);
  });
  it('denies an unknown membership', async () => {
    await denies(await room('10'), member(BOB, 'dance'), /unknown membership/);
  });
});

describe('join', () => {
  it.each(ALL)('v%s: allows joining a public room', async (v) => {
    await allows(await room(v), member(BOB, 'join'));
  });
  it('denies joining on behalf of someone else', async () => {
    await denies(await room('10'), member(ALICE, 'join', BOB), /themselves/);
  });
  it('denies a banned user joining a public room', async () => {
    const r = await room('10');
    await r.member(ALICE, 'ban', BOB);
    await denies(r, member(BOB, 'join'), /banned/);
  });
  it.each(['1', '6', '11'])('v%s: denies joining an invite-only room uninvited', async (v) => {
    await denies(await room(v, 'invite'), member(BOB, 'join'), /not invited/);
  });
  it.each(['1', '6', '11'])('v%s: allows joining an invite-only room when invited', async (v) => {
    const r = await room(v, 'invite');
    await r.member(ALICE, 'invite', BOB);
    await allows(r, member(BOB, 'join'));
  });
  it('allows a joined member to re-join (a profile change)', async () => {
    const r = await room('10', 'invite');
    await r.member(ALICE, 'invite', BOB);
    await r.member(BOB, 'join');
    await allows(r, member(BOB, 'join', BOB, { displayname: 'Bob' }));
  });
  it('denies joining when the room has no join rules (no rule lets them in)', async () => {
    const r = new TestRoom('10');
    await r.create(ALICE);
    await r.member(ALICE, 'join');
    await r.member(ALICE, 'invite', BOB);
    await denies(r, member(BOB, 'join'), /join rule null/);
  });
  it('denies joining a private room even when invited', async () => {
    const r = await room('10', 'private');
    await r.member(ALICE, 'invite', BOB);
    await denies(r, member(BOB, 'join'), /private/);
  });
  it('v6: the knock join rule does not exist, so even an invited user is denied', async () => {
    const r = await room('6', 'knock');
    await r.member(ALICE, 'invite', BOB);
    await denies(r, member(BOB, 'join'));
  });
  it('v7: an invited user may join a knock room', async () => {
    const r = await room('7', 'knock');
    await r.member(ALICE, 'invite', BOB);
    await allows(r, member(BOB, 'join'));
  });
});

describe('knock (v7+)', () => {
  it.each(range(7, 11))('v%s: allows knocking on a knock room', async (v) => {
    await allows(await room(v, 'knock'), member(DAVE, 'knock', DAVE, { reason: 'let me in' }));
  });
  it.each(range(1, 6))('v%s: denies knocking (no such membership)', async (v) => {
    await denies(await room(v, 'knock'), member(DAVE, 'knock'), /unknown membership/);
  });
  it('denies knocking on an invite-only room', async () => {
    await denies(await room('7', 'invite'), member(DAVE, 'knock'), /does not allow knocking/);
  });
  it('denies knocking for someone else', async () => {
    await denies(await room('7', 'knock'), member(ALICE, 'knock', DAVE), /themselves/);
  });
  it.each(['ban', 'invite'])('denies knocking when the knocker\'s membership is %s', async (membership) => {
    const r = await room('7', 'knock');
    await r.member(ALICE, membership, DAVE);
    await denies(r, member(DAVE, 'knock'), new RegExp(membership));
  });
  it('denies knocking when already joined', async () => {
    const r = await room('7', 'public');
    await r.member(DAVE, 'join');
    await r.joinRules(ALICE, 'knock');
    await denies(r, member(DAVE, 'knock'), /join/);
  });
  it('allows withdrawing a knock (leave from knock), v7 only', async () => {
    const r = await room('7', 'knock');
    await r.member(DAVE, 'knock');
    await allows(r, member(DAVE, 'leave'));
  });
  it('v10: allows knocking on a knock_restricted room; v9 does not know that rule', async () => {
    await allows(await room('10', 'knock_restricted'), member(DAVE, 'knock'));
    await denies(await room('9', 'knock_restricted'), member(DAVE, 'knock'), /does not allow knocking/);
  });
});

describe('restricted joins (v8+)', () => {
  const restricted = { allow: [{ type: 'm.room_membership', room_id: '!space:example.org' }] };
  const viaAlice = (signed = true): EventFields => ({
    ...member(DAVE, 'join', DAVE, { join_authorised_via_users_server: ALICE }),
    alsoSignedBy: signed ? ['example.org'] : [],
  });
  const restrictedRoom = async (v: string, rule = 'restricted', users: JsonObject = {}) => {
    const r = await room(v, 'public', users);
    await r.member(BOB, 'join');
    await r.joinRules(ALICE, rule, restricted);
    return r;
  };
  it.each(range(8, 11))('v%s: allows a join authorised by a joined user with the invite level', async (v) => {
    await allows(await restrictedRoom(v), viaAlice());
  });
  it('denies a restricted join without an authorising user', async () => {
    await denies(await restrictedRoom('8'), member(DAVE, 'join'), /needs join_authorised_via_users_server/);
  });
  it('denies a join authorised by a user who is not joined', async () => {
    await denies(
      await restrictedRoom('9'),
      { ...member(DAVE, 'join', DAVE, { join_authorised_via_users_server: CAROL }), alsoSignedBy: ['other.org'] },
      /not joined/,
    );
  });
  it('denies a join authorised by a user below the invite level', async () => {
    const r = await restrictedRoom('9');
    await r.powerLevels(ALICE, { users: { [ALICE]: 100 }, invite: 50 });
    await denies(r, { ...member(DAVE, 'join', DAVE, { join_authorised_via_users_server: BOB }), alsoSignedBy: ['example.org'] }, /below the invite level/);
  });
  it.each(range(8, 11))('v%s: denies a join the authorising user\'s server did not sign', async (v) => {
    await denies(await restrictedRoom(v), viaAlice(false), /not signed by example.org/);
  });
  it('v7: the authorising user\'s signature is not required (the key means nothing yet)', async () => {
    await allows(await room('7'), viaAlice(false));
  });
  it('allows an invited user to join a restricted room without an authorising user', async () => {
    const r = await restrictedRoom('8');
    await r.member(ALICE, 'invite', DAVE);
    await allows(r, member(DAVE, 'join'));
  });
  it('v7: restricted is not a join rule, so the join is denied', async () => {
    await denies(await restrictedRoom('7'), viaAlice(), /join rule "restricted"/);
  });
  it('v10: knock_restricted admits an authorised join; v9 does not know the rule', async () => {
    await allows(await restrictedRoom('10', 'knock_restricted'), viaAlice());
    await denies(await restrictedRoom('9', 'knock_restricted'), viaAlice(), /knock_restricted/);
  });
});

describe('invite', () => {
  it.each(ALL)('v%s: allows a joined member with the invite level to invite', async (v) => {
    await allows(await room(v, 'invite'), member(ALICE, 'invite', BOB));
  });
  it('denies an invite from someone not in the room', async () => {
    await denies(await room('10'), member(CAROL, 'invite', BOB), /not joined/);
  });
  it.each(['join', 'ban'])('denies inviting a user whose membership is %s', async (membership) => {
    const r = await room('10');
    if (membership === 'join') await r.member(BOB, 'join');
    else await r.member(ALICE, 'ban', BOB);
    await denies(r, member(ALICE, 'invite', BOB), membership === 'join' ? /already joined/ : /banned/);
  });
  it('denies an invite below the invite level', async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    await r.powerLevels(ALICE, { users: { [ALICE]: 100 }, invite: 50 });
    await denies(r, member(BOB, 'invite', CAROL), /invite level/);
  });
});

describe('third-party invites', () => {
  const IDENTITY_SERVER = 'id.example';
  const setup = async (v = '10', keys: 'single' | 'list' = 'single') => {
    const r = await room(v, 'invite');
    await r.member(BOB, 'join');
    const publicKey = (await keyFor(IDENTITY_SERVER)).publicKey;
    const keyContent: JsonObject =
      keys === 'single'
        ? { public_key: encodeBase64(publicKey) }
        : { public_key: 'bm90IGEga2V5', public_keys: [{ public_key: encodeBase64Url(publicKey), key_validity_url: 'https://id.example/v' }] };
    await r.send(state(ALICE, 'm.room.third_party_invite', { display_name: 'c...@o...', key_validity_url: 'https://id.example/v', ...keyContent }, 'tok'));
    return r;
  };
  const signedBy = async (mxid: string, token = 'tok', signer = IDENTITY_SERVER) => {
    const signed = await signAs({ mxid, token }, signer);
    // signAs keys by signer name; the identity server's signature must carry its key ID under its own name
    return signer === IDENTITY_SERVER ? signed : { ...signed, signatures: { [IDENTITY_SERVER]: signed.signatures[signer]! } };
  };
  const invite = (sender: string, target: string, signed: JsonObject | undefined): EventFields =>
    member(sender, 'invite', target, { third_party_invite: signed === undefined ? { display_name: 'c' } : { display_name: 'c', signed } });

  it.each(['1', '6', '10', '11'])('v%s: allows an invite whose signed block matches public_key', async (v) => {
    const r = await setup(v);
    await allows(r, invite(ALICE, CAROL, await signedBy(CAROL)));
  });
  it('allows a signature matching a URL-safe key in public_keys', async () => {
    await allows(await setup('10', 'list'), invite(ALICE, CAROL, await signedBy(CAROL)));
  });
  it('denies a signed block signed by another key', async () => {
    await denies(await setup(), invite(ALICE, CAROL, await signedBy(CAROL, 'tok', 'impostor.example')), /no signature/);
  });
  it('denies a signed block for another user', async () => {
    await denies(await setup(), invite(ALICE, DAVE, await signedBy(CAROL)), /mxid/);
  });
  it('denies a token with no m.room.third_party_invite', async () => {
    await denies(await setup(), invite(ALICE, CAROL, await signedBy(CAROL, 'other-token')), /no m.room.third_party_invite/);
  });
  it('denies an invite from someone other than the third-party invite\'s sender', async () => {
    await denies(await setup(), invite(BOB, CAROL, await signedBy(CAROL)), /did not send/);
  });
  it('denies a third-party invite of a banned user', async () => {
    const r = await setup();
    await r.member(ALICE, 'ban', CAROL);
    await denies(r, invite(ALICE, CAROL, await signedBy(CAROL)), /banned/);
  });
  it('denies third_party_invite without signed', async () => {
    await denies(await setup(), invite(ALICE, CAROL, undefined), /no signed/);
  });
  it('allows m.room.third_party_invite at the invite level, denies below it', async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    await allows(r, state(BOB, 'm.room.third_party_invite', { public_key: 'x' }, 't1'));
    await r.powerLevels(ALICE, { users: { [ALICE]: 100 }, invite: 10 });
    await denies(r, state(BOB, 'm.room.third_party_invite', { public_key: 'x' }, 't2'), /invite level/);
  });
});

describe('leave and kick', () => {
  it.each(ALL)('v%s: allows a member to leave', async (v) => {
    const r = await room(v);
    await r.member(BOB, 'join');
    await allows(r, member(BOB, 'leave'));
  });
  it('allows rejecting an invite', async () => {
    const r = await room('10', 'invite');
    await r.member(ALICE, 'invite', BOB);
    await allows(r, member(BOB, 'leave'));
  });
  it('denies leaving when not in the room', async () => {
    await denies(await room('10'), member(BOB, 'leave'), /membership is none/);
  });
  it('denies a banned user "leaving" (lifting their own ban)', async () => {
    const r = await room('10');
    await r.member(ALICE, 'ban', BOB);
    await denies(r, member(BOB, 'leave'), /membership is ban/);
  });
  it('v6: a knock cannot be withdrawn, knocks do not exist', async () => {
    const r = await room('6', 'knock');
    await denies(r, member(DAVE, 'leave'));
  });
  it('allows a kick by a member with the kick level above the target', async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    await allows(r, member(ALICE, 'leave', BOB));
  });
  it('denies a kick of someone at the same level', async () => {
    const r = await room('10', 'public', { [BOB]: 50, [CAROL]: 50 });
    await r.member(BOB, 'join');
    await r.member(CAROL, 'join');
    await denies(r, member(BOB, 'leave', CAROL), /may not kick/);
  });
  it('denies a kick below the kick level', async () => {
    const r = await room('10', 'public', { [BOB]: 40 });
    await r.member(BOB, 'join');
    await r.member(CAROL, 'join');
    await denies(r, member(BOB, 'leave', CAROL), /may not kick/);
  });
  it('denies a kick by someone not in the room', async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    await denies(r, member(CAROL, 'leave', BOB), /not joined/);
  });
  it('allows an unban with the ban level, denies it without', async () => {
    const r = await room('10', 'public', { [BOB]: 50 });
    await r.member(BOB, 'join');
    await r.member(ALICE, 'ban', CAROL);
    await allows(r, member(BOB, 'leave', CAROL));
    await r.powerLevels(ALICE, { users: { [ALICE]: 100, [BOB]: 50 }, ban: 60, kick: 0 });
    await denies(r, member(BOB, 'leave', CAROL), /unbanning/);
  });
});

describe('ban', () => {
  it.each(ALL)('v%s: allows a ban with the ban level above the target', async (v) => {
    const r = await room(v);
    await r.member(BOB, 'join');
    await allows(r, member(ALICE, 'ban', BOB));
  });
  it('denies banning someone at the same level', async () => {
    const r = await room('10', 'public', { [BOB]: 100 });
    await r.member(BOB, 'join');
    await denies(r, member(BOB, 'ban', ALICE), /may not ban/);
  });
  it('denies a ban below the ban level', async () => {
    const r = await room('10');
    await r.member(BOB, 'join');
    await denies(r, member(BOB, 'ban', CAROL), /may not ban/);
  });
  it('denies a ban by someone not in the room', async () => {
    await denies(await room('10'), member(CAROL, 'ban', BOB), /not joined/);
  });
});


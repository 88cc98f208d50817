import { describe, expect, it } from 'vitest';
import { webRandomBytes } from '../crypto/random.ts';
import { roomServer } from '../../test/support/federated-rooms.ts';
import { createRoomAsAsked, type RoomCreationParts } from './create-room.ts';

// /createRoom's rules, which the client route hands over whole: nothing is made when the request cannot be
// met, the alias becomes canonical and is kept, a public room is published, and only remote invitees go
// through their servers.

async function parts(): Promise<RoomCreationParts & { remoteInvites: unknown[][] }> {
  const { rooms } = await roomServer();
  const serverName = rooms.serverName;
  const remoteInvites: unknown[][] = [];
  return {
    rooms, random: webRandomBytes, remoteInvites,
    profileOf: async () => ({ displayname: 'Alice' }),
    isLocal: (userId) => userId.endsWith(`:${serverName}`),
    inviteRemote: async (...args) => void remoteInvites.push(args),
  };
}

describe('createRoomAsAsked', () => {
  it('refuses an unknown version, a third-party invite, an alias that is no localpart or is taken, and makes nothing', async () => {
    const p = await parts();
    const alice = `@alice:${p.rooms.serverName}`;
    await createRoomAsAsked(p, { creator: alice, room_alias_name: 'taken' });
    const before = await p.rooms.roomsOf(alice, ['join']);
    for (const [asked, errcode] of [
      [{ room_version: '99' }, 'M_UNSUPPORTED_ROOM_VERSION'],
      [{ invite_3pid: [{ medium: 'email' }] }, 'M_UNKNOWN'],
      [{ room_alias_name: 'a:b' }, 'M_INVALID_PARAM'],
      [{ room_alias_name: 'taken' }, 'M_ROOM_IN_USE'],
    ] as const) {
      await expect(createRoomAsAsked(p, { creator: alice, ...asked })).rejects.toMatchObject({ status: 400, errcode });
    }
    expect(await p.rooms.roomsOf(alice, ['join'])).toEqual(before);
  });

  it('makes the alias canonical and keeps it, publishes a public room, and invites only remote users through their servers', async () => {
    const p = await parts();
    const alice = `@alice:${p.rooms.serverName}`;
    const bob = `@bob:${p.rooms.serverName}`;
    const { roomId } = await createRoomAsAsked(p, { creator: alice, preset: 'public_chat', visibility: 'public', room_alias_name: 'town', invite: [bob, '@carol:elsewhere.example'], is_direct: true });
    const alias = `#town:${p.rooms.serverName}`;
    expect(await p.rooms.resolveAlias(alias)).toBe(roomId);
    expect((await p.rooms.currentStateEvent(roomId, 'm.room.canonical_alias', ''))?.event.content).toEqual({ alias });
    expect(await p.rooms.isPublished(roomId)).toBe(true);
    expect(await p.rooms.membership(roomId, bob)).toBe('invite');
    expect(p.remoteInvites).toEqual([[alice, roomId, '@carol:elsewhere.example', { is_direct: true }]]);
  });
});

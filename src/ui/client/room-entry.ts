import { EventType, KnownMembership, Method, Preset, type MatrixClient } from 'matrix-js-sdk';
import { DirectInviteFailed, DirectTargetUnknown } from '../chat.ts';
import { chatCall, toChatError } from './convert.ts';

// How this user comes into a room: a room made here, a direct message started, a room or invite joined.

/** New private rooms and direct messages are encrypted, as Element makes them. */
const ENCRYPTION_STATE = { type: EventType.RoomEncryption, state_key: '', content: { algorithm: 'm.megolm.v1.aes-sha2' } };

export async function createRoom(client: MatrixClient, name: string, options: { public?: boolean }): Promise<string> {
  const request = options.public ? { name, preset: Preset.PublicChat } : { name, preset: Preset.PrivateChat, initial_state: [ENCRYPTION_STATE] };
  return (await chatCall(() => client.createRoom(request))).room_id;
}

export async function startDirect(client: MatrixClient, userId: string): Promise<string> {
  // Asked before anything is made: a mistyped ID or a server nobody reaches left an empty encrypted room behind.
  try {
    await client.getProfileInfo(userId);
  } catch (error) {
    throw new DirectTargetUnknown(userId, toChatError(error));
  }
  const { room_id: roomId } = await chatCall(() => client.createRoom({ preset: Preset.TrustedPrivateChat, is_direct: true, initial_state: [ENCRYPTION_STATE] }));
  await addDirect(client, userId, roomId);
  try {
    // Through the SDK's HTTP layer: its invite() has no room for `is_direct`, which tells the invitee's client it is a DM.
    await chatCall(() => client.http.authedRequest(Method.Post, `/rooms/${encodeURIComponent(roomId)}/invite`, undefined, { user_id: userId, is_direct: true }));
  } catch (error) {
    throw new DirectInviteFailed(roomId, error);
  }
  return roomId;
}

/** Joins a room, or accepts an invite; a direct message's is listed as one, as the inviter did. Returns the room's ID. */
export async function joinRoom(client: MatrixClient, roomIdOrAlias: string): Promise<string> {
  const invite = client.getRoom(roomIdOrAlias);
  const member = invite?.getMyMembership() === KnownMembership.Invite ? invite.getMember(client.getSafeUserId())?.events.member : undefined;
  const room = await chatCall(() => client.joinRoom(roomIdOrAlias));
  if (member?.getContent()['is_direct'] === true && member.getSender()) await addDirect(client, member.getSender()!, room.roomId).catch(() => undefined);
  return room.roomId;
}

/** Lists `roomId` as a direct message with `userId` in this account's `m.direct`. */
async function addDirect(client: MatrixClient, userId: string, roomId: string): Promise<void> {
  const content = { ...((client.getAccountData(EventType.Direct)?.getContent() ?? {}) as Record<string, string[]>) };
  if (content[userId]?.includes(roomId)) return;
  content[userId] = [...(content[userId] ?? []), roomId];
  await chatCall(() => client.setAccountData(EventType.Direct, content));
}

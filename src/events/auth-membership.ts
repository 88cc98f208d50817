import { decodeBase64, decodeBase64Url } from '../crypto/base64.ts';
import type { JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend } from '../crypto/ed25519.ts';
import { verifyJsonSignature } from '../crypto/signing.ts';
import type { RoomEvent } from './event.ts';
import { isValidUserId } from './identifiers.ts';
import { referenceIds } from './pdu.ts';
import { AuthError, domainOf, isJsonObject, roomCreator, type RoomPowerLevels } from './power-levels.ts';
import type { RoomVersion } from './room-versions.ts';

// The authorization rules for m.room.member events (rule 4 of room version 1's, and its later forms: restricted
// joins from v8, knocks from v7, the creators of v12), with third-party invites; the rest of the rules are auth.ts's.

/** Looks up one event of a room state by (type, state_key). */
export type AuthStateLookup = (type: string, stateKey: string) => RoomEvent | undefined;

const MEMBER = 'm.room.member';
const JOIN_RULES = 'm.room.join_rules';
const THIRD_PARTY_INVITE = 'm.room.third_party_invite';
const AUTHORISER = 'join_authorised_via_users_server';

/** content.membership of a member event, when it is a string. */
export function membershipOf(event: { content: JsonObject } | undefined): string | undefined {
  const membership = event?.content['membership'];
  return typeof membership === 'string' ? membership : undefined;
}

export function thirdPartyInviteToken(content: JsonObject): string | undefined {
  const invite = content['third_party_invite'];
  const signed = isJsonObject(invite) ? invite['signed'] : undefined;
  const token = isJsonObject(signed) ? signed['token'] : undefined;
  return typeof token === 'string' ? token : undefined;
}

export function authoriserOf(content: JsonObject): string | undefined {
  const authoriser = content[AUTHORISER];
  return typeof authoriser === 'string' ? authoriser : undefined;
}

function hasSignatureFrom(event: RoomEvent, server: string): boolean {
  const signatures = (event.signatures as unknown as JsonObject | undefined)?.[server];
  return isJsonObject(signatures) && Object.keys(signatures).length > 0;
}

export async function checkMember(
  event: RoomEvent,
  authState: AuthStateLookup,
  version: RoomVersion,
  verifier: Ed25519Backend,
  levels: RoomPowerLevels,
  create: RoomEvent,
): Promise<void> {
  const target = event.state_key;
  const membership = membershipOf(event);
  if (typeof target !== 'string') throw new AuthError('m.room.member has no state_key');
  if (membership === undefined) throw new AuthError('m.room.member has no membership');
  const content = event.content;
  const sender = event.sender;
  const membershipIn = (user: string): string | undefined => membershipOf(authState(MEMBER, user));

  // v8+: an authorising user's server must have signed the event.
  if (version.restrictedJoins && content[AUTHORISER] !== undefined && content[AUTHORISER] !== null) {
    const authoriser = content[AUTHORISER];
    if (typeof authoriser !== 'string' || !isValidUserId(authoriser)) {
      throw new AuthError(`${AUTHORISER} is not a user ID`);
    }
    if (!hasSignatureFrom(event, domainOf(authoriser))) {
      throw new AuthError(`the event is not signed by ${domainOf(authoriser)}, the authorising user's server`);
    }
  }

  const joinRule = (): string | undefined => {
    const rule = authState(JOIN_RULES, '')?.content['join_rule'];
    return typeof rule === 'string' ? rule : undefined;
  };

  switch (membership) {
    case 'join': {
      const prevs = referenceIds(event.prev_events);
      const creator = roomCreator(version, create);
      if (prevs.length === 1 && prevs[0] === create.event_id && creator !== undefined && target === creator) return;
      if (sender !== target) throw new AuthError('a user can only join for themselves');
      const current = membershipIn(sender);
      if (current === 'ban') throw new AuthError(`${sender} is banned`);
      const rule = joinRule();
      if (rule === 'invite' || (version.knocking && rule === 'knock')) {
        if (current === 'invite' || current === 'join') return;
        throw new AuthError(`the room is ${rule}-only and ${sender} is not invited`);
      }
      if ((version.restrictedJoins && rule === 'restricted') || (version.knockRestricted && rule === 'knock_restricted')) {
        if (current === 'invite' || current === 'join') return;
        const authoriser = authoriserOf(content);
        if (authoriser === undefined) throw new AuthError(`a restricted join needs ${AUTHORISER}`);
        if (membershipIn(authoriser) !== 'join') throw new AuthError(`the authorising user ${authoriser} is not joined`);
        if (levels.user(authoriser) < levels.named('invite')) {
          throw new AuthError(`the authorising user ${authoriser} is below the invite level`);
        }
        return;
      }
      if (rule === 'public') return;
      throw new AuthError(`the join rule ${JSON.stringify(rule ?? null)} does not let ${sender} join`);
    }

    case 'invite': {
      if (Object.hasOwn(content, 'third_party_invite')) {
        return checkThirdPartyInvite(event, target, membershipIn(target), authState, verifier);
      }
      if (membershipIn(sender) !== 'join') throw new AuthError(`${sender} is not joined to the room`);
      const current = membershipIn(target);
      if (current === 'join' || current === 'ban') throw new AuthError(`${target} is ${current === 'join' ? 'already joined' : 'banned'}`);
      if (levels.user(sender) < levels.named('invite')) throw new AuthError('sender is below the invite level');
      return;
    }

    case 'leave': {
      const senderMembership = membershipIn(sender);
      if (sender === target) {
        if (senderMembership === 'invite' || senderMembership === 'join') return;
        if (version.knocking && senderMembership === 'knock') return;
        throw new AuthError(`${sender} cannot leave: their membership is ${senderMembership ?? 'none'}`);
      }
      if (senderMembership !== 'join') throw new AuthError(`${sender} is not joined to the room`);
      const senderLevel = levels.user(sender);
      if (membershipIn(target) === 'ban' && senderLevel < levels.named('ban')) {
        throw new AuthError('unbanning needs the ban level');
      }
      if (senderLevel >= levels.named('kick') && levels.user(target) < senderLevel) return;
      throw new AuthError(`${sender} may not kick ${target}`);
    }

    case 'ban': {
      if (membershipIn(sender) !== 'join') throw new AuthError(`${sender} is not joined to the room`);
      const senderLevel = levels.user(sender);
      if (senderLevel >= levels.named('ban') && levels.user(target) < senderLevel) return;
      throw new AuthError(`${sender} may not ban ${target}`);
    }

    case 'knock': {
      if (!version.knocking) break;
      const rule = joinRule();
      if (!(rule === 'knock' || (version.knockRestricted && rule === 'knock_restricted'))) {
        throw new AuthError(`the join rule ${JSON.stringify(rule ?? null)} does not allow knocking`);
      }
      if (sender !== target) throw new AuthError('a user can only knock for themselves');
      const current = membershipIn(sender);
      if (current === 'ban' || current === 'invite' || current === 'join') {
        throw new AuthError(`${sender} cannot knock: their membership is ${current}`);
      }
      return;
    }
  }
  throw new AuthError(`unknown membership ${JSON.stringify(membership)}`);
}

/** The Ed25519 public keys an m.room.third_party_invite offers: `public_key` and each of `public_keys`. */
function thirdPartyPublicKeys(invite: RoomEvent): Uint8Array[] {
  const encoded: unknown[] = [invite.content['public_key']];
  const list = invite.content['public_keys'];
  if (Array.isArray(list)) for (const entry of list) if (isJsonObject(entry)) encoded.push(entry['public_key']);
  const keys: Uint8Array[] = [];
  for (const text of encoded) {
    if (typeof text !== 'string') continue;
    try {
      // Either alphabet is allowed (m.room.third_party_invite schema).
      keys.push(/[-_]/.test(text) ? decodeBase64Url(text) : decodeBase64(text));
    } catch {
      // an undecodable key matches nothing
    }
  }
  return keys;
}

async function checkThirdPartyInvite(
  event: RoomEvent,
  target: string,
  targetMembership: string | undefined,
  authState: AuthStateLookup,
  verifier: Ed25519Backend,
): Promise<void> {
  if (targetMembership === 'ban') throw new AuthError(`${target} is banned`);
  const thirdParty = event.content['third_party_invite'];
  const signed = isJsonObject(thirdParty) ? thirdParty['signed'] : undefined;
  if (!isJsonObject(signed)) throw new AuthError('third_party_invite has no signed object');
  const { mxid, token } = signed;
  if (typeof mxid !== 'string' || typeof token !== 'string') throw new AuthError('signed lacks mxid or token');
  if (mxid !== target) throw new AuthError('signed.mxid is not the invited user');
  const invite = authState(THIRD_PARTY_INVITE, token);
  if (!invite) throw new AuthError(`no m.room.third_party_invite for token ${token}`);
  if (invite.sender !== event.sender) throw new AuthError('the sender did not send the m.room.third_party_invite');
  const signatures = signed['signatures'];
  if (isJsonObject(signatures)) {
    const keys = thirdPartyPublicKeys(invite);
    for (const [server, byKeyId] of Object.entries(signatures)) {
      if (!isJsonObject(byKeyId)) continue;
      for (const keyId of Object.keys(byKeyId)) {
        if (!keyId.startsWith('ed25519:')) continue;
        for (const key of keys) {
          if (await verifyJsonSignature(signed, server, keyId, key, verifier)) return;
        }
      }
    }
  }
  throw new AuthError('no signature in signed matches a public key of the m.room.third_party_invite');
}

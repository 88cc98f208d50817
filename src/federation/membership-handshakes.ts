import { CanonicalJsonError, type JsonObject } from '../crypto/canonical-json.ts';
import type { Ed25519Backend, SigningKey } from '../crypto/ed25519.ts';
import type { RoomEvent } from '../events/event.ts';
import { serverNameOf } from '../events/identifiers.ts';
import { authEventIds, computeEventId, contentHashMatches, eventIdOf, receivedEventForms, signNewEvent, type PDU } from '../events/pdu.ts';
import { getRoomVersion, ROOM_VERSIONS, type RoomVersion } from '../events/room-versions.ts';
import { RoomError } from '../rooms/errors.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { Users } from '../users/users.ts';
import { serverAllowedInRoom } from './acl.ts';
import { isUnknownEndpoint, type FederationClient, type SendJoinResponse } from './client.ts';
import type { Elements } from './gap-filling.ts';
import { takeInviteIntoRoom } from './invites.ts';
import { leaveOutOfBand } from './out-of-band-memberships.ts';
import { countersignEvent, isPduShaped, roomOf, toPdu, type SignatureCheck } from './pdus.ts';
import { asJoinError, checkTemplate, FederationJoinError, unique } from './templates.ts';

/** Room versions we can join, newest first, for make_join's `ver`. */
const SUPPORTED_VERSIONS = [...ROOM_VERSIONS.keys()];

export interface MembershipHandshakesOptions {
  serverName: string;
  keyId: string;
  signingKey: SigningKey;
  ed25519: Ed25519Backend;
  rooms: Rooms;
  users: Pick<Users, 'isLocal' | 'exists'>;
  client: FederationClient;
  /** Whether another server's signature on an event verifies (pdus.ts, signatureCheck). */
  signedBy: SignatureCheck;
  /** Stores a joined room's state and auth chain as outliers (inbound-transactions.ts); answers the state's event IDs. */
  storeStateAndAuthChain(roomId: string, state: Elements, authChain: Elements): Promise<string[]>;
  now: () => number;
  log: (message: string, error?: unknown) => void;
}

/**
 * The membership handshakes with other servers: our users' joins, leaves and knocks in rooms
 * held elsewhere (make_*, sign, send_*), invites of their users that we have countersigned,
 * and invites of ours that they send us.
 */
export class MembershipHandshakes {
  constructor(private readonly options: MembershipHandshakesOptions) {}

  /**
   * Joins a local user to a room on other servers (server-server §Joining Rooms):
   * make_join, sign, send_join v2, then check and store the room's state and auth
   * chain and the join. Tries each server in turn.
   */
  async joinRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    const { rooms, serverName } = this.options;
    let lastError: unknown = new FederationJoinError(404, 'M_NOT_FOUND', `no server to join ${roomId} through`);
    for (const server of unique(servers).filter((s) => s !== serverName)) {
      try {
        const made = await this.options.client.makeJoin(server, roomId, userId, SUPPORTED_VERSIONS);
        const version = this.versionOf(made.room_version ?? '1');
        const template = checkTemplate(made.event, roomId, userId, 'join');
        // A restricted room's resident names the member who vouches for the join; its auth events count on it being kept.
        const authoriser = (template['content'] as JsonObject)['join_authorised_via_users_server'];
        const vouched: JsonObject = typeof authoriser === 'string' ? { join_authorised_via_users_server: authoriser } : {};
        const { event } = await this.signTemplate(template, version, { ...content, ...vouched, membership: 'join' });
        const eventId = computeEventId(event, version);
        const response = await this.options.client.sendJoin(server, roomId, eventId, event);
        await rooms.trackRemoteRoom(roomId, version.id);
        return await this.storeJoin(response, event, eventId, version, roomId);
      } catch (error) {
        lastError = error;
        this.options.log(`federation: joining ${roomId} through ${server} failed`, error);
      }
    }
    throw asJoinError(lastError);
  }

  private async storeJoin(response: SendJoinResponse, sent: PDU, eventId: string, version: RoomVersion, roomId: string): Promise<StoredEvent> {
    if (!response.state || !response.auth_chain) {
      throw new FederationJoinError(502, 'M_BAD_JSON', 'the send_join response has no state or auth chain');
    }
    const stateIds = await this.options.storeStateAndAuthChain(roomId, response.state, response.auth_chain);
    // Stored: the answer (17.5 MiB for a room of 10,000 members) is let go before the join is placed.
    response.state = response.auth_chain = undefined;
    await this.requireCreateInState(sent, stateIds, version);
    // The resident server may have added its signature (restricted joins); it is still our event.
    const join = response.event && isPduShaped(response.event) && eventIdOf(response.event, version) === eventId ? response.event : sent;
    const stored = await this.options.rooms.receiveEvent(join, { stateBefore: stateIds, ownJoin: true });
    if (stored.rejected) throw new FederationJoinError(403, 'M_FORBIDDEN', `the join was refused here: ${stored.rejected}`);
    return stored;
  }

  /**
   * A room's state must hold its create event, of the version make_join named (server-server
   * §Joining rooms); the join names it among its auth events (from v12 implies it), so the few of
   * those are all we read.
   */
  private async requireCreateInState(join: PDU, stateIds: string[], version: RoomVersion): Promise<void> {
    const inState = new Set(stateIds);
    const authIds = authEventIds({ ...join, room_id: roomOf(join) }, version);
    const authEvents = await Promise.all(authIds.filter((id) => inState.has(id)).map((id) => this.options.rooms.getEvent(id)));
    const create = authEvents.find((e) => e?.event.type === 'm.room.create' && e.event.state_key === '');
    if (!create) throw new FederationJoinError(502, 'M_BAD_JSON', 'the send_join answer has no m.room.create in its state');
    const created = create.event.content['room_version'] ?? '1';
    if (created !== version.id) throw new FederationJoinError(502, 'M_BAD_JSON', `the room was created as version ${JSON.stringify(created)}, but make_join said ${version.id}`);
  }

  /** Fills a make_* template in as the joining (leaving, knocking) server and signs it. */
  private async signTemplate(template: Record<string, unknown>, version: RoomVersion, content: JsonObject): Promise<{ event: PDU }> {
    const { serverName, keyId, signingKey, now } = this.options;
    const { hashes: _h, signatures: _s, unsigned: _u, event_id: _id, ...fields } = template;
    const unsigned: Record<string, unknown> = { ...fields, content, origin_server_ts: now() };
    if (version.redaction !== 'v11') unsigned['origin'] = serverName;
    else delete unsigned['origin'];
    if (version.eventIdFormat === 'local') unsigned['event_id'] = `$${crypto.randomUUID().replace(/-/g, '')}:${serverName}`;
    const signed = await signNewEvent(unsigned, version, serverName, keyId, signingKey);
    return { event: signed.event as unknown as PDU };
  }

  private versionOf(id: string): RoomVersion {
    const version = getRoomVersion(id);
    if (!version) throw new FederationJoinError(400, 'M_UNSUPPORTED_ROOM_VERSION', `room version ${id} is not supported here`);
    return version;
  }

  // ------------------------------------------------------------- leaves, knocks

  /**
   * Leaves (or rejects an invite to) a room we hold no state for, through the
   * servers given: make_leave, sign, send_leave v2. The leave is kept with the
   * user's memberships so /sync reports it.
   */
  async leaveRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    let lastError: unknown = new FederationJoinError(404, 'M_NOT_FOUND', `no server to leave ${roomId} through`);
    for (const server of unique(servers).filter((s) => s !== this.options.serverName)) {
      try {
        const made = await this.options.client.makeLeave(server, roomId, userId);
        const version = this.versionOf(made.room_version ?? (await this.options.rooms.roomVersion(roomId))?.id ?? '1');
        const template = checkTemplate(made.event, roomId, userId, 'leave');
        const { event } = await this.signTemplate(template, version, { ...content, membership: 'leave' });
        const eventId = computeEventId(event, version);
        await this.options.client.sendLeave(server, roomId, eventId, event);
        return await this.options.rooms.recordRemoteMembership({ ...(event as unknown as RoomEvent), event_id: eventId });
      } catch (error) {
        lastError = error;
        this.options.log(`federation: leaving ${roomId} through ${server} failed`, error);
      }
    }
    // No server took it (everyone left, or none answers): an invite or a knock is left here, out of band.
    const outOfBand = await leaveOutOfBand(this.options.rooms, roomId, userId, content, (t, version, c) => this.signTemplate(t, version, c));
    if (outOfBand) return outOfBand;
    throw asJoinError(lastError);
  }

  /** Knocks on a room on other servers: make_knock, sign, send_knock; the knock shows in /sync with the room's stripped state. */
  async knockRemoteRoom(roomId: string, userId: string, servers: string[], content: JsonObject): Promise<StoredEvent> {
    let lastError: unknown = new FederationJoinError(404, 'M_NOT_FOUND', `no server to knock on ${roomId} through`);
    for (const server of unique(servers).filter((s) => s !== this.options.serverName)) {
      try {
        const made = await this.options.client.makeKnock(server, roomId, userId, SUPPORTED_VERSIONS);
        const version = this.versionOf(made.room_version ?? '7');
        const template = checkTemplate(made.event, roomId, userId, 'knock');
        const { event } = await this.signTemplate(template, version, { ...content, membership: 'knock' });
        const eventId = computeEventId(event, version);
        const response = await this.options.client.sendKnock(server, roomId, eventId, event);
        const state = Array.isArray(response.knock_room_state) ? response.knock_room_state : [];
        return await this.options.rooms.recordRemoteMembership({ ...(event as unknown as RoomEvent), event_id: eventId, unsigned: { knock_room_state: state as unknown as JsonObject[] } as unknown as JsonObject });
      } catch (error) {
        lastError = error;
        this.options.log(`federation: knocking on ${roomId} through ${server} failed`, error);
      }
    }
    throw asJoinError(lastError);
  }

  // ------------------------------------------------------------- invites

  /**
   * Has the invitee's server countersign an invite we built (server-server §Inviting
   * to a room, v2), before we store it. The returned event must carry a valid
   * signature from that server.
   */
  async countersignInvite(event: RoomEvent, version: RoomVersion): Promise<RoomEvent> {
    const destination = serverNameOf(event.state_key!);
    const inviteRoomState = await this.options.rooms.strippedState(event.room_id, event.sender);
    const pdu = toPdu(event, version);
    const { event: signed } = await this.options.client.invite(destination, event.room_id, event.event_id, { room_version: version.id, event: pdu, invite_room_state: inviteRoomState }).catch((error: unknown) => {
      if (!isUnknownEndpoint(error)) throw error;
      // A server without v2 can take v1, which names no room version: only for rooms whose events are v1's (versions 1 and 2), as Synapse does.
      if (version.eventIdFormat !== 'local') throw new FederationJoinError(400, 'M_UNSUPPORTED_ROOM_VERSION', `${destination} serves only the v1 invite, which cannot carry a room of version ${version.id}`);
      return this.options.client.inviteV1(destination, event.room_id, event.event_id, pdu, inviteRoomState);
    });
    if (!isPduShaped(signed)) throw new FederationJoinError(502, 'M_BAD_JSON', 'the invite came back malformed');
    if (!(await this.options.signedBy(signed, version, destination))) throw new FederationJoinError(403, 'M_FORBIDDEN', `${destination} did not sign the invite`);
    return { ...(signed as unknown as RoomEvent), event_id: event.event_id };
  }

  /** The event with our signature added (a restricted join we vouch for, an invite we accept). */
  countersign(pdu: PDU, version: RoomVersion): Promise<PDU> {
    const { serverName, keyId, signingKey } = this.options;
    return countersignEvent(pdu, version, serverName, keyId, signingKey);
  }

  /**
   * Accepts an invite of a local user from another server (PUT /invite, v2 with the room's version,
   * v1 with none): check, countersign, keep. A room we hold has its server ACL; for one we do not,
   * the inviting server is all we know of it. v1 names no version: the room's when we hold it, else
   * 1 (v1 is for rooms of versions 1 and 2, whose events differ only in state resolution, which an
   * invite does not use).
   */
  async receiveInvite(origin: string, roomId: string, namedVersion: string | undefined, pdu: unknown, inviteRoomState: unknown[]): Promise<PDU> {
    const { rooms, users } = this.options;
    if (!isPduShaped(pdu) || pdu.room_id !== roomId) throw new RoomError('bad_event', 'the invite is not an event for this room');
    const held = await rooms.roomVersion(roomId);
    if (held && !(await serverAllowedInRoom(rooms, roomId, origin))) throw new RoomError('forbidden', `${origin} is denied by the server ACL of ${roomId}`);
    const roomVersion = namedVersion ?? held?.id ?? '1';
    const version = getRoomVersion(roomVersion);
    if (!version) throw new FederationJoinError(400, 'M_INCOMPATIBLE_ROOM_VERSION', `room version ${roomVersion} is not supported here`, { room_version: roomVersion });
    // The whole event must be JSON its version allows (v6+: integers within ±(2^53−1), no floats), not only what is signed.
    try {
      receivedEventForms(pdu, version);
    } catch (error) {
      if (error instanceof CanonicalJsonError) throw new RoomError('bad_event', `the invite is not valid JSON for room version ${version.id}: ${error.message}`);
      throw error;
    }
    const eventId = eventIdOf(pdu, version);
    if (!eventId) throw new RoomError('bad_event', 'the invite has no valid event ID');
    if (pdu.type !== 'm.room.member' || pdu.content['membership'] !== 'invite' || typeof pdu.state_key !== 'string') {
      throw new RoomError('bad_event', 'not an invite');
    }
    if (!users.isLocal(pdu.state_key)) throw new RoomError('not_found', `${pdu.state_key} is not a user of this server`);
    if (serverNameOf(pdu.sender) !== origin) throw new RoomError('forbidden', 'the inviter is not from the server that sent the invite');
    if (!(await this.options.signedBy(pdu, version, origin))) throw new RoomError('forbidden', "the invite is not signed by its sender's server");
    if (!contentHashMatches(pdu)) throw new RoomError('bad_event', 'the invite\'s content hash does not match');
    const signed = await this.countersign(pdu, version);
    // In a room we are in, the invite takes its place in the room now (`invites.ts`): it is a room event like any
    // other, which reaches us by /send too, whoever it names (Synapse does not ask whether the invitee exists at all).
    if (await takeInviteIntoRoom(rooms, signed, version)) return signed;
    // Elsewhere it is kept for the invitee's /sync, so there must be one.
    if (!(await users.exists(pdu.state_key))) throw new RoomError('not_found', `no user ${pdu.state_key} here`);
    const stripped = inviteRoomState.filter((e) => typeof e === 'object' && e !== null) as JsonObject[];
    await rooms.recordRemoteMembership({
      ...(signed as unknown as RoomEvent),
      event_id: eventId,
      unsigned: { invite_room_state: stripped } as unknown as JsonObject,
    });
    return signed;
  }
}

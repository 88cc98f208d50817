import { forbidden, notFound } from '../http/matrix-error.ts';
import type { JsonObject } from '../crypto/canonical-json.ts';
import { isValidServerName, serverNameOf } from '../events/identifiers.ts';
import type { Rooms, StoredEvent } from '../rooms/rooms.ts';
import type { Users } from '../users/users.ts';
import type { Federation } from './federation.ts';
import { joinAuthoriser } from './restricted-joins.ts';

/**
 * Membership changes of local users, wherever the room lives: in rooms our server
 * is in they are local events (federation then sends them on); in rooms it is not
 * in, they go through a resident server (make_join/send_join, make_leave/send_leave,
 * make_knock/send_knock), and invites of remote users are countersigned by the
 * invitee's server first.
 */
export class Memberships {
  constructor(
    private readonly rooms: Rooms,
    private readonly users: Users,
    private readonly federation: Federation,
  ) {}

  private get serverName(): string {
    return this.rooms.serverName;
  }

  /** Whether some local user is joined to the room: then our copy of it is live. */
  async inRoom(roomId: string): Promise<boolean> {
    return (await this.rooms.exists(roomId)) && (await this.rooms.joinedServers(roomId)).includes(this.serverName);
  }

  /** Resolves an alias, here or on its own server; with the servers to join through. */
  async resolveAlias(alias: string): Promise<{ roomId: string; servers: string[] } | undefined> {
    const server = serverNameOf(alias);
    if (server === this.serverName) return this.rooms.resolveAliasWithServers(alias);
    try {
      const answer = await this.federation.client.queryDirectory(server, alias);
      if (typeof answer.room_id !== 'string') return undefined;
      return { roomId: answer.room_id, servers: [...(Array.isArray(answer.servers) ? answer.servers : []), server] };
    } catch {
      return undefined;
    }
  }

  async join(userId: string, roomId: string, via: string[], extra: JsonObject): Promise<StoredEvent | undefined> {
    if (await this.users.isGuest(userId)) await this.checkGuestMayJoin(roomId);
    if (await this.inRoom(roomId)) {
      if ((await this.rooms.membership(roomId, userId)) === 'join') return undefined;
      // A restricted room lets in a member of an allowed room, vouched for by one of ours who may invite.
      const authoriser = await joinAuthoriser(this.rooms, roomId, userId);
      return this.sendMembership(userId, roomId, userId, 'join', authoriser ? { ...extra, join_authorised_via_users_server: authoriser } : extra);
    }
    const servers = await this.serversFor(userId, roomId, via);
    if (servers.length === 0) {
      if (await this.rooms.exists(roomId)) return this.sendMembership(userId, roomId, userId, 'join', extra);
      throw notFound('No known servers: this room is unknown here');
    }
    return this.federation.joinRemoteRoom(roomId, userId, servers, await this.withProfile(userId, 'join', extra));
  }

  /**
   * A guest joins only a room whose `m.room.guest_access` is `can_join` (client-server §Guest access). Guests
   * are this server's notion, so the room's state here decides: a room we do not hold is refused.
   */
  private async checkGuestMayJoin(roomId: string): Promise<void> {
    const guestAccess = (await this.rooms.exists(roomId)) ? await this.rooms.currentStateEvent(roomId, 'm.room.guest_access', '') : undefined;
    if (guestAccess?.event.content['guest_access'] !== 'can_join') throw forbidden('Guest access is not allowed in this room');
  }

  async knock(userId: string, roomId: string, via: string[], extra: JsonObject): Promise<StoredEvent> {
    if (await this.inRoom(roomId)) return this.sendMembership(userId, roomId, userId, 'knock', extra);
    const servers = await this.serversFor(userId, roomId, via);
    if (servers.length === 0) throw notFound('No known servers: this room is unknown here');
    return this.federation.knockRemoteRoom(roomId, userId, servers, await this.withProfile(userId, 'knock', extra));
  }

  /** Leaves a room, or rejects an invite or withdraws a knock for a room we are not in. */
  async leave(userId: string, roomId: string, extra: JsonObject): Promise<void> {
    if (await this.inRoom(roomId)) {
      const current = await this.rooms.membership(roomId, userId);
      if (current === undefined || current === 'leave') {
        if (current === 'leave') return;
        throw forbidden(`${userId} is not in room ${roomId}`);
      }
      await this.sendMembership(userId, roomId, userId, 'leave', extra);
      return;
    }
    const local = await this.rooms.localMembership(userId, roomId);
    if (!local || local.membership === 'leave' || local.membership === 'ban') {
      if (local) return;
      if (await this.rooms.exists(roomId)) throw forbidden(`${userId} is not in room ${roomId}`);
      throw notFound('Unknown room');
    }
    // An invite (or knock) that is part of the room as we hold it, not an outlier from another
    // server, is left with an event of our own, as Synapse does: no other server is needed to
    // leave through, so it works even when every other member has gone.
    const event = await this.rooms.getEvent(local.eventId);
    if (event && !event.outlier && (await this.rooms.membership(roomId, userId)) === local.membership) {
      await this.sendMembership(userId, roomId, userId, 'leave', extra);
      return;
    }
    const servers = await this.serversFor(userId, roomId, []);
    await this.federation.leaveRemoteRoom(roomId, userId, servers, { membership: 'leave', ...extra });
  }

  /**
   * Leaves every room the user is in, declines their invites and withdraws their knocks (an account
   * deactivated, as Synapse does); a room that cannot be left now (its server away) is passed over.
   */
  async leaveAll(userId: string): Promise<void> {
    for (const roomId of await this.rooms.roomsOf(userId, ['join', 'invite', 'knock'])) {
      await this.leave(userId, roomId, {}).catch(() => undefined);
    }
  }

  /** Invites a user, local or remote. */
  async invite(sender: string, roomId: string, target: string, extra: JsonObject): Promise<StoredEvent> {
    if ((await this.rooms.membership(roomId, target)) === 'join') throw forbidden(`${target} is already in the room`);
    if (serverNameOf(target) === this.serverName) return this.sendMembership(sender, roomId, target, 'invite', extra);
    if (!(await this.rooms.exists(roomId))) throw notFound('Unknown room');
    const [event] = await this.rooms.sendEvents(
      roomId,
      [{ type: 'm.room.member', sender, state_key: target, content: await this.withProfile(target, 'invite', extra) }],
      undefined,
      { countersign: (e, version) => this.federation.countersignInvite(e, version) },
    );
    return event!;
  }

  /** A membership event sent by a local user in a room we are in (joins carry the profile). */
  async sendMembership(sender: string, roomId: string, target: string, membership: string, extra: JsonObject = {}): Promise<StoredEvent> {
    if (!(await this.rooms.exists(roomId))) throw notFound(membership === 'join' ? 'No known servers: this room is unknown here' : 'Unknown room');
    const content = membership === 'join' || membership === 'invite' ? await this.withProfile(target, membership, extra) : { ...extra, membership };
    const [event] = await this.rooms.sendEvents(roomId, [{ type: 'm.room.member', sender, state_key: target, content }]);
    return event!;
  }

  /** Membership content with the user's display name and avatar, for joins and invites. */
  private async withProfile(userId: string, membership: string, extra: JsonObject): Promise<JsonObject> {
    const content: JsonObject = { ...extra, membership };
    const profile = this.users.isLocal(userId) ? await this.users.getProfile(userId) : undefined;
    if (profile?.displayname !== undefined) content['displayname'] = profile.displayname;
    if (profile?.avatar_url !== undefined) content['avatar_url'] = profile.avatar_url;
    return content;
  }

  /**
   * Servers to reach a room through: those given, whoever invited us, the room ID's server, or
   * (a v12 room ID names none) the creator's of a room we hold, as the appendix suggests.
   */
  private async serversFor(userId: string, roomId: string, via: string[]): Promise<string[]> {
    const servers = [...via];
    const local = await this.rooms.localMembership(userId, roomId);
    if (local) {
      const event = await this.rooms.getEvent(local.eventId);
      if (event) servers.push(serverNameOf(event.event.sender));
    }
    const colon = roomId.indexOf(':');
    if (colon > 0) servers.push(roomId.slice(colon + 1));
    const create = colon > 0 ? undefined : await this.rooms.currentStateEvent(roomId, 'm.room.create', '');
    if (create) servers.push(serverNameOf(create.event.sender));
    return [...new Set(servers)].filter((s) => s !== this.serverName && isValidServerName(s));
  }
}

import type { Hono } from 'hono';
import { z } from 'zod';
import type { JsonObject } from '../../crypto/canonical-json.ts';
import { isValidRoomAlias, isValidRoomId, isValidUserId, serverNameOf } from '../../events/identifiers.ts';
import { getRoomVersion, DEFAULT_ROOM_VERSION } from '../../events/room-versions.ts';
import { stateKey } from '../../events/event.ts';
import { createRoomAsAsked } from '../../rooms/create-room.ts';
import { deleteRoomAlias, setRoomVisibility } from '../../rooms/directory-admin.ts';
import { requireLeftBeforeForget, requireMayRedact, requireMembershipToChange, requireOwnAliases, requireSendableRelation } from '../../rooms/room-policy.ts';
import { relationOf } from '../../rooms/relations.ts';
import { upgradeRoom } from '../../rooms/upgrade.ts';
import type { EventTemplate, StoredEvent } from '../../rooms/rooms.ts';
import { roomEventFilterSchema } from '../../sync/filter.ts';
import { requireSession, type Ctx, type Env } from '../context.ts';
import { badJson, forbidden, invalidParam, MatrixError, notFound } from '../../http/matrix-error.ts';
import { intQuery, parseBody, readJsonObject, requireRoomId } from '../http.ts';
import { jsonObject, validate } from '../../http/validate.ts';
import { on } from './route.ts';
import { publicRoomsPage, type PublicRoomsQuery } from '../../rooms/directory.ts';

const createRoomSchema = z
  .object({
    visibility: z.enum(['public', 'private']).optional(),
    room_alias_name: z.string().min(1).optional(),
    name: z.string().optional(),
    topic: z.string().optional(),
    invite: z.array(z.string()).optional(),
    invite_3pid: z.array(z.unknown()).optional(),
    room_version: z.string().optional(),
    creation_content: jsonObject.optional(),
    initial_state: z.array(z.object({ type: z.string(), state_key: z.string().optional(), content: jsonObject })).optional(),
    preset: z.enum(['private_chat', 'public_chat', 'trusted_private_chat']).optional(),
    is_direct: z.boolean().optional(),
    power_level_content_override: jsonObject.optional(),
  })
  .loose();

const targetSchema = z.object({ user_id: z.string(), reason: z.string().optional(), is_direct: z.boolean().optional() }).loose();
const reasonSchema = z.object({ reason: z.string().optional() }).loose();


function requireUserId(userId: string): string {
  if (!isValidUserId(userId)) throw invalidParam(`invalid user ID ${userId}`);
  return userId;
}

/** A transaction: its ID and the endpoint it was sent to (the method and the path without the ID), which scope it with the device. */
type ClientTxn = { endpoint: string; txnId: string };

async function send(c: Ctx, roomId: string, templates: EventTemplate[], txnKey?: ClientTxn): Promise<StoredEvent[]> {
  const session = await requireSession(c);
  const services = c.get('services');
  services.rateLimiter?.take(session.userId + '/' + session.deviceId);
  const txn = txnKey === undefined ? undefined : { userId: session.userId, deviceId: session.deviceId, ...txnKey };
  return services.rooms.sendEvents(roomId, templates, txn);
}

/** A membership change by the authenticated user, through the memberships component. */
async function membership(c: Ctx, roomId: string, target: string, membershipValue: string, extra: JsonObject = {}): Promise<StoredEvent> {
  const session = await requireSession(c);
  const services = c.get('services');
  services.rateLimiter?.take(session.userId + '/' + session.deviceId);
  return services.memberships.sendMembership(session.userId, roomId, target, membershipValue, extra);
}

/** A room ID, or the room an alias names (here or on its server), with servers to reach it through. */
async function resolveRoom(c: Ctx, idOrAlias: string): Promise<{ roomId: string; servers: string[] }> {
  const via = [...(c.req.queries('via') ?? []), ...(c.req.queries('server_name') ?? [])];
  if (idOrAlias.startsWith('#')) {
    if (!isValidRoomAlias(idOrAlias)) throw invalidParam(`invalid room alias ${idOrAlias}`);
    const resolved = await c.get('services').memberships.resolveAlias(idOrAlias);
    if (!resolved) throw notFound(`Room alias ${idOrAlias} not found`);
    return { roomId: resolved.roomId, servers: [...via, ...resolved.servers] };
  }
  if (!isValidRoomId(idOrAlias)) throw invalidParam(`invalid room ID or alias ${idOrAlias}`);
  return { roomId: idOrAlias, servers: via };
}

async function requireJoined(c: Ctx, roomId: string, userId: string): Promise<void> {
  if ((await c.get('services').rooms.membership(roomId, userId)) !== 'join') throw forbidden(`${userId} is not in room ${roomId}`);
}

/** The state a user may read (sync's visibility rules); M_FORBIDDEN for anyone else. */
async function readableState(c: Ctx, roomId: string, userId: string) {
  const state = await c.get('services').sync.visibility.readableState(roomId, userId);
  if (!state) throw forbidden(`${userId} is not in room ${roomId}`);
  return state;
}

export function roomRoutes(app: Hono<Env>): void {
  on(app, 'POST', '/rooms/:roomId/upgrade', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const body = await parseBody(c, z.object({ new_version: z.string(), additional_creators: z.array(z.string()).optional() }).loose());
    for (const user of body.additional_creators ?? []) requireUserId(user);
    const services = c.get('services');
    const { replacementRoom } = await upgradeRoom(services.rooms, services.users, services.random, {
      roomId, userId: session.userId, newVersion: body.new_version, additionalCreators: body.additional_creators,
    });
    return c.json({ replacement_room: replacementRoom });
  });

  on(app, 'POST', '/createRoom', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const body = await parseBody(c, createRoomSchema, { allowEmpty: true });
    services.rateLimiter?.take(session.userId + '/' + session.deviceId);
    for (const invitee of body.invite ?? []) requireUserId(invitee);
    const { roomId } = await createRoomAsAsked(
      { rooms: services.rooms, random: services.random, profileOf: (userId) => services.users.getProfile(userId), isLocal: (userId) => services.users.isLocal(userId), inviteRemote: (...args) => services.memberships.invite(...args) },
      {
        ...body,
        creator: session.userId,
        creation_content: body.creation_content as JsonObject | undefined,
        initial_state: body.initial_state as { type: string; state_key?: string; content: JsonObject }[] | undefined,
        power_level_content_override: body.power_level_content_override as JsonObject | undefined,
      },
    );
    return c.json({ room_id: roomId });
  });

  // ---------------------------------------------------------- membership

  /** The body's content goes into the membership event (reason and any other fields), as Synapse and Dendrite do. */
  const membershipExtra = async (c: Ctx): Promise<JsonObject> => {
    const body = await readJsonObject(c, { allowEmpty: true });
    if (body['reason'] !== undefined && typeof body['reason'] !== 'string') throw badJson('reason must be a string');
    const { membership: _m, third_party_signed: _t, ...extra } = body;
    return extra as JsonObject;
  };

  const join = async (c: Ctx, idOrAlias: string) => {
    const session = await requireSession(c);
    const { roomId, servers } = await resolveRoom(c, idOrAlias);
    const extra = await membershipExtra(c);
    c.get('services').rateLimiter?.take(session.userId + '/' + session.deviceId);
    await c.get('services').memberships.join(session.userId, roomId, servers, extra);
    return c.json({ room_id: roomId });
  };
  on(app, 'POST', '/join/:roomIdOrAlias', (c) => join(c, c.req.param('roomIdOrAlias')!));
  on(app, 'POST', '/rooms/:roomId/join', (c) => join(c, requireRoomId(c)));

  on(app, 'POST', '/knock/:roomIdOrAlias', async (c) => {
    const session = await requireSession(c);
    const { roomId, servers } = await resolveRoom(c, c.req.param('roomIdOrAlias')!);
    const body = await parseBody(c, reasonSchema, { allowEmpty: true });
    await c.get('services').memberships.knock(session.userId, roomId, servers, body.reason ? { reason: body.reason } : {});
    return c.json({ room_id: roomId });
  });

  on(app, 'POST', '/rooms/:roomId/invite', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const body = await parseBody(c, targetSchema);
    const target = requireUserId(body.user_id);
    c.get('services').rateLimiter?.take(session.userId + '/' + session.deviceId);
    // `is_direct` (as createRoom's invites carry it) tells the invitee's client the room is a direct message.
    const extra = { ...(body.reason ? { reason: body.reason } : {}), ...(body.is_direct === true ? { is_direct: true } : {}) };
    await c.get('services').memberships.invite(session.userId, roomId, target, extra);
    return c.json({});
  });

  on(app, 'POST', '/rooms/:roomId/leave', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const body = await parseBody(c, reasonSchema, { allowEmpty: true });
    await c.get('services').memberships.leave(session.userId, roomId, body.reason ? { reason: body.reason } : {});
    return c.json({});
  });

  on(app, 'POST', '/rooms/:roomId/forget', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const { rooms } = c.get('services');
    await requireLeftBeforeForget(rooms, roomId, session.userId);
    await rooms.forget(session.userId, roomId);
    return c.json({});
  });

  for (const [action, membershipValue] of [['kick', 'leave'], ['ban', 'ban'], ['unban', 'leave']] as const) {
    on(app, 'POST', `/rooms/:roomId/${action}`, async (c) => {
      const roomId = requireRoomId(c);
      const body = await parseBody(c, targetSchema);
      const target = requireUserId(body.user_id);
      await requireMembershipToChange(c.get('services').rooms, roomId, target, action);
      await membership(c, roomId, target, membershipValue, body.reason ? { reason: body.reason } : {});
      return c.json({});
    });
  }

  on(app, 'GET', '/joined_rooms', async (c) => {
    const session = await requireSession(c);
    return c.json({ joined_rooms: await c.get('services').rooms.roomsOf(session.userId, ['join']) });
  });

  // -------------------------------------------------------------- events

  const sendMessage = async (c: Ctx, txnId: string | undefined) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const type = c.req.param('eventType')!;
    const content = await parseBody(c, jsonObject);
    if (type === 'm.room.redaction') throw badJson('use the /redact endpoint to send redactions');
    await requireSendableRelation(c.get('services').rooms, roomId, type, content as JsonObject);
    const txn = txnId === undefined ? undefined : { endpoint: JSON.stringify(['send', roomId, type]), txnId };
    const [event] = await send(c, roomId, [{ type, sender: session.userId, content: content as JsonObject }], txn);
    return c.json({ event_id: event!.event.event_id });
  };
  on(app, 'PUT', '/rooms/:roomId/send/:eventType/:txnId', (c) => sendMessage(c, c.req.param('txnId')!));
  // The legacy form without a transaction ID, which Synapse still serves: each request is a new event.
  on(app, 'POST', '/rooms/:roomId/send/:eventType', (c) => sendMessage(c, undefined));

  const putState = async (c: Ctx, key: string) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const type = c.req.param('eventType')!;
    const content = (await parseBody(c, jsonObject)) as JsonObject;
    if (type === 'm.room.member') {
      const value = content['membership'];
      if (typeof value !== 'string') throw badJson('membership is required');
    }
    if (type === 'm.room.canonical_alias') await requireOwnAliases(c.get('services').rooms, roomId, content);
    const [event] = await send(c, roomId, [{ type, sender: session.userId, state_key: key, content }]);
    return c.json({ event_id: event!.event.event_id });
  };
  // An empty state key may come with or without its trailing slash.
  on(app, 'PUT', '/rooms/:roomId/state/:eventType', (c) => putState(c, ''));
  on(app, 'PUT', '/rooms/:roomId/state/:eventType/', (c) => putState(c, ''));
  on(app, 'PUT', '/rooms/:roomId/state/:eventType/:stateKey', (c) => putState(c, c.req.param('stateKey') ?? ''));

  const getState = async (c: Ctx, key: string) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const state = await readableState(c, roomId, session.userId);
    const type = c.req.param('eventType')!;
    const stored = state.get(stateKey(type, key));
    if (!stored) throw notFound(`No ${type} state with key ${JSON.stringify(key)}`);
    const event = await c.get('services').sync.formatter.format(stored, session);
    return c.json(c.req.query('format') === 'event' ? event : event.content);
  };
  on(app, 'GET', '/rooms/:roomId/state/:eventType', (c) => getState(c, ''));
  on(app, 'GET', '/rooms/:roomId/state/:eventType/', (c) => getState(c, ''));
  on(app, 'GET', '/rooms/:roomId/state/:eventType/:stateKey', (c) => getState(c, c.req.param('stateKey') ?? ''));

  on(app, 'GET', '/rooms/:roomId/state', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const state = await readableState(c, roomId, session.userId);
    return c.json(await c.get('services').sync.formatter.formatAll([...state.values()], session));
  });

  const redact = async (c: Ctx, txnId: string | undefined) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const eventId = c.req.param('eventId')!;
    const body = await parseBody(c, reasonSchema, { allowEmpty: true });
    const services = c.get('services');
    const target = await services.rooms.getEvent(eventId);
    if (target && target.event.room_id !== roomId) throw invalidParam(`event ${eventId} is not in room ${roomId}`);
    if (target) await requireMayRedact(services.rooms, roomId, session.userId, target);
    const version = (await services.rooms.roomVersion(roomId)) ?? getRoomVersion(DEFAULT_ROOM_VERSION)!;
    const content: JsonObject = body.reason !== undefined ? { reason: body.reason } : {};
    if (version.redactsInContent) content['redacts'] = eventId;
    const [event] = await send(c, roomId, [{ type: 'm.room.redaction', sender: session.userId, content, redacts: eventId }], txnId === undefined ? undefined : { endpoint: JSON.stringify(['redact', roomId, eventId]), txnId });
    return c.json({ event_id: event!.event.event_id });
  };
  on(app, 'PUT', '/rooms/:roomId/redact/:eventId/:txnId', (c) => redact(c, c.req.param('txnId')));
  // The form without a transaction ID, out of the spec since r0 but still served by Synapse: each call is a new redaction.
  on(app, 'POST', '/rooms/:roomId/redact/:eventId', (c) => redact(c, undefined));

  on(app, 'GET', '/rooms/:roomId/event/:eventId', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const services = c.get('services');
    const stored = await services.rooms.getEvent(c.req.param('eventId')!);
    if (!stored || stored.event.room_id !== roomId || !(await services.sync.visibility.canSee(session.userId, stored))) {
      throw notFound('Event not found');
    }
    return c.json(await services.sync.formatter.format(stored, session));
  });

  on(app, 'GET', '/rooms/:roomId/members', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const services = c.get('services');
    let state = await readableState(c, roomId, session.userId);
    const at = c.req.query('at');
    if (at) {
      const nids = await services.history.stateAtToken(roomId, at);
      state = await services.rooms.loadStateEvents(nids);
    }
    const wanted = c.req.query('membership');
    const unwanted = c.req.query('not_membership');
    const members = [...state.values()].filter((e) => {
      if (e.event.type !== 'm.room.member') return false;
      const value = e.event.content['membership'];
      return (!wanted || value === wanted) && (!unwanted || value !== unwanted);
    });
    return c.json({ chunk: await services.sync.formatter.formatAll(members, session) });
  });

  on(app, 'GET', '/rooms/:roomId/joined_members', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const state = await readableState(c, roomId, session.userId);
    // Both fields for every member, null when unset, as Synapse and Dendrite answer (the spec's schema says strings).
    const joined: Record<string, { display_name: string | null; avatar_url: string | null }> = {};
    for (const stored of state.values()) {
      if (stored.event.type !== 'm.room.member' || stored.event.content['membership'] !== 'join') continue;
      const { displayname, avatar_url: avatarUrl } = stored.event.content;
      joined[stored.event.state_key!] = {
        display_name: typeof displayname === 'string' ? displayname : null,
        avatar_url: typeof avatarUrl === 'string' ? avatarUrl : null,
      };
    }
    return c.json({ joined });
  });

  const filterQuery = (c: Ctx) => {
    const raw = c.req.query('filter');
    if (!raw) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch {
      throw new MatrixError(400, 'M_NOT_JSON', 'filter is not valid JSON');
    }
    return validate(roomEventFilterSchema, parsed);
  };

  on(app, 'GET', '/rooms/:roomId/messages', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const services = c.get('services');
    const dir = c.req.query('dir') ?? 'b';
    if (dir !== 'b' && dir !== 'f') throw invalidParam('dir must be b or f');
    // Who was never in the room reads it only when it is world-readable; the others' events are filtered as they page.
    const membershipValue = await services.rooms.membership(roomId, session.userId);
    if (membershipValue === undefined && !(await services.sync.visibility.mayRead(roomId, session.userId))) throw forbidden(`${session.userId} is not in room ${roomId}`);
    const from = c.req.query('from');
    const to = c.req.query('to');
    const result = await services.history.messages(roomId, session, {
      dir,
      limit: Math.max(1, intQuery(c, 'limit', 10, 1000)),
      filter: filterQuery(c),
      ...(from ? { from } : {}),
      ...(to ? { to } : {}),
    });
    return c.json(result);
  });

  on(app, 'GET', '/rooms/:roomId/context/:eventId', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const result = await c.get('services').history.context(roomId, c.req.param('eventId')!, session, intQuery(c, 'limit', 10, 1000), filterQuery(c));
    if (!result) throw notFound('Event not found');
    return c.json(result);
  });

  // ------------------------------------------------------ aliases, directory

  on(app, 'GET', '/directory/room/:alias', async (c) => {
    const alias = c.req.param('alias')!;
    if (!isValidRoomAlias(alias)) throw invalidParam('invalid room alias');
    // Ours from our table; another server's alias from that server.
    const resolved = await c.get('services').memberships.resolveAlias(alias);
    if (!resolved) throw notFound(`Room alias ${alias} not found`);
    return c.json({ room_id: resolved.roomId, servers: [...new Set(resolved.servers)] });
  });

  on(app, 'PUT', '/directory/room/:alias', async (c) => {
    const session = await requireSession(c);
    const alias = c.req.param('alias')!;
    const services = c.get('services');
    if (!isValidRoomAlias(alias)) throw invalidParam('invalid room alias');
    if (serverNameOf(alias) !== services.users.serverName) throw invalidParam('aliases must be on this server');
    const body = await parseBody(c, z.object({ room_id: z.string() }).loose());
    if (!(await services.rooms.exists(body.room_id))) throw notFound('Unknown room');
    await requireJoined(c, body.room_id, session.userId);
    if (!(await services.rooms.createAlias(alias, body.room_id, session.userId))) throw new MatrixError(409, 'M_UNKNOWN', 'Room alias already exists');
    return c.json({});
  });

  on(app, 'DELETE', '/directory/room/:alias', async (c) => {
    const session = await requireSession(c);
    await deleteRoomAlias(c.get('services').rooms, c.req.param('alias')!, session.userId);
    return c.json({});
  });

  on(app, 'GET', '/rooms/:roomId/aliases', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    if (!(await c.get('services').sync.visibility.mayRead(roomId, session.userId))) throw forbidden(`${session.userId} is not in room ${roomId}`);
    return c.json({ aliases: await c.get('services').rooms.aliasesOf(roomId) });
  });

  on(app, 'GET', '/directory/list/room/:roomId', async (c) => {
    const roomId = requireRoomId(c);
    const rooms = c.get('services').rooms;
    if (!(await rooms.exists(roomId))) throw notFound('Unknown room');
    return c.json({ visibility: (await rooms.isPublished(roomId)) ? 'public' : 'private' });
  });

  on(app, 'PUT', '/directory/list/room/:roomId', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const body = await parseBody(c, z.object({ visibility: z.enum(['public', 'private']).optional() }).loose(), { allowEmpty: true });
    await setRoomVisibility(c.get('services').rooms, roomId, session.userId, body.visibility ?? 'public');
    return c.json({});
  });

  /** Our directory, or with `server` another server's, asked over federation. */
  const publicRooms = async (c: Ctx, query: PublicRoomsQuery) => {
    const services = c.get('services');
    const server = c.req.query('server');
    if (server !== undefined && server !== services.rooms.serverName) {
      return c.json(await services.federation.publicRooms(server, query));
    }
    return c.json(await publicRoomsPage(services.rooms, query));
  };
  on(app, 'GET', '/publicRooms', (c) =>
    publicRooms(c, { limit: c.req.query('limit') ? intQuery(c, 'limit', 0) : undefined, since: c.req.query('since') }),
  );
  on(app, 'POST', '/publicRooms', async (c) => {
    await requireSession(c);
    const body = await parseBody(c, z.object({ limit: z.number().int().min(0).optional(), since: z.string().nullable().optional(), filter: z.object({ generic_search_term: z.string().optional() }).loose().nullable().optional() }).loose(), { allowEmpty: true });
    return publicRooms(c, { limit: body.limit, since: body.since, term: body.filter?.generic_search_term });
  });

  // ----------------------------------------------- receipts, markers, typing

  on(app, 'POST', '/rooms/:roomId/receipt/:receiptType/:eventId', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const type = c.req.param('receiptType')!;
    const eventId = c.req.param('eventId')!;
    const body = await parseBody(c, z.object({ thread_id: z.unknown().optional() }).loose(), { allowEmpty: true });
    const services = c.get('services');
    if (!['m.read', 'm.read.private', 'm.fully_read'].includes(type)) throw invalidParam(`unknown receipt type ${type}`);
    const threadId = body.thread_id;
    // client-server §Threaded read receipts: `main` or a thread root's ID, never for m.fully_read.
    if (threadId !== undefined) {
      if (typeof threadId !== 'string' || threadId === '') throw invalidParam('thread_id field must be a non-empty string');
      if (type === 'm.fully_read') throw invalidParam('thread_id is not allowed for m.fully_read');
      if (threadId !== 'main' && !threadId.startsWith('$')) throw invalidParam('thread_id must be main or a thread root event ID');
    }
    await requireJoined(c, roomId, session.userId);
    const target = await services.rooms.getEvent(eventId);
    if (!target || target.event.room_id !== roomId) throw notFound('Event not found');
    if (threadId !== undefined) {
      // The event must be in that thread (its root belongs to it, and to the main timeline). An edit or
      // a reaction of an event in a thread is in that thread too, as clients show it there.
      let thread = (await services.rooms.relations.threadsOf([target.nid])).get(target.nid);
      const relation = relationOf(target.event);
      if (thread === undefined && relation && relation.relType !== 'm.thread') {
        const parent = await services.rooms.getEvent(relation.parentId);
        if (parent) thread = (await services.rooms.relations.threadsOf([parent.nid])).get(parent.nid);
      }
      const related = threadId === 'main' ? thread === undefined : thread === threadId || eventId === threadId;
      if (!related) throw invalidParam(`event ${eventId} is not in thread ${threadId}`);
    }
    if (type === 'm.fully_read') await services.users.accountData.put(session.userId, roomId, 'm.fully_read', { event_id: eventId });
    else await services.sync.receipts.put(roomId, session.userId, type, eventId, (threadId as string | undefined) ?? '');
    return c.json({});
  });

  on(app, 'POST', '/rooms/:roomId/read_markers', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    const body = await parseBody(c, z.object({ 'm.fully_read': z.string().optional(), 'm.read': z.string().optional(), 'm.read.private': z.string().optional() }).loose(), { allowEmpty: true });
    const services = c.get('services');
    await requireJoined(c, roomId, session.userId);
    for (const eventId of [body['m.fully_read'], body['m.read'], body['m.read.private']]) {
      if (eventId === undefined) continue;
      const target = await services.rooms.getEvent(eventId);
      if (!target || target.event.room_id !== roomId) throw notFound(`Event ${eventId} not found`);
    }
    if (body['m.fully_read']) await services.users.accountData.put(session.userId, roomId, 'm.fully_read', { event_id: body['m.fully_read'] });
    if (body['m.read']) await services.sync.receipts.put(roomId, session.userId, 'm.read', body['m.read']);
    if (body['m.read.private']) await services.sync.receipts.put(roomId, session.userId, 'm.read.private', body['m.read.private']);
    return c.json({});
  });

  on(app, 'PUT', '/rooms/:roomId/typing/:userId', async (c) => {
    const session = await requireSession(c);
    const roomId = requireRoomId(c);
    if (c.req.param('userId') !== session.userId) throw forbidden('You may only set your own typing state');
    const body = await parseBody(c, z.object({ typing: z.boolean(), timeout: z.number().int().min(0).optional() }).loose());
    await requireJoined(c, roomId, session.userId);
    c.get('services').sync.typing.set(roomId, session.userId, body.typing, body.timeout);
    return c.json({});
  });
}

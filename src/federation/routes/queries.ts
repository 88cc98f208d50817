import type { Hono } from 'hono';
import { z } from 'zod';
import { invalidParam, missingParam, notFound } from '../../http/matrix-error.ts';
import { validate } from '../../http/validate.ts';
import { isValidRoomAlias, isValidUserId } from '../../events/identifiers.ts';
import { publicRoomsPage } from '../../rooms/directory.ts';
import type { FederationCtx, FederationEnv } from '../context.ts';

const publicRoomsSchema = z
  .object({
    limit: z.number().int().min(0).optional(),
    since: z.string().nullable().optional(),
    filter: z.object({ generic_search_term: z.string().nullable().optional() }).loose().nullable().optional(),
  })
  .loose();
const keysQuerySchema = z.object({ device_keys: z.record(z.string(), z.array(z.string())) }).loose();
const keysClaimSchema = z.object({ one_time_keys: z.record(z.string(), z.record(z.string(), z.string())) }).loose();

/** A user of this server, or 400: a server may only ask another about that server's own users. */
function localUser(c: FederationCtx, userId: string | undefined): string {
  if (!userId) throw missingParam('user_id is required');
  if (!isValidUserId(userId)) throw invalidParam(`invalid user ID ${userId}`);
  if (!c.get('services').users.isLocal(userId)) throw invalidParam(`${userId} is not a user of this server`);
  return userId;
}

/** Of a request naming users of several servers, the part about ours (the spec says only ours may be asked for). */
function ours<T>(c: FederationCtx, byUser: Record<string, T>): Record<string, T> {
  const { users } = c.get('services');
  return Object.fromEntries(Object.entries(byUser).filter(([userId]) => users.isLocal(userId)));
}

/** /query/profile, /query/directory, /user/devices, /user/keys/query and /user/keys/claim. */
export function queryRoutes(app: Hono<FederationEnv>): void {
  app.get('/_matrix/federation/v1/query/profile', async (c) => {
    const userId = localUser(c, c.req.query('user_id'));
    const field = c.req.query('field');
    const profile = await c.get('services').users.getProfile(userId);
    if (!profile) throw notFound(`no user ${userId} here`);
    if (field === undefined) return c.json(profile);
    const value = (profile as Record<string, string | undefined>)[field];
    if (value === undefined) throw notFound(`${userId} has no ${field}`);
    return c.json({ [field]: value });
  });

  // Our public room directory, as local clients see it (server-server §Public room directory).
  app.get('/_matrix/federation/v1/publicRooms', async (c) => {
    const rawLimit = c.req.query('limit');
    if (rawLimit !== undefined && !/^\d+$/.test(rawLimit)) throw invalidParam('limit must be a non-negative integer');
    return c.json(await publicRoomsPage(c.get('services').rooms, { limit: rawLimit === undefined ? undefined : Number(rawLimit), since: c.req.query('since') }));
  });
  app.post('/_matrix/federation/v1/publicRooms', async (c) => {
    const body = validate(publicRoomsSchema, c.get('body') ?? {});
    return c.json(await publicRoomsPage(c.get('services').rooms, { limit: body.limit, since: body.since, term: body.filter?.generic_search_term ?? undefined }));
  });

  app.get('/_matrix/federation/v1/query/directory', async (c) => {
    const alias = c.req.query('room_alias');
    if (!alias) throw missingParam('room_alias is required');
    if (!isValidRoomAlias(alias)) throw invalidParam(`invalid room alias ${alias}`);
    const resolved = await c.get('services').rooms.resolveAliasWithServers(alias);
    if (!resolved) throw notFound(`room alias ${alias} not found`);
    return c.json({ room_id: resolved.roomId, servers: resolved.servers });
  });

  app.get('/_matrix/federation/v1/user/devices/:userId', async (c) => {
    const userId = localUser(c, c.req.param('userId'));
    return c.json(await c.get('services').keys.userDevices(userId));
  });

  app.post('/_matrix/federation/v1/user/keys/query', async (c) => {
    const body = validate(keysQuerySchema, c.get('body'));
    const { device_keys, master_keys, self_signing_keys } = await c.get('services').keys.query(undefined, ours(c, body.device_keys));
    return c.json({ device_keys, master_keys, self_signing_keys });
  });

  app.post('/_matrix/federation/v1/user/keys/claim', async (c) => {
    const body = validate(keysClaimSchema, c.get('body'));
    const { one_time_keys } = await c.get('services').keys.claim(ours(c, body.one_time_keys));
    return c.json({ one_time_keys });
  });
}

import type { Hono } from 'hono';
import { z } from 'zod';
import { randomString } from '../../crypto/random.ts';
import { isValidUserId } from '../../events/identifiers.ts';
import { DEFAULT_ROOM_VERSION, ROOM_VERSIONS } from '../../events/room-versions.ts';
import { searchUserDirectory } from '../../rooms/user-directory.ts';
import { filterSchema } from '../../sync/filter.ts';
import { parsePushRuleKind } from '../../users/push-rule-edits.ts';
import { requireSession, type Ctx, type Env } from '../context.ts';
import { badJson, forbidden, invalidParam, MatrixError, notFound } from '../../http/matrix-error.ts';
import { parseBody, readJsonObject } from '../http.ts';
import { jsonObject } from '../../http/validate.ts';
import { operationDigest } from '../uia.ts';
import { on, V1 } from './route.ts';

const SPEC_VERSIONS = ['r0.6.1', 'v1.1', 'v1.2', 'v1.3', 'v1.4', 'v1.5', 'v1.6', 'v1.7', 'v1.8', 'v1.9', 'v1.10', 'v1.11', 'v1.12'];

const identifierSchema = z.object({ type: z.string(), user: z.string().optional() }).loose();

const loginSchema = z
  .object({
    type: z.string(),
    identifier: identifierSchema.optional(),
    user: z.string().optional(),
    password: z.string().optional(),
    device_id: z.string().min(1).max(255).optional(),
    initial_device_display_name: z.string().max(1000).optional(),
  })
  .loose();

const registerSchema = z
  .object({
    username: z.string().optional(),
    password: z.string().max(512).optional(),
    device_id: z.string().min(1).max(255).optional(),
    initial_device_display_name: z.string().max(1000).optional(),
    inhibit_login: z.boolean().optional(),
    auth: z.unknown().optional(),
    guest_access_token: z.string().optional(),
  })
  .loose();

export const passwordAuthFlows = [{ stages: ['m.login.password'] }];

/** Resolves a login identifier (m.id.user with a localpart or full ID) to a local user ID. */
function userIdFrom(c: Ctx, identifier: { type: string; user?: string } | undefined, legacyUser: string | undefined): string {
  const users = c.get('services').users;
  const user = identifier?.type === 'm.id.user' ? identifier.user : identifier ? undefined : legacyUser;
  if (identifier && identifier.type !== 'm.id.user') throw new MatrixError(400, 'M_UNKNOWN', `unsupported identifier type ${identifier.type}`);
  if (!user) throw badJson('identifier.user is required');
  return user.startsWith('@') ? user : users.userId(user.toLowerCase());
}

/**
 * A UIA stage check for m.login.password that must authenticate `userId` itself. Another user's
 * correct password authenticates, but as the wrong user: 403, as Synapse and Dendrite answer, not
 * the 401 of a failed stage (a wrong password, for anyone).
 */
export function passwordStage(c: Ctx, userId: string) {
  return async (stage: string, auth: Record<string, unknown>): Promise<boolean> => {
    if (stage !== 'm.login.password') return false;
    const parsed = z.object({ identifier: identifierSchema.optional(), user: z.string().optional(), password: z.string() }).safeParse(auth);
    if (!parsed.success) return false;
    const users = c.get('services').users;
    const claimed = parsed.data.identifier || parsed.data.user ? userIdFrom(c, parsed.data.identifier, parsed.data.user) : userId;
    if (!(await users.checkPassword(claimed, parsed.data.password))) return false;
    if (claimed !== userId) throw forbidden('Invalid auth: authenticated as another user');
    return true;
  };
}

function checkSelf(c: Ctx, userId: string, sessionUser: string): void {
  if (userId !== sessionUser) throw forbidden('You may only change your own data');
  void c;
}

function rateLimit(c: Ctx, key: string): void {
  c.get('services').rateLimiter?.take(key);
}

export function accountRoutes(app: Hono<Env>): void {
  on(app, 'GET', '/versions', (c) =>
    c.json({ versions: SPEC_VERSIONS, unstable_features: { 'org.matrix.msc2732': true, 'org.matrix.e2e_cross_signing': true, 'org.matrix.simplified_msc3575': true } }),
    ['/_matrix/client'],
  );
  app.get('/.well-known/matrix/client', (c) => c.json({ 'm.homeserver': { base_url: new URL(c.req.url).origin } }));

  on(app, 'GET', '/capabilities', async (c) => {
    await requireSession(c);
    const available: Record<string, string> = {};
    for (const id of ROOM_VERSIONS.keys()) available[id] = 'stable';
    return c.json({
      capabilities: {
        'm.change_password': { enabled: true },
        'm.room_versions': { default: DEFAULT_ROOM_VERSION, available },
        'm.set_displayname': { enabled: true },
        'm.set_avatar_url': { enabled: true },
        'm.3pid_changes': { enabled: false },
      },
    });
  });

  // ------------------------------------------------------------ login

  on(app, 'GET', '/login', (c) => c.json({ flows: [{ type: 'm.login.password' }] }));

  on(app, 'POST', '/login', async (c) => {
    const services = c.get('services');
    const body = await parseBody(c, loginSchema);
    rateLimit(c, 'login:' + (c.req.header('x-forwarded-for') ?? 'local'));
    if (body.type !== 'm.login.password') throw new MatrixError(400, 'M_UNKNOWN', `unsupported login type ${body.type}`);
    if (body.password === undefined) throw badJson('password is required');
    const userId = userIdFrom(c, body.identifier, body.user);
    if (!services.users.isLocal(userId) || !(await services.users.checkPassword(userId, body.password))) {
      throw forbidden('Invalid username or password');
    }
    const session = await services.users.createSession(userId, body.device_id, body.initial_device_display_name);
    return c.json({ user_id: userId, access_token: session.accessToken, device_id: session.deviceId, home_server: services.users.serverName });
  });

  on(app, 'POST', '/logout', async (c) => {
    const session = await requireSession(c);
    await c.get('services').users.deleteDevices(session.userId, [session.deviceId]);
    return c.json({});
  });

  on(app, 'POST', '/logout/all', async (c) => {
    const session = await requireSession(c);
    await c.get('services').users.logoutAll(session.userId);
    return c.json({});
  });

  // ------------------------------------------------------- registration

  on(app, 'GET', '/register/available', async (c) => {
    const username = c.req.query('username');
    if (!username) throw new MatrixError(400, 'M_MISSING_PARAM', 'username is required');
    if (!c.get('services').config.registrationEnabled) throw forbidden('Registration is disabled');
    await c.get('services').users.newAccountUserId(username);
    return c.json({ available: true });
  });

  on(app, 'POST', '/register', async (c) => {
    const services = c.get('services');
    const kind = c.req.query('kind') ?? 'user';
    if (kind === 'guest') {
      // Guests are their own switch, apart from registration (as in Synapse): off unless the host allows them.
      if (!services.config.guestsEnabled) throw new MatrixError(403, 'M_GUEST_ACCESS_FORBIDDEN', 'Guest access is not enabled');
      const body = await parseBody(c, registerSchema, { allowEmpty: true });
      rateLimit(c, 'register:' + (c.req.header('x-forwarded-for') ?? 'local'));
      const userId = await services.users.createGuestAccount();
      // No device ID of the guest's choosing, as in Synapse: a guest may not come back to a device.
      const session = await services.users.createSession(userId, undefined, body.initial_device_display_name);
      return c.json({ user_id: userId, access_token: session.accessToken, device_id: session.deviceId, home_server: services.users.serverName });
    }
    if (kind !== 'user') throw invalidParam(`unknown kind ${kind}`);
    if (!services.config.registrationEnabled) throw forbidden('Registration is disabled');
    const body = await parseBody(c, registerSchema);
    rateLimit(c, 'register:' + (c.req.header('x-forwarded-for') ?? 'local'));
    const username = body.username ?? randomString(services.random, 12, 'abcdefghijklmnopqrstuvwxyz0123456789');
    // A guest becoming a full account keeps its user ID: its own token names it (Synapse's guest_access_token).
    const guest = body.guest_access_token === undefined ? undefined : await services.users.authenticate(body.guest_access_token);
    const upgrading = guest?.isGuest === true && guest.userId === services.users.userId(username.toLowerCase());
    const userId = upgrading ? guest.userId : await services.users.newAccountUserId(username);
    await services.uia.authenticate('register', body.auth, [{ stages: ['m.login.dummy'] }], async (stage) => stage === 'm.login.dummy');
    const created = upgrading ? await services.users.upgradeGuest(userId, body.password) : await services.users.createAccount(userId, body.password);
    if (!created) throw new MatrixError(400, 'M_USER_IN_USE', 'User ID already taken');
    if (body.inhibit_login) return c.json({ user_id: userId, home_server: services.users.serverName });
    const session = await services.users.createSession(userId, body.device_id, body.initial_device_display_name);
    return c.json({ user_id: userId, access_token: session.accessToken, device_id: session.deviceId, home_server: services.users.serverName });
  });

  // ----------------------------------------------------------- account

  on(app, 'GET', '/account/whoami', async (c) => {
    const session = await requireSession(c);
    return c.json({ user_id: session.userId, device_id: session.deviceId, is_guest: session.isGuest === true });
  });

  on(app, 'POST', '/account/password', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const body = await parseBody(c, z.object({ new_password: z.string().min(1).max(512), logout_devices: z.boolean().optional(), auth: z.unknown().optional() }).loose());
    await services.uia.authenticate(`password:${session.userId}:${operationDigest({ new_password: body.new_password, logout_devices: body.logout_devices ?? true })}`, body.auth, passwordAuthFlows, passwordStage(c, session.userId));
    await services.users.setPassword(session.userId, body.new_password);
    if (body.logout_devices !== false) await services.users.revokeTokensExcept(session.userId, session);
    return c.json({});
  });

  on(app, 'POST', '/account/deactivate', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const body = await parseBody(c, z.object({ auth: z.unknown().optional(), erase: z.boolean().optional() }).loose(), { allowEmpty: true });
    await services.uia.authenticate(`deactivate:${session.userId}`, body.auth, passwordAuthFlows, passwordStage(c, session.userId));
    // The account leaves its rooms first (Users' deactivation listeners, wired in the composition root).
    await services.users.deactivate(session.userId, { erase: body.erase === true });
    return c.json({ id_server_unbind_result: 'no-support' });
  });

  on(app, 'GET', '/account/3pid', async (c) => {
    await requireSession(c);
    return c.json({ threepids: [] });
  });

  // ------------------------------------------------------------ devices

  on(app, 'GET', '/devices', async (c) => {
    const session = await requireSession(c);
    return c.json({ devices: (await c.get('services').users.listDevices(session.userId)).map(deviceJson) });
  });

  on(app, 'GET', '/devices/:deviceId', async (c) => {
    const session = await requireSession(c);
    const device = await c.get('services').users.getDevice(session.userId, c.req.param('deviceId')!);
    if (!device) throw notFound('Unknown device');
    return c.json(deviceJson(device));
  });

  on(app, 'PUT', '/devices/:deviceId', async (c) => {
    const session = await requireSession(c);
    const body = await parseBody(c, z.object({ display_name: z.string().max(1000).nullable().optional() }).loose(), { allowEmpty: true });
    const services = c.get('services');
    if (body.display_name !== undefined && !(await services.users.renameDevice(session.userId, c.req.param('deviceId')!, body.display_name))) {
      throw notFound('Unknown device');
    }
    if (body.display_name === undefined && !(await services.users.getDevice(session.userId, c.req.param('deviceId')!))) throw notFound('Unknown device');
    return c.json({});
  });

  const deleteDevices = async (c: Ctx, deviceIds: string[], auth: unknown) => {
    const session = await requireSession(c);
    const services = c.get('services');
    await services.uia.authenticate(`delete_devices:${session.userId}:${deviceIds.join(',')}`, auth, passwordAuthFlows, passwordStage(c, session.userId));
    await services.users.deleteDevices(session.userId, deviceIds);
    return c.json({});
  };

  on(app, 'DELETE', '/devices/:deviceId', async (c) => {
    const body = await readJsonObject(c, { allowEmpty: true });
    return deleteDevices(c, [c.req.param('deviceId')!], body['auth']);
  });

  on(app, 'POST', '/delete_devices', async (c) => {
    const body = await parseBody(c, z.object({ devices: z.array(z.string()), auth: z.unknown().optional() }).loose());
    return deleteDevices(c, body.devices, body.auth);
  });

  // Federation's userinfo at the client API's address too, as Synapse can serve it there: an integration manager
  // reaches a host without a DNS name (or a page's) only here, and the conformance suites ask here.
  on(app, 'GET', '/openid/userinfo', async (c) => c.json(await c.get('services').users.openIdUserinfo(c.req.query('access_token'))), ['/_matrix/federation/v1']);

  on(app, 'POST', '/user/:userId/openid/request_token', async (c) => {
    const session = await requireSession(c);
    if (c.req.param('userId') !== session.userId) throw forbidden('You may only request OpenID tokens for yourself');
    await parseBody(c, z.object({}).loose(), { allowEmpty: true });
    const { token, expiresInMs } = await c.get('services').users.createOpenIdToken(session.userId);
    return c.json({ access_token: token, token_type: 'Bearer', matrix_server_name: c.get('services').users.serverName, expires_in: Math.floor(expiresInMs / 1000) });
  });

  // ------------------------------------------------------------ profile

  on(app, 'POST', '/user_directory/search', async (c) => {
    const session = await requireSession(c);
    const body = await parseBody(c, z.object({ search_term: z.string(), limit: z.number().int().min(0).optional() }).loose());
    return c.json(await searchUserDirectory(c.get('services').rooms, session.userId, body.search_term, Math.min(body.limit ?? 10, 100)));
  });

  on(app, 'GET', '/profile/:userId', async (c) => {
    const { users, federation } = c.get('services');
    const profile = await users.lookupProfile(c.req.param('userId')!, federation.client);
    if (!profile) throw notFound('Profile not found');
    return c.json(profile);
  });

  for (const field of ['displayname', 'avatar_url'] as const) {
    on(app, 'GET', `/profile/:userId/${field}`, async (c) => {
      const { users, federation } = c.get('services');
      const profile = await users.lookupProfile(c.req.param('userId')!, federation.client, field);
      if (!profile) throw notFound('Profile not found');
      // A field not set is an empty object, as Synapse answers (the spec says 404): clients read it so.
      return c.json(profile[field] === undefined ? {} : { [field]: profile[field] });
    });
    on(app, 'PUT', `/profile/:userId/${field}`, async (c) => {
      const session = await requireSession(c);
      const userId = c.req.param('userId')!;
      checkSelf(c, userId, session.userId);
      const body = await parseBody(c, z.object({ [field]: z.string().max(1000).nullable().optional() }).loose());
      rateLimit(c, session.deviceId + session.userId);
      // Any string, as Synapse and Dendrite take (the spec asks an mxc: URI of clients, not of servers).
      const value = (body[field] as string | null | undefined) ?? null;
      // The users component carries the change into the user's rooms before answering.
      await c.get('services').users.setProfileField(userId, field, value);
      return c.json({});
    });
  }

  // ------------------------------------------------------- account data

  const accountDataUser = async (c: Ctx) => {
    const session = await requireSession(c);
    const userId = c.req.param('userId')!;
    checkSelf(c, userId, session.userId);
    return session;
  };
  on(app, 'GET', '/user/:userId/account_data/:type', async (c) => {
    const session = await accountDataUser(c);
    const content = await c.get('services').users.accountData.get(session.userId, '', c.req.param('type')!);
    if (!content) throw notFound('Account data not found');
    return c.json(content);
  });
  on(app, 'PUT', '/user/:userId/account_data/:type', async (c) => {
    const session = await accountDataUser(c);
    const body = await parseBody(c, jsonObject);
    await c.get('services').users.accountData.putFromClient(session.userId, '', c.req.param('type')!, body);
    return c.json({});
  });
  on(app, 'GET', '/user/:userId/rooms/:roomId/account_data/:type', async (c) => {
    const session = await accountDataUser(c);
    const content = await c.get('services').users.accountData.get(session.userId, c.req.param('roomId')!, c.req.param('type')!);
    if (!content) throw notFound('Account data not found');
    return c.json(content);
  });
  on(app, 'PUT', '/user/:userId/rooms/:roomId/account_data/:type', async (c) => {
    const session = await accountDataUser(c);
    const body = await parseBody(c, jsonObject);
    await c.get('services').users.accountData.putFromClient(session.userId, c.req.param('roomId')!, c.req.param('type')!, body);
    return c.json({});
  });

  // Tags are the m.tag room account data (client-server modules/tags).
  type Tags = { tags: Record<string, Record<string, unknown>> };
  on(app, 'GET', '/user/:userId/rooms/:roomId/tags', async (c) => {
    const session = await accountDataUser(c);
    const content = (await c.get('services').users.accountData.get(session.userId, c.req.param('roomId')!, 'm.tag')) as Tags | undefined;
    return c.json({ tags: content?.tags ?? {} });
  });
  on(app, 'PUT', '/user/:userId/rooms/:roomId/tags/:tag', async (c) => {
    const session = await accountDataUser(c);
    const body = await parseBody(c, z.object({ order: z.number().min(0).max(1).optional() }).loose(), { allowEmpty: true });
    await c.get('services').users.accountData.update<Tags>(session.userId, c.req.param('roomId')!, 'm.tag', (current) => ({
      tags: { ...(current?.tags ?? {}), [c.req.param('tag')!]: body },
    }));
    return c.json({});
  });
  on(app, 'DELETE', '/user/:userId/rooms/:roomId/tags/:tag', async (c) => {
    const session = await accountDataUser(c);
    await c.get('services').users.accountData.update<Tags>(session.userId, c.req.param('roomId')!, 'm.tag', (current) => {
      const tags = { ...(current?.tags ?? {}) };
      delete tags[c.req.param('tag')!];
      return { tags };
    });
    return c.json({});
  });

  // ------------------------------------------------------------ filters

  on(app, 'POST', '/user/:userId/filter', async (c) => {
    const session = await accountDataUser(c);
    const body = await parseBody(c, filterSchema);
    return c.json({ filter_id: await c.get('services').users.createFilter(session.userId, body) });
  });
  on(app, 'GET', '/user/:userId/filter/:filterId', async (c) => {
    const session = await accountDataUser(c);
    const filter = await c.get('services').users.getFilter(session.userId, c.req.param('filterId')!);
    if (!filter) throw notFound('Filter not found');
    return c.json(filter);
  });

  // --------------------------------------------------------- push rules

  const pushRules = (c: Ctx) => c.get('services').users.pushRules;
  const kindParam = (c: Ctx) => parsePushRuleKind(c.req.param('kind')!);

  on(app, 'GET', '/pushrules/', async (c) => c.json({ global: await pushRules(c).ruleset((await requireSession(c)).userId) }));
  on(app, 'GET', '/pushrules/global/', async (c) => c.json(await pushRules(c).ruleset((await requireSession(c)).userId)));
  // One kind's rules, in order (as Synapse answers `/pushrules/global/room/`).
  on(app, 'GET', '/pushrules/global/:kind/', async (c) => {
    const session = await requireSession(c);
    return c.json((await pushRules(c).ruleset(session.userId))[kindParam(c)]);
  });
  on(app, 'GET', '/pushrules/global/:kind/:ruleId', async (c) => {
    const session = await requireSession(c);
    return c.json(await pushRules(c).rule(session.userId, kindParam(c), c.req.param('ruleId')!));
  });
  on(app, 'PUT', '/pushrules/global/:kind/:ruleId', async (c) => {
    const session = await requireSession(c);
    const kind = kindParam(c);
    const body = await parseBody(c, z.object({ actions: z.array(z.unknown()), conditions: z.array(jsonObject).optional(), pattern: z.string().optional() }).loose());
    await pushRules(c).put(session.userId, kind, c.req.param('ruleId')!, body, { before: c.req.query('before'), after: c.req.query('after') });
    return c.json({});
  });
  on(app, 'DELETE', '/pushrules/global/:kind/:ruleId', async (c) => {
    const session = await requireSession(c);
    await pushRules(c).delete(session.userId, kindParam(c), c.req.param('ruleId')!);
    return c.json({});
  });
  for (const attribute of ['enabled', 'actions'] as const) {
    on(app, 'GET', `/pushrules/global/:kind/:ruleId/${attribute}`, async (c) => {
      const session = await requireSession(c);
      const rule = await pushRules(c).rule(session.userId, kindParam(c), c.req.param('ruleId')!);
      return c.json({ [attribute]: rule[attribute] });
    });
    on(app, 'PUT', `/pushrules/global/:kind/:ruleId/${attribute}`, async (c) => {
      const session = await requireSession(c);
      const schema = attribute === 'enabled' ? z.object({ enabled: z.boolean() }) : z.object({ actions: z.array(z.unknown()) });
      const kind = kindParam(c);
      await pushRules(c).set(session.userId, kind, c.req.param('ruleId')!, await parseBody(c, schema));
      return c.json({});
    });
  }

  on(app, 'GET', '/pushers', async (c) => {
    const session = await requireSession(c);
    return c.json({ pushers: await c.get('services').users.pushers.list(session.userId) });
  });
  on(app, 'POST', '/pushers/set', async (c) => {
    const session = await requireSession(c);
    const body = await readJsonObject(c);
    await c.get('services').users.pushers.set(session.userId, session.tokenId, body);
    return c.json({});
  });

  // ----------------------------------------------------------- presence

  on(app, 'GET', '/presence/:userId/status', async (c) => {
    await requireSession(c);
    const userId = c.req.param('userId')!;
    if (!isValidUserId(userId)) throw invalidParam('invalid user ID');
    const status = c.get('services').sync.presence.get(userId);
    const now = c.get('services').now();
    return c.json({
      presence: status.presence,
      last_active_ago: status.last_active_ts ? now - status.last_active_ts : undefined,
      currently_active: status.presence === 'online',
      ...(status.status_msg !== undefined ? { status_msg: status.status_msg } : {}),
    });
  });
  on(app, 'PUT', '/presence/:userId/status', async (c) => {
    const session = await requireSession(c);
    checkSelf(c, c.req.param('userId')!, session.userId);
    const body = await parseBody(c, z.object({ presence: z.enum(['online', 'offline', 'unavailable']), status_msg: z.string().max(1000).nullable().optional() }).loose());
    c.get('services').sync.presence.set(session.userId, body.presence, body.status_msg);
    return c.json({});
  });

  // Endpoints Element calls at start-up; Hearth has no TURN, third-party networks or media config yet.
  on(app, 'GET', '/voip/turnServer', async (c) => {
    await requireSession(c);
    return c.json({});
  });
  on(app, 'GET', '/thirdparty/protocols', async (c) => {
    await requireSession(c);
    return c.json({});
  });
  on(app, 'GET', '/media/config', async (c) => {
    await requireSession(c);
    return c.json({ 'm.upload.size': 0 });
  }, V1);
}

function deviceJson(device: { device_id: string; display_name: string | null; last_seen_ts: number | null; last_seen_ip: string | null }) {
  const out: Record<string, unknown> = { device_id: device.device_id };
  if (device.display_name !== null) out['display_name'] = device.display_name;
  if (device.last_seen_ts !== null) out['last_seen_ts'] = device.last_seen_ts;
  if (device.last_seen_ip !== null) out['last_seen_ip'] = device.last_seen_ip;
  return out;
}

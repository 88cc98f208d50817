import type { Hono } from 'hono';
import { z } from 'zod';
import { isValidUserId } from '../../events/identifiers.ts';
import type { CrossSigningKey, DeviceKeys } from '../../keys/types.ts';
import { parseToken } from '../../sync/token.ts';
import { requireSession, type Ctx, type Env } from '../context.ts';
import { invalidParam, missingParam, notFound } from '../../http/matrix-error.ts';
import { parseBody } from '../http.ts';
import { jsonObject } from '../../http/validate.ts';
import { operationDigest } from '../uia.ts';
import { passwordAuthFlows, passwordStage } from './account.ts';
import { on, V3_AND_UNSTABLE } from './route.ts';

// End-to-end encryption (client-server §End-to-End Encryption), send-to-device
// messaging and key backup. Bodies are checked for shape here; the keys component
// checks what needs stored state or signatures.

const signaturesSchema = z.record(z.string(), z.record(z.string(), z.string()));

const deviceKeysSchema = z
  .object({
    user_id: z.string(),
    device_id: z.string(),
    algorithms: z.array(z.string()),
    keys: z.record(z.string(), z.string()),
    signatures: signaturesSchema,
  })
  .loose();

const oneTimeKeysSchema = z.record(z.string(), z.union([z.string(), jsonObject]));

const uploadSchema = z
  .object({
    device_keys: deviceKeysSchema.optional(),
    one_time_keys: oneTimeKeysSchema.optional(),
    fallback_keys: oneTimeKeysSchema.optional(),
  })
  .loose();

const querySchema = z
  .object({
    device_keys: z.record(z.string(), z.array(z.string())),
    timeout: z.number().int().optional(),
  })
  .loose();

const claimSchema = z
  .object({
    one_time_keys: z.record(z.string(), z.record(z.string(), z.string())),
    timeout: z.number().int().optional(),
  })
  .loose();

const crossSigningKeySchema = z
  .object({
    user_id: z.string(),
    usage: z.array(z.string()).min(1),
    keys: z.record(z.string(), z.string()),
    signatures: signaturesSchema.optional(),
  })
  .loose();

const deviceSigningSchema = z
  .object({
    master_key: crossSigningKeySchema.optional(),
    self_signing_key: crossSigningKeySchema.optional(),
    user_signing_key: crossSigningKeySchema.optional(),
    auth: z.unknown().optional(),
  })
  .loose();

const signaturesUploadSchema = z.record(z.string(), z.record(z.string(), jsonObject));

const sendToDeviceSchema = z.object({ messages: z.record(z.string(), z.record(z.string(), jsonObject)) }).loose();

// auth_data is any JSON, stored as given: the spec says an object, but Synapse takes a string too (the suites send one).
const backupVersionSchema = z
  .object({ algorithm: z.string().min(1), auth_data: z.unknown().refine((value) => value !== undefined, 'auth_data is required'), version: z.string().optional() })
  .loose();

const keyBackupDataSchema = z
  .object({
    first_message_index: z.number().int().min(0),
    forwarded_count: z.number().int().min(0),
    is_verified: z.boolean(),
    session_data: jsonObject,
  })
  .loose();
const roomKeyBackupSchema = z.object({ sessions: z.record(z.string(), keyBackupDataSchema) }).loose();
const roomsKeyBackupSchema = z.object({ rooms: z.record(z.string(), roomKeyBackupSchema) }).loose();

function checkUserIds(userIds: Iterable<string>): void {
  for (const userId of userIds) if (!isValidUserId(userId)) throw invalidParam(`invalid user ID ${JSON.stringify(userId)}`);
}

function backupVersionParam(c: Ctx): string {
  const version = c.req.query('version');
  if (!version) throw missingParam('the version query parameter is required');
  return version;
}

export function keysRoutes(app: Hono<Env>): void {
  // --------------------------------------------------------------- keys

  on(app, 'POST', '/keys/upload', async (c) => {
    const session = await requireSession(c);
    const body = await parseBody(c, uploadSchema);
    const counts = await c.get('services').keys.upload(session.userId, session.deviceId, {
      ...(body.device_keys ? { device_keys: body.device_keys as DeviceKeys } : {}),
      ...(body.one_time_keys ? { one_time_keys: body.one_time_keys } : {}),
      ...(body.fallback_keys ? { fallback_keys: body.fallback_keys } : {}),
    });
    return c.json({ one_time_key_counts: counts });
  });

  on(app, 'POST', '/keys/query', async (c) => {
    const session = await requireSession(c);
    const body = await parseBody(c, querySchema);
    checkUserIds(Object.keys(body.device_keys));
    const { keys, federation } = c.get('services');
    return c.json(await keys.query(session.userId, body.device_keys, { remote: federation.client, timeoutMs: body.timeout }));
  });

  on(app, 'POST', '/keys/claim', async (c) => {
    await requireSession(c);
    const body = await parseBody(c, claimSchema);
    checkUserIds(Object.keys(body.one_time_keys));
    const { keys, federation } = c.get('services');
    return c.json(await keys.claim(body.one_time_keys, { remote: federation.client, timeoutMs: body.timeout }));
  });

  on(app, 'GET', '/keys/changes', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const from = c.req.query('from');
    if (!from) throw missingParam('the from query parameter is required');
    const to = c.req.query('to');
    const current = (await services.sync.currentToken()).stream;
    const upTo = to ? Math.min(parseToken(to).stream, current) : current;
    return c.json(await services.keys.deviceListChanges(session.userId, parseToken(from).stream, upTo));
  });

  on(app, 'POST', '/keys/device_signing/upload', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const { auth, master_key, self_signing_key, user_signing_key } = await parseBody(c, deviceSigningSchema);
    const upload = {
      ...(master_key ? { master_key: master_key as CrossSigningKey } : {}),
      ...(self_signing_key ? { self_signing_key: self_signing_key as CrossSigningKey } : {}),
      ...(user_signing_key ? { user_signing_key: user_signing_key as CrossSigningKey } : {}),
    };
    // As the spec allows since v1.11: the first keys, or the same keys again, need no auth; replacing keys does.
    if (await services.keys.crossSigningUploadNeedsAuth(session.userId, upload)) {
      await services.uia.authenticate(`device_signing:${session.userId}:${operationDigest(upload)}`, auth, passwordAuthFlows, passwordStage(c, session.userId));
    }
    await services.keys.uploadCrossSigningKeys(session.userId, upload);
    return c.json({});
  }, V3_AND_UNSTABLE);

  on(app, 'POST', '/keys/signatures/upload', async (c) => {
    const session = await requireSession(c);
    const body = await parseBody(c, signaturesUploadSchema);
    checkUserIds(Object.keys(body));
    return c.json(await c.get('services').keys.uploadSignatures(session.userId, body));
  }, V3_AND_UNSTABLE);

  // ----------------------------------------------------- send-to-device

  on(app, 'PUT', '/sendToDevice/:eventType/:txnId', async (c) => {
    const session = await requireSession(c);
    const services = c.get('services');
    const body = await parseBody(c, sendToDeviceSchema);
    checkUserIds(Object.keys(body.messages));
    // Not rate-limited: a client sharing a room key sends bursts of these, and failing one breaks decryption.
    // A transaction ID is scoped to the endpoint, event type included: the same ID for another type is another request.
    const eventType = c.req.param('eventType')!;
    await services.keys.toDevice.send(session, JSON.stringify([eventType, c.req.param('txnId')!]), eventType, body.messages);
    return c.json({});
  });

  // --------------------------------------------------------- key backup

  on(app, 'POST', '/room_keys/version', async (c) => {
    const session = await requireSession(c);
    const body = await parseBody(c, backupVersionSchema);
    return c.json({ version: await c.get('services').keys.backup.createVersion(session.userId, body.algorithm, body.auth_data) });
  });

  const getVersion = async (c: Ctx, version: string | undefined) => {
    const session = await requireSession(c);
    const info = await c.get('services').keys.backup.getVersion(session.userId, version);
    if (!info) throw notFound(version === undefined ? 'No current backup version' : 'Unknown backup version');
    return c.json(info);
  };
  on(app, 'GET', '/room_keys/version', (c) => getVersion(c, undefined));
  on(app, 'GET', '/room_keys/version/:version', (c) => getVersion(c, c.req.param('version')!));

  on(app, 'PUT', '/room_keys/version/:version', async (c) => {
    const session = await requireSession(c);
    const version = c.req.param('version')!;
    const body = await parseBody(c, backupVersionSchema);
    if (body.version !== undefined && body.version !== version) throw invalidParam('the version in the body does not match the path');
    await c.get('services').keys.backup.updateVersion(session.userId, version, body.algorithm, body.auth_data);
    return c.json({});
  });

  on(app, 'DELETE', '/room_keys/version/:version', async (c) => {
    const session = await requireSession(c);
    await c.get('services').keys.backup.deleteVersion(session.userId, c.req.param('version')!);
    return c.json({});
  });

  on(app, 'PUT', '/room_keys/keys', async (c) => {
    const session = await requireSession(c);
    const version = backupVersionParam(c);
    const body = await parseBody(c, roomsKeyBackupSchema);
    return c.json(await c.get('services').keys.backup.putKeys(session.userId, version, body.rooms));
  });
  on(app, 'PUT', '/room_keys/keys/:roomId', async (c) => {
    const session = await requireSession(c);
    const version = backupVersionParam(c);
    const body = await parseBody(c, roomKeyBackupSchema);
    return c.json(await c.get('services').keys.backup.putKeys(session.userId, version, { [c.req.param('roomId')!]: body }));
  });
  on(app, 'PUT', '/room_keys/keys/:roomId/:sessionId', async (c) => {
    const session = await requireSession(c);
    const version = backupVersionParam(c);
    const body = await parseBody(c, keyBackupDataSchema);
    const rooms = { [c.req.param('roomId')!]: { sessions: { [c.req.param('sessionId')!]: body } } };
    return c.json(await c.get('services').keys.backup.putKeys(session.userId, version, rooms));
  });

  on(app, 'GET', '/room_keys/keys', async (c) => {
    const session = await requireSession(c);
    const rooms = await c.get('services').keys.backup.getKeys(session.userId, backupVersionParam(c));
    return c.json({ rooms: rooms ?? {} });
  });
  on(app, 'GET', '/room_keys/keys/:roomId', async (c) => {
    const session = await requireSession(c);
    const roomId = c.req.param('roomId')!;
    const rooms = await c.get('services').keys.backup.getKeys(session.userId, backupVersionParam(c), roomId);
    return c.json(rooms?.[roomId] ?? { sessions: {} });
  });
  on(app, 'GET', '/room_keys/keys/:roomId/:sessionId', async (c) => {
    const session = await requireSession(c);
    const roomId = c.req.param('roomId')!;
    const sessionId = c.req.param('sessionId')!;
    const rooms = await c.get('services').keys.backup.getKeys(session.userId, backupVersionParam(c), roomId, sessionId);
    const key = rooms?.[roomId]?.sessions[sessionId];
    if (!key) throw notFound('Key not found');
    return c.json(key);
  });

  on(app, 'DELETE', '/room_keys/keys', async (c) => {
    const session = await requireSession(c);
    return c.json(await c.get('services').keys.backup.deleteKeys(session.userId, backupVersionParam(c)));
  });
  on(app, 'DELETE', '/room_keys/keys/:roomId', async (c) => {
    const session = await requireSession(c);
    return c.json(await c.get('services').keys.backup.deleteKeys(session.userId, backupVersionParam(c), c.req.param('roomId')!));
  });
  on(app, 'DELETE', '/room_keys/keys/:roomId/:sessionId', async (c) => {
    const session = await requireSession(c);
    return c.json(await c.get('services').keys.backup.deleteKeys(session.userId, backupVersionParam(c), c.req.param('roomId')!, c.req.param('sessionId')!));
  });
}

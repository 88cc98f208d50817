import { Hono, type MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { CanonicalJsonError } from '../crypto/canonical-json.ts';
import { UnsupportedRoomVersionError } from '../events/room-versions.ts';
import { FederationRequestError } from '../federation/client.ts';
import { FederationJoinError } from '../federation/federation.ts';
import { FederationUnreachable } from '../federation/transport.ts';
import { KeysError } from '../keys/errors.ts';
import { MediaError } from '../media/media.ts';
import { RoomError } from '../rooms/errors.ts';
import { HierarchyError } from '../spaces/hierarchy.ts';
import { StorageError } from '../storage/errors.ts';
import { TokenError } from '../sync/token.ts';
import { UsersError } from '../users/errors.ts';
import type { Env } from './context.ts';
import { MatrixError, unrecognized } from './errors.ts';
import { readBody } from './http.ts';
import { accountRoutes } from './routes/account.ts';
import { hearthRoutes } from './routes/hearth.ts';
import { keysRoutes } from './routes/keys.ts';
import { mediaRoutes } from './routes/media.ts';
import { knownPathOtherMethod } from './routes/route.ts';
import { roomRoutes } from './routes/rooms.ts';
import { searchRoutes } from './routes/search.ts';
import { spacesRoutes } from './routes/spaces.ts';
import { syncRoutes } from './routes/sync.ts';
import { relationsRoutes } from './routes/relations.ts';
import type { ClientServices } from './services.ts';
import { CodedError } from '../util/coded-error.ts';

/** Maps errors from the components to the spec's error codes and statuses. */
export function toMatrixError(error: unknown): MatrixError {
  if (error instanceof MatrixError) return error;
  if (error instanceof RoomError) {
    switch (error.code) {
      case 'not_found':
        return new MatrixError(404, 'M_NOT_FOUND', error.message);
      case 'forbidden':
        return new MatrixError(403, 'M_FORBIDDEN', error.message);
      case 'too_large':
        return new MatrixError(413, 'M_TOO_LARGE', error.message);
      case 'unsupported_version':
        return new MatrixError(400, 'M_UNSUPPORTED_ROOM_VERSION', error.message);
      case 'duplicate_annotation':
        return new MatrixError(400, 'M_DUPLICATE_ANNOTATION', error.message);
      default:
        return new MatrixError(400, 'M_BAD_JSON', error.message);
    }
  }
  if (error instanceof FederationJoinError) return new MatrixError(error.status, error.errcode, error.message);
  // Another server asked on the client's behalf: its "not found" and "forbidden" are the answer; anything else is a bad gateway.
  if (error instanceof FederationRequestError) {
    return error.status === 403 || error.status === 404 ? new MatrixError(error.status, error.errcode, error.message) : new MatrixError(502, 'M_UNKNOWN', error.message);
  }
  if (error instanceof FederationUnreachable) return new MatrixError(502, 'M_UNKNOWN', error.message);
  if (error instanceof UsersError) return new MatrixError(error.status, error.errcode, error.message);
  if (error instanceof KeysError) return new MatrixError(error.status, error.errcode, error.message, error.extra);
  if (error instanceof MediaError) return new MatrixError(error.status, error.errcode, error.message, error.extra);
  if (error instanceof HierarchyError) return new MatrixError(error.status, error.errcode, error.message);
  if (error instanceof UnsupportedRoomVersionError) return new MatrixError(400, 'M_UNSUPPORTED_ROOM_VERSION', error.message);
  if (error instanceof CanonicalJsonError) return new MatrixError(400, 'M_BAD_JSON', error.message);
  if (error instanceof TokenError) return new MatrixError(400, 'M_INVALID_PARAM', error.message);
  // A component's refusal that knows its status and errcode (src/util/coded-error.ts).
  if (error instanceof CodedError) return new MatrixError(error.status, error.errcode, error.message, error.extra);
  if (error instanceof StorageError) {
    // Nothing of the request was kept (the write rolled back); 507 says why.
    return error.code === 'quota_exceeded'
      ? new MatrixError(507, 'M_RESOURCE_LIMIT_EXCEEDED', error.message)
      : new MatrixError(500, 'M_UNKNOWN', error.message);
  }
  return new MatrixError(500, 'M_UNKNOWN', error instanceof Error ? error.message : String(error));
}

export function errorResponse(error: unknown): Response {
  const matrix = toMatrixError(error);
  return new Response(JSON.stringify(matrix.toJSON()), {
    status: matrix.status,
    headers: { 'content-type': 'application/json' },
  });
}

/** The client-server API as one Request → Response function (Hono routes it). */
export function createClientApp(services: ClientServices, log: (message: string, error: unknown) => void = () => {}): Hono<Env> {
  const app = new Hono<Env>();
  // CORS as the spec asks (client-server §Web Browser Clients).
  app.use(
    '*',
    cors({
      origin: '*',
      allowMethods: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS'],
      allowHeaders: ['X-Requested-With', 'Content-Type', 'Authorization'],
    }),
  );
  const inject: MiddlewareHandler<Env> = async (c, next) => {
    c.set('services', services);
    await next();
  };
  app.use('*', inject);
  // Before the body middleware: uploads are bytes, read with the media limit (routes/media.ts).
  mediaRoutes(app);
  // A body is read, and refused if too large or not UTF-8, before any route looks at the request.
  const body: MiddlewareHandler<Env> = async (c, next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD' && c.req.method !== 'OPTIONS') await readBody(c);
    await next();
  };
  app.use('*', body);
  accountRoutes(app);
  roomRoutes(app);
  syncRoutes(app);
  relationsRoutes(app);
  searchRoutes(app);
  spacesRoutes(app);
  keysRoutes(app);
  hearthRoutes(app);
  app.notFound((c) =>
    errorResponse(
      knownPathOtherMethod(app, c.req.method, new URL(c.req.url).pathname)
        ? new MatrixError(405, 'M_UNRECOGNIZED', `${c.req.method} is not allowed on this endpoint`)
        : unrecognized(),
    ),
  );
  app.onError((error, c) => {
    const matrix = toMatrixError(error);
    if (matrix.status >= 500) log(`${c.req.method} ${new URL(c.req.url).pathname} failed`, error);
    return c.json(matrix.toJSON(), matrix.status as ContentfulStatusCode);
  });
  return app;
}

import { Hono, type MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { apiMatrixError } from '../federation/api-error.ts';
import { MatrixError, matrixErrorResponse, unrecognized } from '../http/matrix-error.ts';
import type { Env } from './context.ts';
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
import { slidingSyncRoutes } from './routes/sliding-sync.ts';
import { relationsRoutes } from './routes/relations.ts';
import type { ClientServices } from './services.ts';

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
  slidingSyncRoutes(app);
  relationsRoutes(app);
  searchRoutes(app);
  spacesRoutes(app);
  keysRoutes(app);
  hearthRoutes(app);
  app.notFound((c) =>
    matrixErrorResponse(
      knownPathOtherMethod(app, c.req.method, new URL(c.req.url).pathname)
        ? new MatrixError(405, 'M_UNRECOGNIZED', `${c.req.method} is not allowed on this endpoint`)
        : unrecognized(),
    ),
  );
  app.onError((error, c) => {
    const matrix = apiMatrixError(error);
    if (matrix.status >= 500) log(`${c.req.method} ${new URL(c.req.url).pathname} failed`, error);
    return c.json(matrix.toJSON(), matrix.status as ContentfulStatusCode);
  });
  return app;
}

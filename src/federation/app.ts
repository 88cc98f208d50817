import { Hono, type Context, type MiddlewareHandler } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { MatrixError, matrixErrorResponse, unrecognized } from '../http/matrix-error.ts';
import { readRequestBody } from '../http/request-body.ts';
import { isValidServerName } from '../events/identifiers.ts';
import type { FederationEnv, FederationServices } from './context.ts';
import { eventRoutes } from './routes/events.ts';
import { mediaRoutes } from './routes/media.ts';
import { membershipRoutes } from './routes/membership.ts';
import { apiMatrixError } from './api-error.ts';
import { queryRoutes } from './routes/queries.ts';
import { transactionRoutes } from './routes/transactions.ts';
import { GapNotFilled } from './transaction-gaps.ts';
import { MALFORMED, parseAuthorization, verifyRequest } from './x-matrix.ts';
import { IMPLEMENTATION } from '../util/version.ts';

/** Bodies above this are refused before they are parsed (a transaction of 50 PDUs of 64 KiB fits). */
export const MAX_FEDERATION_BODY_BYTES = 4 * 1024 * 1024;

const unauthorized = (message: string) => new MatrixError(401, 'M_UNAUTHORIZED', message);
const malformed = (message: string) => new MatrixError(400, 'M_UNAUTHORIZED', message);

/**
 * Paths served without X-Matrix: the key server and the notary's key queries, the version, and OpenID's userinfo (asked by
 * widgets and integration managers, which are not servers; the token is the credential).
 */
const UNAUTHENTICATED = /^\/_matrix\/(key\/v2\/server(\/[^/]*)?|key\/v2\/query(\/[^/]*){0,2}|federation\/v1\/version|federation\/v1\/openid\/userinfo)\/?$/;

/**
 * The server-server API as one Request → Response function. Every request but the
 * key server and the version must carry a valid X-Matrix signature from the origin
 * it names, for this server when it names a `destination`, and when the transport
 * names the peer that sent it (`remoteServerName`), that origin must be that peer: a
 * request that fails a check gets 401 and nothing of it is processed.
 */
export function createFederationApp(services: FederationServices, extraRoutes?: (app: Hono<FederationEnv>) => void): Hono<FederationEnv> {
  const app = new Hono<FederationEnv>();

  const authenticate: MiddlewareHandler<FederationEnv> = async (c, next) => {
    c.set('services', services);
    const url = new URL(c.req.url);
    const bytes = await readRequestBody(c.req.raw, MAX_FEDERATION_BODY_BYTES);
    let body: unknown;
    if (bytes.length > 0) {
      let text: string;
      try {
        text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
        body = JSON.parse(text);
      } catch {
        throw new MatrixError(400, 'M_NOT_JSON', 'request body is not valid UTF-8 JSON');
      }
    }
    c.set('body', body);
    if (UNAUTHENTICATED.test(url.pathname)) return next();

    const credentials = parseAuthorization(c.req.header('authorization'));
    if (!credentials) throw unauthorized('missing X-Matrix Authorization header');
    // A header that is X-Matrix but no valid one is a bad request (400, still M_UNAUTHORIZED, as Synapse answers it).
    if (credentials === MALFORMED) throw malformed('malformed X-Matrix Authorization header: it needs an origin, a key and a sig');
    // Before any key is fetched for it: a name that is none (`localhost:http`, whose port is no number) would be put into a key server's URL.
    if (!isValidServerName(credentials.origin)) throw malformed('the X-Matrix origin is not a server name');
    // A transport that authenticated the peer (libp2p) names it, and the origin must be that peer;
    // one that did not (HTTPS) names none, and the signature below is all the authentication.
    const remote = c.env.remoteServerName;
    if (remote !== undefined && credentials.origin !== remote) {
      throw unauthorized(`the request claims origin ${credentials.origin}, but the connection is from ${remote}`);
    }
    if (credentials.origin === services.serverName) throw unauthorized('a request may not claim to come from this server');
    if (credentials.destination !== undefined && credentials.destination !== services.serverName) {
      throw unauthorized(`the request is for ${credentials.destination}, not this server`);
    }
    const key = await services.keyRing.verifyKey(credentials.origin, credentials.key);
    if (!key) throw unauthorized(`no verify key ${credentials.key} for ${credentials.origin}`);
    const uri = url.pathname + url.search;
    if (!(await verifyRequest(credentials, c.req.method, uri, services.serverName, body, key, services.ed25519))) {
      throw unauthorized('the X-Matrix signature does not verify');
    }
    // Only once authenticated: a forger cannot spend another server's allowance.
    services.rateLimiter?.take(credentials.origin);
    c.set('origin', credentials.origin);
    return next();
  };
  app.use('*', authenticate);

  app.get('/_matrix/key/v2/server', async (c) => c.json(await services.keyRing.serverKeys()));
  app.get('/_matrix/key/v2/server/:keyId', async (c) => c.json(await services.keyRing.serverKeys()));
  // The notary (server-server §Querying keys through another server): a key ring that is one (ServerKeys) answers.
  // The key ID after the server name is the form before Matrix 1.6 (which servers still ask, as Synapse still serves it).
  const notaryGet = async (c: Context<FederationEnv>) => {
    if (!services.keyRing.notaryQuery) throw unrecognized();
    const minimum = c.req.query('minimum_valid_until_ts');
    const keyId = c.req.param('keyId');
    return c.json(await services.keyRing.notaryQuery(c.req.param('serverName')!, minimum && /^\d+$/.test(minimum) ? Number(minimum) : undefined, keyId ? [keyId] : undefined));
  };
  app.get('/_matrix/key/v2/query/:serverName', notaryGet);
  app.get('/_matrix/key/v2/query/:serverName/:keyId', notaryGet);
  app.post('/_matrix/key/v2/query', async (c) => {
    if (!services.keyRing.notaryBatch) throw unrecognized();
    return c.json(await services.keyRing.notaryBatch(c.get('body')));
  });
  app.get('/_matrix/federation/v1/version', (c) => c.json({ server: { ...IMPLEMENTATION } }));
  app.get('/_matrix/federation/v1/openid/userinfo', async (c) => c.json(await services.users.openIdUserinfo(c.req.query('access_token'))));

  transactionRoutes(app);
  membershipRoutes(app);
  eventRoutes(app);
  queryRoutes(app);
  // Other components' server-server routes (the mailbox), behind the same authentication.
  extraRoutes?.(app);
  mediaRoutes(app);

  app.notFound(() => matrixErrorResponse(unrecognized()));
  app.onError((error, c) => {
    const matrix = apiMatrixError(error);
    // A transaction left undone (GapNotFilled) is expected under load, and its PDU's failure was logged already.
    if (matrix.status >= 500 && !(error instanceof GapNotFilled)) services.log(`federation ${c.req.method} ${new URL(c.req.url).pathname} failed`, error);
    return c.json(matrix.toJSON(), matrix.status as ContentfulStatusCode);
  });
  return app;
}

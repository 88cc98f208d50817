import type { Hono } from 'hono';
import type { FederationEnv } from '../context.ts';

/** /query/profile, /query/directory, /user/devices, /user/keys/query and /user/keys/claim. */
export function queryRoutes(app: Hono<FederationEnv>): void {
  void app;
}

import type { Hono } from 'hono';
import { invalidParam, notFound } from '../../http/matrix-error.ts';
import { isValidRoomId } from '../../events/identifiers.ts';
import type { SpaceHierarchy } from '../../spaces/hierarchy.ts';
import type { FederationEnv } from '../context.ts';

/**
 * GET /_matrix/federation/v1/hierarchy/{roomId} (server-server §Spaces): a room this server holds
 * and its direct children, as the asking server may see them; 404 when it may not see the room.
 */
export function hierarchyRoutes(app: Hono<FederationEnv>, hierarchy: SpaceHierarchy): void {
  app.get('/_matrix/federation/v1/hierarchy/:roomId', async (c) => {
    const roomId = c.req.param('roomId');
    if (!isValidRoomId(roomId)) throw invalidParam(`invalid room ID ${roomId}`);
    const suggested = c.req.query('suggested_only');
    if (suggested !== undefined && suggested !== 'true' && suggested !== 'false') throw invalidParam('suggested_only must be true or false');
    const answer = await hierarchy.forServer(roomId, c.get('origin'), suggested === 'true');
    if (!answer) throw notFound('Unknown room');
    return c.json(answer);
  });
}

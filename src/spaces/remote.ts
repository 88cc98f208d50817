import type { FederationHierarchy, RemoteHierarchy } from './hierarchy.ts';

/** How long one remote server has to describe a room it holds. */
export const REMOTE_HIERARCHY_TIMEOUT_MS = 5_000;

/** The part of the federation client the walk uses (the composition root hands it in). */
export interface SignedRequester {
  request<T>(destination: string, method: 'GET', path: string, options: { query?: Record<string, string>; signal?: AbortSignal }): Promise<T>;
}

/**
 * Asks a server for a room's hierarchy (server-server GET /_matrix/federation/v1/hierarchy/{roomId}),
 * within the time limit.
 */
export function remoteHierarchy(client: SignedRequester): RemoteHierarchy {
  return (server, roomId, suggestedOnly) =>
    client.request<FederationHierarchy>(server, 'GET', `/_matrix/federation/v1/hierarchy/${encodeURIComponent(roomId)}`, {
      query: { suggested_only: String(suggestedOnly) },
      signal: AbortSignal.timeout(REMOTE_HIERARCHY_TIMEOUT_MS),
    });
}

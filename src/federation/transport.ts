/**
 * The host contract for federation. The core is platform-free: it neither opens
 * connections nor listens. A host (the Node host over TCP and WebSockets, later the
 * page's libp2p node over WebRTC and relays) carries server-server requests and
 * hands the core the ones that arrive, naming the peer they came from.
 */

/** How one outbound request may go. */
export interface SendOptions {
  signal?: AbortSignal;
  /**
   * A larger bound on this response's body than the transport's own: the answers that carry
   * a room's state (send_join, /state, /event_auth) grow with the room (a room of 10,000
   * members answers send_join with ~18 MiB).
   */
  maxResponseBytes?: number;
}

/** Carries outbound server-server requests. */
export interface FederationTransport {
  /**
   * Sends one request to the server named `destination` and returns its response.
   * The request URL's host part is not used to route: `destination` is. Rejects
   * with {@link FederationUnreachable} when no connection to it can be had, and
   * with any error when the exchange fails (timeout, reset, oversized response).
   */
  send(destination: string, request: Request, options?: SendOptions): Promise<Response>;
}

/** No route to the destination right now (not connected, no known address). */
export class FederationUnreachable extends Error {
  override name = 'FederationUnreachable';
  constructor(readonly destination: string, message = `server ${destination} is not reachable`) {
    super(message);
  }
}

/** An inbound server-server request and who sent it, as the transport authenticated it. */
export interface InboundFederationRequest {
  request: Request;
  /** The server name of the transport-level peer (for libp2p: from the connection's remote peer ID). */
  remoteServerName: string;
}

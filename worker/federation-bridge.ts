/**
 * Federation across the page ↔ core boundary (ARCHITECTURE.md, the shape). The
 * libp2p node lives in the leader's window (WebRTC exists only there) and the
 * core in its Web Worker, so every server-server request crosses comlink once:
 *
 * - inbound: node (page) → `core.federationFetch(wire, remoteServerName)` → the
 *   core's federation handler → a wire response back to the node;
 * - outbound: the core's FederationTransport (`pageTransport`) → the page's
 *   `PageSend` callback (a comlink proxy) → the node's transport → a wire outcome.
 *
 * Request and Response objects do not survive structured cloning, so they cross
 * as protocol.ts wire messages (method, URL, header list, body bytes, transferred
 * rather than copied). Errors do not keep their class across comlink either, so
 * "unreachable" is an outcome of its own: the queue treats FederationUnreachable
 * (wait for the peer) differently from a failed exchange (log and back off).
 */
import * as Comlink from 'comlink';
import { FederationUnreachable, type FederationTransport } from '../src/federation/transport.ts';
import { requestToWire, responseToWire, wireToRequest, wireToResponse, type WireRequest, type WireResponse } from './protocol.ts';

/** What the page answers for one outbound request. */
export type SendOutcome = { response: WireResponse } | { unreachable: string } | { error: string };

/** The page's side of outbound federation: sends one wire request to a server name. */
export type PageSend = (destination: string, request: WireRequest, options?: { maxResponseBytes?: number }) => Promise<SendOutcome>;

/** Marks a wire message's body to be transferred, not copied, by comlink. */
export function transferWire<T extends { body: ArrayBuffer | null }>(wire: T): T {
  return Comlink.transfer(wire, wire.body ? [wire.body] : []);
}

/**
 * The core's transport while the page's node may come and go: unreachable until
 * a page attaches its `send`, and again after it detaches (the leader tab's node
 * stopped). A new leader tab brings a new Worker and so a new core; `attach` is
 * called once per node.
 */
export function pageTransport(): { transport: FederationTransport; attach(send: PageSend | undefined): void } {
  let pageSend: PageSend | undefined;
  const transport: FederationTransport = {
    async send(destination, request, { signal, maxResponseBytes } = {}) {
      const send = pageSend;
      if (!send) throw new FederationUnreachable(destination, 'the page has no libp2p node (yet)');
      signal?.throwIfAborted();
      // The abort does not cross comlink; the page's node has its own deadline, and the caller stops waiting here.
      let onAbort = () => {};
      const aborted = new Promise<never>((_, reject) => (onAbort = () => reject(signal!.reason)));
      aborted.catch(() => {});
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        const wire = transferWire(await Promise.race([requestToWire(0, request), aborted]));
        const outcome = await Promise.race([send(destination, wire, maxResponseBytes ? { maxResponseBytes } : undefined), aborted]);
        if ('response' in outcome) return wireToResponse(outcome.response);
        if ('unreachable' in outcome) throw new FederationUnreachable(destination, outcome.unreachable);
        throw new Error(outcome.error);
      } finally {
        signal?.removeEventListener('abort', onAbort);
      }
    },
  };
  return { transport, attach: (send) => void (pageSend = send) };
}

/** The page's `PageSend` over a node's transport, ready to hand to the core with Comlink.proxy. */
export function pageSendOver(transport: FederationTransport): PageSend {
  return async (destination, wire, options) => {
    try {
      const response = await responseToWire(0, await transport.send(destination, wireToRequest(wire), options));
      // comlink transfers what is marked at the top level of a return value.
      return Comlink.transfer({ response }, response.body ? [response.body] : []);
    } catch (error) {
      if (error instanceof FederationUnreachable) return { unreachable: error.message };
      return { error: error instanceof Error ? `${error.name}: ${error.message}` : String(error) };
    }
  };
}

/** The core's inbound entry, on a wire request; the answer's body is transferred back. */
export async function answerWire(handler: (request: Request, remoteServerName: string) => Promise<Response>, wire: WireRequest, remoteServerName: string): Promise<WireResponse> {
  return transferWire(await responseToWire(0, await handler(wireToRequest(wire), remoteServerName)));
}

/** The node's inbound handler: a request from a peer, answered by the core across comlink. */
export function inboundOverCore(federationFetch: (wire: WireRequest, remoteServerName: string) => Promise<WireResponse>): (request: Request, remoteServerName: string) => Promise<Response> {
  return async (request, remoteServerName) => wireToResponse(await federationFetch(transferWire(await requestToWire(0, request)), remoteServerName));
}

import type { Homeserver } from '../../src/homeserver.ts';
import { FederationUnreachable, type FederationTransport } from '../../src/federation/transport.ts';

/**
 * Carries server-server requests between homeservers in one process, straight into
 * each other's inbound federation entry, naming the sender as a transport would.
 * For tests of federation logic that need no network; the libp2p transport has its
 * own tests and the multi-host tests run over it.
 */
export class InProcessNetwork {
  private readonly servers = new Map<string, Homeserver>();
  /** Servers that are "offline": requests to them fail as unreachable. */
  readonly down = new Set<string>();
  /** One-way losses, as `${origin}>${destination}`: that origin's requests to that destination fail. */
  readonly dropped = new Set<string>();

  transportFor(origin: () => string): FederationTransport {
    return {
      send: async (destination, request) => {
        const target = this.servers.get(destination);
        if (!target || this.down.has(destination) || this.down.has(origin()) || this.dropped.has(`${origin()}>${destination}`)) {
          throw new FederationUnreachable(destination);
        }
        // A fresh Request, as a wire would give: the sender's object is not shared.
        const copy = new Request(request.url, { method: request.method, headers: request.headers, body: request.body ? await request.arrayBuffer() : undefined });
        return target.federation.fetch(copy, origin());
      },
    };
  }

  add(server: Homeserver): void {
    this.servers.set(server.serverName, server);
  }
}

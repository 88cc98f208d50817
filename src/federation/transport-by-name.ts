import { publicKeyFromServerName } from '../crypto/identity.ts';
import type { FederationTransport } from './transport.ts';

/**
 * One homeserver, two transports: a hex name (a Hearth peer, its key in its name) goes over
 * libp2p, every other name over HTTPS. DNS cannot resolve a hex name, and a Hearth peer in a
 * browser cannot be reached by HTTPS, so the name alone decides.
 */
export function transportByName(transports: { hearth: FederationTransport; https: FederationTransport }): FederationTransport {
  return {
    send: (destination, request, options) => (publicKeyFromServerName(destination) ? transports.hearth : transports.https).send(destination, request, options),
  };
}

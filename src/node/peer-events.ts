/**
 * One line when a peer joins and one when it leaves (`npm start` prints them), so a person sees
 * that the peer works. libp2p's peer:connect and peer:disconnect fire for a peer's first and last
 * connection only: a WebRTC upgrade or a redialled relay connection in between prints nothing.
 */
import type { PeerId } from '@libp2p/interface';
import type { P2PNode } from '../p2p/node.ts';
import { serverNameFromPeerId } from '../p2p/identity.ts';

/** The start and end of a server name (64 hex digits), as the page's peers panel shows it. */
const shortServerName = (name: string): string => (name.length > 16 ? `${name.slice(0, 8)}\u2026${name.slice(-4)}` : name);

export function printPeerEvents(node: P2PNode, print: (line: string) => void): void {
  const named = (handle: (serverName: string) => void) => ({ detail: peerId }: CustomEvent<PeerId>) => {
    const serverName = serverNameFromPeerId(peerId);
    // Not a Hearth peer (no server name in its key): nothing a person would recognise.
    if (serverName !== undefined) handle(serverName);
  };
  node.libp2p.addEventListener(
    'peer:connect',
    named((serverName) => {
      const via = node.peers().find((peer) => peer.server_name === serverName)?.via ?? 'direct';
      print(`peer joined: ${shortServerName(serverName)} via ${via}`);
    }),
  );
  node.libp2p.addEventListener('peer:disconnect', named((serverName) => print(`peer left: ${shortServerName(serverName)}`)));
}

/**
 * Ends a WebRTC link when the other side hangs up, rather than when a check times out (issue 38: the
 * peers panel showed a closed page as connected, *direct*, seconds after the relay had seen it leave).
 *
 * @libp2p/webrtc 6.0.33 ends its connection when the RTCPeerConnection reads `failed` or `closed`
 * (rtcpeerconnection-to-conn.js), and nothing else. A page that closes or reloads hangs up at once: its
 * browser ends the DTLS session (close_notify) and aborts the SCTP association that carries the data
 * channels, so here the SCTP and DTLS transports read `closed` within milliseconds (measured in Chromium:
 * ~30 ms). But the peer connection's own state stays `connected`: only ICE consent, missing, changes it
 * (`disconnected` after ~6 s, `failed` after ~30 s), and libp2p's connection monitor pinged the dead link
 * away after up to 10 s. Meanwhile the link looked alive, and federation could pick it.
 *
 * So once a peer connection is connected, its SCTP or DTLS transport reaching `closed` while the peer
 * connection is still open closes it, and says so with the `connectionstatechange` the browser does not
 * fire for `close()`: libp2p reads `closed`, ends the connection, and `connection:close` reaches the panel.
 * Our own hang-ups (libp2p closing the peer connection) are already `closed` and left alone.
 */

const PATCHED = Symbol.for('hearth.webrtcHangUp');

type PeerConnectionClass = { prototype: RTCPeerConnection };

/**
 * Patches `setRemoteDescription` of the page's RTCPeerConnection (once; later calls do nothing): both the
 * dialler and the answerer of every libp2p WebRTC link call it, which is where each link starts being watched.
 */
export function endLinksOnHangUp(Peer: PeerConnectionClass | undefined = globalThis.RTCPeerConnection): void {
  if (!Peer) return;
  const proto = Peer.prototype as RTCPeerConnection & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  const setRemoteDescription = proto.setRemoteDescription as (this: RTCPeerConnection, ...args: unknown[]) => Promise<void>;
  proto.setRemoteDescription = function (this: RTCPeerConnection, ...args: unknown[]) {
    watchForHangUp(this);
    return setRemoteDescription.apply(this, args);
  } as RTCPeerConnection['setRemoteDescription'];
  proto[PATCHED] = true;
}

const watched = new WeakSet<RTCPeerConnection>();

function watchForHangUp(peerConnection: RTCPeerConnection): void {
  if (watched.has(peerConnection)) return;
  watched.add(peerConnection);
  // The transports exist once the link is up (and `sctp` only with data channels, which libp2p always has).
  const connected = () => {
    const sctp = peerConnection.sctp;
    if (peerConnection.connectionState !== 'connected' || !sctp) return;
    peerConnection.removeEventListener('connectionstatechange', connected);
    const dtls = sctp.transport;
    const hungUp = () => {
      if (sctp.state !== 'closed' && dtls.state !== 'closed') return;
      if (peerConnection.connectionState === 'closed') return;
      peerConnection.close();
      peerConnection.dispatchEvent(new Event('connectionstatechange'));
    };
    sctp.addEventListener('statechange', hungUp);
    dtls.addEventListener('statechange', hungUp);
    // Hung up before this ran (a busy page): end it now.
    hungUp();
  };
  peerConnection.addEventListener('connectionstatechange', connected);
}

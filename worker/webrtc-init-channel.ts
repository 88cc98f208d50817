/**
 * Works around a hang in @libp2p/webrtc 6.0.33's browser-to-browser dial (private-to-private
 * `initiateConnection`), the "WebRTC dial stall" of issue 24.
 *
 * The dialler creates a data channel labelled `init` before its offer, so that the connection has
 * something to gather candidates for. Once its RTCPeerConnection is connected it does
 *
 *     if (channel.readyState !== 'open') await pEvent(channel, 'open', { signal })
 *     channel.close()
 *     await pEvent(channel, 'close', { signal })
 *
 * The other side's muxer closes that same channel the moment it adopts it, which is as soon as
 * its own side is connected and upgraded: it has the link by then. When the dialler's page is
 * slower than the other's (a loaded machine), its channel has opened and closed before it looks:
 * `readyState` is `closed`, `open` fired with no one listening and never fires again, `close()` is
 * a no-op and `close` never fires either. The dial then waits for its abort signal (our 20 s per
 * address, or the 5 s of circuit relay's own discovery dial), closes the peer connection, and the
 * other side loses the link it had; each retry on a busy machine can meet the same race.
 *
 * The events the dialler waits for have happened: so, on an `init` channel, a listener added for
 * `open` once the channel is past it, or for `close` once it is closed, gets that event, and a
 * channel that closes without having opened (the page busier still) announces `open` first; each
 * as soon as the peer connection reads `connected` (at once if it does already). Nothing else
 * changes: other channels, and `init` channels of a connection that fails, behave as the browser
 * makes them.
 */

const INIT_LABEL = 'init';
const PATCHED = Symbol.for('hearth.webrtcInitChannel');

type PeerConnectionClass = { prototype: RTCPeerConnection };

/** Patches `createDataChannel` of the page's RTCPeerConnection (once; later calls do nothing). */
export function settleInitChannelEvents(Peer: PeerConnectionClass | undefined = globalThis.RTCPeerConnection): void {
  if (!Peer) return;
  const proto = Peer.prototype as RTCPeerConnection & { [PATCHED]?: true };
  if (proto[PATCHED]) return;
  const create = proto.createDataChannel;
  proto.createDataChannel = function (this: RTCPeerConnection, label: string, init?: RTCDataChannelInit) {
    const channel = create.call(this, label, init);
    if (label === INIT_LABEL) settleLateEvents(this, channel);
    return channel;
  };
  proto[PATCHED] = true;
}

function settleLateEvents(peerConnection: RTCPeerConnection, channel: RTCDataChannel): void {
  let opened = false;
  channel.addEventListener('open', () => {
    opened = true;
  });
  // Registered before anyone else's `close` listener, so a late `open` comes first.
  channel.addEventListener('close', () => {
    if (opened) return;
    whenConnected(peerConnection, () => {
      if (opened) return;
      opened = true;
      channel.dispatchEvent(new Event('open'));
    });
  });
  const add = channel.addEventListener.bind(channel);
  channel.addEventListener = ((type: string, listener: EventListenerOrEventListenerObject, options?: boolean | AddEventListenerOptions) => {
    add(type, listener, options);
    const past = (type === 'open' && (channel.readyState === 'closing' || channel.readyState === 'closed')) || (type === 'close' && channel.readyState === 'closed');
    // Dispatched, not called, so a listener removed meanwhile (its wait aborted) is not called.
    if (past) whenConnected(peerConnection, () => queueMicrotask(() => channel.dispatchEvent(new Event(type))));
  }) as RTCDataChannel['addEventListener'];
}

/**
 * Runs `then` once the peer connection reads `connected`: now if it does, or at its state change; never
 * if it fails or closes first. Later happens: the page can learn that the channel closed, or the dialler can stop
 * reading candidates because the signalling stream ended, before the connection's own state change reaches it.
 */
function whenConnected(peerConnection: RTCPeerConnection, then: () => void): void {
  if (peerConnection.connectionState === 'connected') return then();
  if (peerConnection.connectionState === 'failed' || peerConnection.connectionState === 'closed') return;
  const changed = () => {
    const state = peerConnection.connectionState;
    if (state === 'connected') then();
    if (state === 'connected' || state === 'failed' || state === 'closed') peerConnection.removeEventListener('connectionstatechange', changed);
  };
  peerConnection.addEventListener('connectionstatechange', changed);
}

/**
 * The ordering a loaded machine gave the WebRTC dial stall of issue 24, made certain: run in a page
 * before its scripts (`context.addInitScript(BUSY_DIALLER)`), every browser-to-browser WebRTC dial
 * this page makes hears nothing, from the moment it has the answer until the other side has closed
 * the dialler's `init` data channel: neither that its peer connection is connected nor anything its
 * WebSockets bring (the relay, which carries the signalling stream). Then all of it arrives, in
 * order, as to a page that was busy meanwhile. The peer connection itself, ICE and the data
 * channels run on as the browser runs them; the other side connects as usual (ICE finds the
 * dialler from its checks, without the held candidates).
 *
 * Which dial is the dialler's: @libp2p/webrtc's initiator creates a channel labelled `init` before
 * its offer; the listening side never creates one.
 */
export const BUSY_DIALLER = `(${(() => {
  const inits = new WeakMap<RTCPeerConnection, RTCDataChannel>();
  const holding = new WeakSet<RTCPeerConnection>();
  let holds = 0;
  const held: Array<() => void> = [];
  const hold = (pc: RTCPeerConnection) => {
    if (holding.has(pc)) return;
    holding.add(pc);
    holds++;
    const done = () => {
      if (!holding.delete(pc)) return;
      // Released once no dial is held any more, everything in the order it came.
      if (--holds === 0) for (const run of held.splice(0)) run();
    };
    inits.get(pc)!.addEventListener('close', done);
    pc.addEventListener('connectionstatechange', () => {
      if (pc.connectionState === 'failed' || pc.connectionState === 'closed') done();
    });
    const close = pc.close.bind(pc);
    pc.close = () => {
      done();
      close();
    };
  };

  const Peer = globalThis.RTCPeerConnection.prototype;
  const createDataChannel = Peer.createDataChannel;
  Peer.createDataChannel = function (this: RTCPeerConnection, label: string, init?: RTCDataChannelInit) {
    const channel = createDataChannel.call(this, label, init);
    if (label === 'init') inits.set(this, channel);
    return channel;
  };
  const setRemoteDescription = Peer.setRemoteDescription as (this: RTCPeerConnection, description: RTCSessionDescriptionInit) => Promise<void>;
  Peer.setRemoteDescription = function (this: RTCPeerConnection, description: RTCSessionDescriptionInit) {
    if (description?.type === 'answer' && inits.has(this)) hold(this);
    return setRemoteDescription.call(this, description);
  } as RTCPeerConnection['setRemoteDescription'];
  // The held dialler's `onconnectionstatechange` (set by the library) hears of `connected` only when released.
  // Only its own: the page's other peer connections (a dial from the other side meanwhile) go on.
  const handler = Object.getOwnPropertyDescriptor(Peer, 'onconnectionstatechange')!;
  Object.defineProperty(Peer, 'onconnectionstatechange', {
    configurable: true,
    enumerable: handler.enumerable,
    get: handler.get,
    set(this: RTCPeerConnection, listener: ((this: RTCPeerConnection, event: Event) => unknown) | null) {
      const pc = this;
      handler.set!.call(
        pc,
        listener &&
          ((event: Event) => {
            if (holding.has(pc)) held.push(() => listener.call(pc, event));
            else listener.call(pc, event);
          }),
      );
    },
  });
  // And the page's WebSockets deliver nothing while any dial is held.
  const addEventListener = WebSocket.prototype.addEventListener;
  WebSocket.prototype.addEventListener = function (this: WebSocket, type: string, listener: EventListenerOrEventListenerObject, options?: boolean | AddEventListenerOptions) {
    if (type !== 'message' || typeof listener !== 'function') return addEventListener.call(this, type, listener, options);
    const socket = this;
    return addEventListener.call(
      socket,
      type,
      (event: Event) => {
        if (holds > 0) held.push(() => listener.call(socket, event));
        else listener.call(socket, event);
      },
      options,
    );
  } as WebSocket['addEventListener'];
}).toString()})()`;

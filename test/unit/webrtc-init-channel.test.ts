import { describe, expect, it } from 'vitest';
import { settleInitChannelEvents } from '../../worker/webrtc-init-channel.ts';

// The browser's classes, as far as the patch looks at them: a data channel whose state the test moves,
// dispatching its events as the browser does (to whoever listens at that moment).
class FakeChannel extends EventTarget {
  readyState: RTCDataChannelState = 'connecting';
  constructor(readonly label: string) {
    super();
  }
  become(state: RTCDataChannelState, event?: string) {
    this.readyState = state;
    if (event) this.dispatchEvent(new Event(event));
  }
  close() {
    // As the browser: a no-op on a channel already closed.
  }
}
class FakePeerConnection extends EventTarget {
  connectionState: RTCPeerConnectionState = 'connecting';
  createDataChannel(label: string) {
    return new FakeChannel(label);
  }
  become(state: RTCPeerConnectionState) {
    this.connectionState = state;
    this.dispatchEvent(new Event('connectionstatechange'));
  }
}
settleInitChannelEvents(FakePeerConnection as unknown as { prototype: RTCPeerConnection });

const open = () => {
  const pc = new FakePeerConnection();
  const channel = pc.createDataChannel('init') as FakeChannel;
  return { pc, channel };
};
/** Whether a listener added now hears the event (the patch dispatches a late one in a microtask). */
const heard = async (channel: FakeChannel, type: string) => {
  let got = false;
  channel.addEventListener(type, () => (got = true));
  await new Promise<void>((resolve) => queueMicrotask(resolve));
  return got;
};

describe('the init channel of a WebRTC dial (the stall of issue 24)', () => {
  it('a listener for `open` added after the channel opened and closed hears `open`, and one for `close` hears `close`', async () => {
    const { pc, channel } = open();
    pc.connectionState = 'connected';
    channel.become('open', 'open'); // no one listening yet: the dialler's page was busy
    channel.become('closed', 'close'); // the other side closed it
    expect(await heard(channel, 'open')).toBe(true);
    expect(await heard(channel, 'close')).toBe(true);
  });

  it('a channel that closes without having opened announces `open` first, to whoever waits for it', async () => {
    const { pc, channel } = open();
    pc.connectionState = 'connected';
    const order: string[] = [];
    channel.addEventListener('open', () => order.push('open'));
    channel.addEventListener('close', () => order.push('close'));
    channel.become('closed', 'close');
    expect(order).toEqual(['open', 'close']);
  });

  it('when the page hears that the channel closed before that the connection is up, the events come once it is', async () => {
    const { pc, channel } = open();
    channel.become('open', 'open');
    channel.become('closed', 'close');
    let opened = false;
    let closed = false;
    channel.addEventListener('open', () => (opened = true));
    channel.addEventListener('close', () => (closed = true));
    await new Promise<void>((resolve) => queueMicrotask(resolve));
    expect([opened, closed]).toEqual([false, false]);
    pc.become('connected');
    await new Promise<void>((resolve) => queueMicrotask(resolve));
    expect([opened, closed]).toEqual([true, true]);
  });

  it('changes nothing while the channel is open or opening, nor for a connection that is not connected, nor for other channels', async () => {
    const { pc, channel } = open();
    pc.connectionState = 'connected';
    expect(await heard(channel, 'open')).toBe(false);
    channel.become('open', 'open');
    expect(await heard(channel, 'close')).toBe(false);

    const failed = open();
    failed.channel.become('closed', 'close');
    failed.pc.become('failed');
    expect(await heard(failed.channel, 'open')).toBe(false);

    const other = new FakePeerConnection();
    other.connectionState = 'connected';
    const stream = other.createDataChannel('') as FakeChannel;
    stream.become('closed', 'close');
    expect(await heard(stream, 'open')).toBe(false);
  });
});

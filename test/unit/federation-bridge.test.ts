import { describe, expect, it } from 'vitest';
import { FederationUnreachable, type FederationTransport } from '../../src/federation/transport.ts';
import { answerWire, inboundOverCore, pageSendOver, pageTransport } from '../../worker/federation-bridge.ts';
import { parseHearthConfig } from '../../worker/page-p2p.ts';

// The page ↔ core federation bridge without comlink in between: what crosses is plain data.
const clone = <T>(value: T): T => structuredClone(value);

describe('federation across the page and the core', () => {
  it('is unreachable until a page attaches its node, and again once it detaches', async () => {
    const { transport, attach } = pageTransport();
    await expect(transport.send('b', new Request('http://b/_matrix/federation/v1/version'))).rejects.toBeInstanceOf(FederationUnreachable);
    const node: FederationTransport = { send: async (destination, request) => Response.json({ destination, url: request.url }) };
    attach(async (destination, wire) => clone(await pageSendOver(node)(destination, clone(wire))));
    const response = await transport.send('b', new Request('http://b/_matrix/federation/v1/version'));
    expect(await response.json()).toEqual({ destination: 'b', url: 'http://b/_matrix/federation/v1/version' });
    attach(undefined);
    await expect(transport.send('b', new Request('http://b/x'))).rejects.toBeInstanceOf(FederationUnreachable);
  });

  it('carries method, headers, body and status both ways; the node’s errors keep their meaning', async () => {
    const { transport, attach } = pageTransport();
    let seen: { method: string; auth: string | null; body: string } | undefined;
    const node: FederationTransport = {
      async send(destination, request) {
        if (destination === 'gone') throw new FederationUnreachable(destination, 'no route to gone');
        if (destination === 'broken') throw new RangeError('response too large');
        seen = { method: request.method, auth: request.headers.get('authorization'), body: await request.text() };
        return new Response('{"ok":true}', { status: 201, headers: { 'content-type': 'application/json' } });
      },
    };
    attach(async (destination, wire) => clone(await pageSendOver(node)(destination, clone(wire))));
    const response = await transport.send('b', new Request('http://b/_matrix/federation/v1/send/1', { method: 'PUT', headers: { authorization: 'X-Matrix origin=a' }, body: '{"pdus":[]}' }));
    expect(seen).toEqual({ method: 'PUT', auth: 'X-Matrix origin=a', body: '{"pdus":[]}' });
    expect(response.status).toBe(201);
    expect(response.headers.get('content-type')).toBe('application/json');
    expect(await response.json()).toEqual({ ok: true });

    const unreachable = await transport.send('gone', new Request('http://gone/x')).catch((error) => error);
    expect(unreachable).toBeInstanceOf(FederationUnreachable);
    expect(unreachable.message).toBe('no route to gone');
    const failed = await transport.send('broken', new Request('http://broken/x')).catch((error) => error);
    expect(failed).not.toBeInstanceOf(FederationUnreachable);
    expect(failed.message).toBe('RangeError: response too large');
  });

  it('stops waiting when the caller aborts, though the page has not answered', async () => {
    const { transport, attach } = pageTransport();
    attach(() => new Promise(() => {}));
    const controller = new AbortController();
    const sending = transport.send('b', new Request('http://b/x'), { signal: controller.signal });
    controller.abort(new Error('gave up'));
    await expect(sending).rejects.toThrow('gave up');
  });

  it('hands inbound requests to the core with the remote server name, and the answer back', async () => {
    const core = (request: Request, remote: string) => Promise.resolve(Response.json({ remote, method: request.method, path: new URL(request.url).pathname }, { status: 202 }));
    const handler = inboundOverCore(async (wire, remote) => clone(await answerWire(core, clone(wire), remote)));
    const response = await handler(new Request('http://self/_matrix/federation/v1/make_join/r/u', { method: 'GET' }), 'a'.repeat(64));
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ remote: 'a'.repeat(64), method: 'GET', path: '/_matrix/federation/v1/make_join/r/u' });
  });
});

describe('/hearth-config.json', () => {
  it('takes bootstrap peers, ICE servers, the private-address and twin-watch switches, each optional', () => {
    expect(parseHearthConfig({})).toEqual({ bootstrap: [], iceServers: [], allowPrivateAddresses: false, detectTwins: true });
    expect(parseHearthConfig({ bootstrap: ['/ip4/127.0.0.1/tcp/1/ws/p2p/12D3KooWx'], iceServers: [{ urls: 'stun:stun.example' }], allowPrivateAddresses: true, detectTwins: false })).toEqual({
      bootstrap: ['/ip4/127.0.0.1/tcp/1/ws/p2p/12D3KooWx'],
      iceServers: [{ urls: 'stun:stun.example' }],
      allowPrivateAddresses: true,
      detectTwins: false,
    });
  });

  it('refuses what is malformed (the page then starts with no bootstrap peers)', () => {
    expect(() => parseHearthConfig([])).toThrow();
    expect(() => parseHearthConfig(null)).toThrow();
    expect(() => parseHearthConfig({ bootstrap: '/ip4/1.2.3.4' })).toThrow();
    expect(() => parseHearthConfig({ bootstrap: [1] })).toThrow();
    expect(() => parseHearthConfig({ iceServers: ['stun:x'] })).toThrow();
    expect(() => parseHearthConfig({ allowPrivateAddresses: 'yes' })).toThrow();
    expect(() => parseHearthConfig({ detectTwins: 1 })).toThrow();
  });
});

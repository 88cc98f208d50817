import { describe, expect, it } from 'vitest';
import {
  orderSrv,
  parseServerName,
  ServerDiscovery,
  ServerNameError,
  wellKnownCacheMs,
  WELL_KNOWN_DEFAULT_CACHE_MS,
  WELL_KNOWN_ERROR_CACHE_MS,
  WELL_KNOWN_MAX_CACHE_MS,
  type SrvRecord,
} from './server-discovery.ts';

const HOUR = 60 * 60 * 1000;

/** A world of well-known answers and SRV records, counting what is asked. */
function world(options: { wellKnown?: Record<string, { status?: number; body: string; cacheControl?: string } | 'unreachable'>; srv?: Record<string, SrvRecord[]> } = {}) {
  let now = 1_000_000;
  const asked: string[] = [];
  const discovery = new ServerDiscovery({
    now: () => now,
    random: () => 0,
    resolutionCacheMs: 0,
    fetch: async (url) => {
      asked.push(url);
      const host = new URL(url).host;
      const answer = options.wellKnown?.[host];
      if (answer === 'unreachable') throw new TypeError('fetch failed');
      if (!answer) return new Response('not found', { status: 404 });
      const headers: Record<string, string> = {};
      if (answer.cacheControl) headers['cache-control'] = answer.cacheControl;
      return new Response(answer.body, { status: answer.status ?? 200, headers });
    },
    resolveSrv: async (name) => {
      asked.push(`srv ${name}`);
      return options.srv?.[name] ?? [];
    },
  });
  return { discovery, asked, advance: (ms: number) => (now += ms) };
}

const srv = (name: string, port: number, priority = 10, weight = 0): SrvRecord => ({ name, port, priority, weight });

describe('server names', () => {
  it('splits the grammar: DNS names, IPv4 and bracketed IPv6 literals, ports', () => {
    expect(parseServerName('example.org')).toEqual({ hostname: 'example.org', port: undefined, ip: undefined });
    expect(parseServerName('localhost:8448')).toEqual({ hostname: 'localhost', port: 8448, ip: undefined });
    expect(parseServerName('1.2.3.4:1234')).toEqual({ hostname: '1.2.3.4', port: 1234, ip: '1.2.3.4' });
    expect(parseServerName('[1234:5678::abcd]:5678')).toEqual({ hostname: '[1234:5678::abcd]', port: 5678, ip: '1234:5678::abcd' });
    for (const bad of ['', 'a b', 'example.org:', 'example.org:99999', 'example.org:0', '1234::1', 'ex_ample.org', '[::1']) {
      expect(() => parseServerName(bad), bad).toThrow(ServerNameError);
    }
  });
});

describe('resolving server names', () => {
  it('1: an IP literal is used as it is, 8448 by default; no SNI; Host is the server name', async () => {
    const { discovery, asked } = world();
    expect(await discovery.resolve('1.2.3.4')).toEqual({ serverName: '1.2.3.4', targets: [{ host: '1.2.3.4', port: 8448 }], tlsName: '1.2.3.4', sni: undefined, hostHeader: '1.2.3.4' });
    expect(await discovery.resolve('[2001:db8::1]:8443')).toEqual({
      serverName: '[2001:db8::1]:8443',
      targets: [{ host: '2001:db8::1', port: 8443 }],
      tlsName: '2001:db8::1',
      sni: undefined,
      hostHeader: '[2001:db8::1]:8443',
    });
    expect(asked).toEqual([]);
  });

  it('2: an explicit port skips well-known and SRV; the certificate is for the hostname, Host has the port', async () => {
    const { discovery, asked } = world({ wellKnown: { 'example.org': { body: '{"m.server":"other.org"}' } } });
    expect(await discovery.resolve('example.org:8000')).toEqual({ serverName: 'example.org:8000', targets: [{ host: 'example.org', port: 8000 }], tlsName: 'example.org', sni: 'example.org', hostHeader: 'example.org:8000' });
    expect(asked).toEqual([]);
  });

  it('3.1: a well-known delegation to an IP literal, with its port', async () => {
    const { discovery } = world({ wellKnown: { 'example.org': { body: '{"m.server":"[::1]:9000"}' } } });
    expect(await discovery.resolve('example.org')).toEqual({ serverName: 'example.org', targets: [{ host: '::1', port: 9000 }], tlsName: '::1', sni: undefined, hostHeader: '[::1]:9000' });
  });

  it('3.2: a delegation with a port connects there, no SRV; certificate for the delegated name', async () => {
    const { discovery, asked } = world({ wellKnown: { 'example.org': { body: '{"m.server":"matrix.example.net:443"}' } }, srv: { '_matrix-fed._tcp.matrix.example.net': [srv('x', 1)] } });
    expect(await discovery.resolve('example.org')).toEqual({
      serverName: 'example.org',
      targets: [{ host: 'matrix.example.net', port: 443 }],
      tlsName: 'matrix.example.net',
      sni: 'matrix.example.net',
      hostHeader: 'matrix.example.net:443',
    });
    expect(asked).toEqual(['https://example.org/.well-known/matrix/server']);
  });

  it('3.3–3.5: a delegation without a port takes the delegated name\'s SRV (new, then deprecated), then 8448', async () => {
    const delegating = { 'example.org': { body: '{"m.server":"hs.example.net"}' } };
    const fed = world({ wellKnown: delegating, srv: { '_matrix-fed._tcp.hs.example.net': [srv('box.example.net.', 8500)], '_matrix._tcp.hs.example.net': [srv('old.example.net', 1)] } });
    expect(await fed.discovery.resolve('example.org')).toEqual({
      serverName: 'example.org',
      targets: [{ host: 'box.example.net', port: 8500 }],
      tlsName: 'hs.example.net',
      sni: 'hs.example.net',
      hostHeader: 'hs.example.net',
    });
    const old = world({ wellKnown: delegating, srv: { '_matrix._tcp.hs.example.net': [srv('old.example.net', 8600)] } });
    expect((await old.discovery.resolve('example.org')).targets).toEqual([{ host: 'old.example.net', port: 8600 }]);
    expect(old.asked).toEqual(['https://example.org/.well-known/matrix/server', 'srv _matrix-fed._tcp.hs.example.net', 'srv _matrix._tcp.hs.example.net']);
    const none = world({ wellKnown: delegating });
    expect(await none.discovery.resolve('example.org')).toMatchObject({ targets: [{ host: 'hs.example.net', port: 8448 }], tlsName: 'hs.example.net', hostHeader: 'hs.example.net' });
  });

  it('4–6: without a delegation, SRV on the name itself (new, then deprecated), then 8448; certificate and Host stay the name', async () => {
    const fed = world({ srv: { '_matrix-fed._tcp.example.org': [srv('target.example.net', 8450)] } });
    expect(await fed.discovery.resolve('example.org')).toEqual({
      serverName: 'example.org',
      targets: [{ host: 'target.example.net', port: 8450 }],
      tlsName: 'example.org',
      sni: 'example.org',
      hostHeader: 'example.org',
    });
    const old = world({ srv: { '_matrix._tcp.example.org': [srv('legacy.example.net', 8451)] } });
    expect((await old.discovery.resolve('example.org')).targets).toEqual([{ host: 'legacy.example.net', port: 8451 }]);
    const none = world();
    expect(await none.discovery.resolve('example.org')).toEqual({ serverName: 'example.org', targets: [{ host: 'example.org', port: 8448 }], tlsName: 'example.org', sni: 'example.org', hostHeader: 'example.org' });
    // A lone "." target says there is no such service: the name itself on 8448.
    const dot = world({ srv: { '_matrix-fed._tcp.example.org': [srv('.', 0)] } });
    expect((await dot.discovery.resolve('example.org')).targets).toEqual([{ host: 'example.org', port: 8448 }]);
  });

  it('a bad well-known (not 200, not JSON, no m.server, not a server name, unreachable) is as none', async () => {
    for (const answer of [{ status: 500, body: '{"m.server":"x.org"}' }, { body: 'not json' }, { body: '{}' }, { body: '["x"]' }, { body: '{"m.server":"bad name"}' }, { body: '{"m.server":7}' }, 'unreachable' as const]) {
      const { discovery } = world({ wellKnown: { 'example.org': answer } });
      expect((await discovery.resolve('example.org')).targets, JSON.stringify(answer)).toEqual([{ host: 'example.org', port: 8448 }]);
    }
  });

  it('one look-up serves concurrent resolutions of the same name', async () => {
    const { discovery, asked } = world({ wellKnown: { 'example.org': { body: '{"m.server":"hs.example.org:8008"}' } } });
    await Promise.all([discovery.resolve('example.org'), discovery.resolve('example.org')]);
    expect(asked).toEqual(['https://example.org/.well-known/matrix/server']);
  });
});

describe('the well-known cache', () => {
  it('keeps an answer for its max-age, 24 h without one, never past 48 h, and an error for an hour', () => {
    expect(wellKnownCacheMs(null)).toBe(WELL_KNOWN_DEFAULT_CACHE_MS);
    expect(wellKnownCacheMs('public, max-age=600')).toBe(600_000);
    expect(wellKnownCacheMs('max-age=999999999')).toBe(WELL_KNOWN_MAX_CACHE_MS);
    expect(wellKnownCacheMs('no-store')).toBe(0);
    expect(wellKnownCacheMs('private')).toBe(WELL_KNOWN_DEFAULT_CACHE_MS);
    expect(WELL_KNOWN_ERROR_CACHE_MS).toBe(HOUR);
  });

  it('asks again once the max-age has passed', async () => {
    const { discovery, asked, advance } = world({ wellKnown: { 'example.org': { body: '{"m.server":"hs.example.org:1"}', cacheControl: 'max-age=60' } } });
    await discovery.resolve('example.org');
    advance(59_000);
    await discovery.resolve('example.org');
    expect(asked).toHaveLength(1);
    advance(2_000);
    await discovery.resolve('example.org');
    expect(asked).toHaveLength(2);
  });

  it('asks again after 24 h by default, and after an hour when it failed', async () => {
    const ok = world({ wellKnown: { 'example.org': { body: '{"m.server":"hs.example.org:1"}' } } });
    await ok.discovery.resolve('example.org');
    ok.advance(24 * HOUR - 1);
    await ok.discovery.resolve('example.org');
    expect(ok.asked).toHaveLength(1);
    ok.advance(2);
    await ok.discovery.resolve('example.org');
    expect(ok.asked).toHaveLength(2);

    const failing = world({ wellKnown: { 'example.org': 'unreachable' } });
    await failing.discovery.resolve('example.org');
    failing.advance(HOUR - 1);
    await failing.discovery.resolve('example.org');
    expect(failing.asked.filter((a) => a.startsWith('https:'))).toHaveLength(1);
    failing.advance(2);
    await failing.discovery.resolve('example.org');
    expect(failing.asked.filter((a) => a.startsWith('https:'))).toHaveLength(2);
  });

  it('reuses a whole resolution for its cache time, and forgets it when told', async () => {
    let now = 0;
    const asked: string[] = [];
    const discovery = new ServerDiscovery({ now: () => now, fetch: async () => new Response('', { status: 404 }), resolveSrv: async (name) => (asked.push(name), []), resolutionCacheMs: 1000 });
    await discovery.resolve('example.org');
    await discovery.resolve('example.org');
    expect(asked).toHaveLength(2);
    discovery.forget('example.org');
    await discovery.resolve('example.org');
    expect(asked).toHaveLength(4);
    now = 1001;
    await discovery.resolve('example.org');
    expect(asked).toHaveLength(6);
  });
});

describe('SRV order', () => {
  it('lowest priority first; within a priority, by weight', () => {
    const records = [srv('c', 3, 20), srv('a', 1, 10, 0), srv('b', 2, 10, 100)];
    // random 0 picks the first record with weight in the running sum: b (a has weight 0).
    expect(orderSrv(records, () => 0).map((t) => t.host)).toEqual(['b', 'a', 'c']);
    const heavy = [srv('light', 1, 5, 1), srv('heavy', 2, 5, 99)];
    expect(orderSrv(heavy, () => 0.5).map((t) => t.host)).toEqual(['heavy', 'light']);
    expect(orderSrv(heavy, () => 0.001).map((t) => t.host)).toEqual(['light', 'heavy']);
    expect(orderSrv([srv('.', 0)])).toEqual([]);
  });
});

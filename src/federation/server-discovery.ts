/**
 * Server discovery (server-server §Resolving server names): a server name becomes where to
 * connect, which name its certificate must carry (and the SNI to send), and the `Host` header.
 * Platform-free: the host gives a fetch for `/.well-known/matrix/server` (which must check
 * certificates), an SRV resolver and a clock.
 */
import { readBounded } from '../http/bounded-body.ts';

export interface SrvRecord {
  name: string;
  port: number;
  priority: number;
  weight: number;
}

/** One address to try: a DNS name (resolved by A/AAAA when connecting) or an IP literal, without brackets. */
export interface ServerTarget {
  host: string;
  port: number;
}

export interface ResolvedServer {
  /** The name that was resolved (what requests are signed for, whatever the delegation). */
  serverName: string;
  /** Where to connect, in the order to try them (SRV priority, then weight). */
  targets: ServerTarget[];
  /** The name (or IP literal, without brackets) the certificate must be valid for. */
  tlsName: string;
  /** The SNI to send: the certificate's name, none when it is an IP address. */
  sni: string | undefined;
  /** The `Host` header of every request. */
  hostHeader: string;
}

export interface DiscoveryOptions {
  /** A fetch that checks TLS certificates; used only for `https://HOST/.well-known/matrix/server`, redirects followed. */
  fetch: (url: string, init: { signal: AbortSignal }) => Promise<Response>;
  /** SRV records for a name; [] (or a rejection the caller maps to []) when there are none. */
  resolveSrv: (name: string) => Promise<SrvRecord[]>;
  now: () => number;
  /** For the weighted choice among SRV records of one priority; Math.random by default. */
  random?: () => number;
  /** How long a well-known request may take. */
  wellKnownTimeoutMs?: number;
  /** How long a whole resolution (after its well-known part) is reused. */
  resolutionCacheMs?: number;
}

export const DEFAULT_FEDERATION_PORT = 8448;
const HOUR = 60 * 60 * 1000;
/** The spec's recommendations: 24 h when the answer does not say, at most 48 h, errors an hour. */
export const WELL_KNOWN_DEFAULT_CACHE_MS = 24 * HOUR;
export const WELL_KNOWN_MAX_CACHE_MS = 48 * HOUR;
export const WELL_KNOWN_ERROR_CACHE_MS = HOUR;
const WELL_KNOWN_MAX_BYTES = 64 * 1024;

export class ServerNameError extends Error {
  override name = 'ServerNameError';
}

export interface ParsedServerName {
  /** The hostname as written (an IPv6 literal keeps its brackets). */
  hostname: string;
  port: number | undefined;
  /** The IP address when the hostname is an IP literal (IPv6 without brackets). */
  ip: string | undefined;
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** Splits a server name per the appendices' grammar; throws ServerNameError when it is not one. */
export function parseServerName(name: string): ParsedServerName {
  const match = /^(\[[0-9A-Fa-f:.]{2,45}\]|[A-Za-z0-9.-]{1,255})(?::(\d{1,5}))?$/.exec(name);
  if (!match) throw new ServerNameError(`not a server name: ${JSON.stringify(name)}`);
  const hostname = match[1]!;
  const port = match[2] === undefined ? undefined : Number(match[2]);
  if (port !== undefined && (port < 1 || port > 65535)) throw new ServerNameError(`bad port in server name ${JSON.stringify(name)}`);
  let ip: string | undefined;
  if (hostname.startsWith('[')) ip = hostname.slice(1, -1);
  else {
    const quad = IPV4.exec(hostname);
    if (quad) {
      if (quad.slice(1).some((part) => Number(part) > 255)) throw new ServerNameError(`bad IPv4 literal in ${JSON.stringify(name)}`);
      ip = hostname;
    }
  }
  return { hostname, port, ip };
}

/** Orders SRV records as RFC 2782 says: lowest priority first, weighted random within one priority. "." means none. */
export function orderSrv(records: SrvRecord[], random: () => number = Math.random): ServerTarget[] {
  const usable = records.filter((r) => r.name !== '' && r.name !== '.');
  const priorities = [...new Set(usable.map((r) => r.priority))].sort((a, b) => a - b);
  const out: ServerTarget[] = [];
  for (const priority of priorities) {
    const group = usable.filter((r) => r.priority === priority);
    while (group.length > 0) {
      const total = group.reduce((sum, r) => sum + r.weight, 0);
      let pick = 0;
      if (total > 0) {
        let at = random() * total;
        pick = group.findIndex((r) => (at -= r.weight) < 0);
        if (pick < 0) pick = group.length - 1;
      }
      const [chosen] = group.splice(pick, 1);
      out.push({ host: chosen!.name.replace(/\.$/, ''), port: chosen!.port });
    }
  }
  return out;
}

/** How long a well-known answer may be kept, from its Cache-Control (max-age, no-store, no-cache). */
export function wellKnownCacheMs(cacheControl: string | null): number {
  if (cacheControl === null) return WELL_KNOWN_DEFAULT_CACHE_MS;
  const directives = cacheControl.toLowerCase().split(',').map((d) => d.trim());
  if (directives.includes('no-store') || directives.includes('no-cache')) return 0;
  const maxAge = directives.map((d) => /^max-age\s*=\s*"?(\d+)"?$/.exec(d)).find((m) => m);
  if (!maxAge) return WELL_KNOWN_DEFAULT_CACHE_MS;
  return Math.min(Number(maxAge[1]) * 1000, WELL_KNOWN_MAX_CACHE_MS);
}

interface WellKnownEntry {
  /** The delegated server name, or undefined when the well-known gave none (an error of any kind). */
  delegated: string | undefined;
  expiresTs: number;
}

/**
 * Resolves server names, caching well-known answers as their Cache-Control says and whole
 * resolutions briefly. Concurrent resolutions of one name share one look-up.
 */
export class ServerDiscovery {
  private readonly wellKnown = new Map<string, WellKnownEntry>();
  private readonly resolved = new Map<string, { value: ResolvedServer; expiresTs: number }>();
  private readonly inFlight = new Map<string, Promise<ResolvedServer>>();

  constructor(private readonly options: DiscoveryOptions) {}

  /** Where and how to reach `serverName`. Rejects with ServerNameError for a malformed name; DNS failures other than "no record" reject too. */
  resolve(serverName: string): Promise<ResolvedServer> {
    const cached = this.resolved.get(serverName);
    if (cached && cached.expiresTs > this.options.now()) return Promise.resolve(cached.value);
    let pending = this.inFlight.get(serverName);
    if (!pending) {
      pending = this.lookUp(serverName).finally(() => this.inFlight.delete(serverName));
      this.inFlight.set(serverName, pending);
    }
    return pending;
  }

  /** Forgets what is cached for a name (a connection to it failed: the next try looks again). */
  forget(serverName: string): void {
    this.resolved.delete(serverName);
  }

  private async lookUp(serverName: string): Promise<ResolvedServer> {
    const { hostname, port, ip } = parseServerName(serverName);
    // 1. An IP literal, 2. an explicit port: no look-up at all.
    if (ip !== undefined) return this.remember(ipLiteral(serverName, ip, port), Infinity);
    if (port !== undefined) return this.remember(named(serverName, hostname, [{ host: hostname, port }], serverName), Infinity);
    // 3. The well-known delegation, then the same steps on the delegated name (without well-known).
    const wellKnown = await this.wellKnownOf(hostname);
    const until = wellKnown.expiresTs;
    if (wellKnown.delegated !== undefined) {
      const delegated = parseServerName(wellKnown.delegated);
      if (delegated.ip !== undefined) return this.remember(ipLiteral(serverName, delegated.ip, delegated.port, wellKnown.delegated), until);
      if (delegated.port !== undefined) {
        return this.remember(named(serverName, delegated.hostname, [{ host: delegated.hostname, port: delegated.port }], wellKnown.delegated), until);
      }
      return this.remember(named(serverName, delegated.hostname, await this.srvTargets(delegated.hostname), delegated.hostname), until);
    }
    // 4.–6. SRV on the name itself, then port 8448.
    return this.remember(named(serverName, hostname, await this.srvTargets(hostname), hostname), until);
  }

  private remember(value: ResolvedServer, wellKnownExpiresTs: number): ResolvedServer {
    const expiresTs = Math.min(wellKnownExpiresTs, this.options.now() + (this.options.resolutionCacheMs ?? 5 * 60 * 1000));
    this.resolved.set(value.serverName, { value, expiresTs });
    return value;
  }

  /** `_matrix-fed._tcp`, then the deprecated `_matrix._tcp`, then the name itself on 8448. */
  private async srvTargets(hostname: string): Promise<ServerTarget[]> {
    for (const service of ['_matrix-fed._tcp', '_matrix._tcp']) {
      const targets = orderSrv(await this.options.resolveSrv(`${service}.${hostname}`), this.options.random);
      if (targets.length > 0) return targets;
    }
    return [{ host: hostname, port: DEFAULT_FEDERATION_PORT }];
  }

  private async wellKnownOf(hostname: string): Promise<WellKnownEntry> {
    const now = this.options.now();
    const cached = this.wellKnown.get(hostname);
    if (cached && cached.expiresTs > now) return cached;
    let entry: WellKnownEntry;
    try {
      const response = await this.options.fetch(`https://${hostname}/.well-known/matrix/server`, {
        signal: AbortSignal.timeout(this.options.wellKnownTimeoutMs ?? 10_000),
      });
      const bytes = await readBounded(response.body, WELL_KNOWN_MAX_BYTES, response.headers.get('content-length'));
      const delegated = response.status === 200 ? delegationIn(bytes) : undefined;
      entry = delegated === undefined
        ? { delegated: undefined, expiresTs: now + WELL_KNOWN_ERROR_CACHE_MS }
        : { delegated, expiresTs: now + wellKnownCacheMs(response.headers.get('cache-control')) };
    } catch {
      // Unreachable, refused, a bad certificate, too large, too slow: all errors, cached for an hour.
      entry = { delegated: undefined, expiresTs: now + WELL_KNOWN_ERROR_CACHE_MS };
    }
    this.wellKnown.set(hostname, entry);
    return entry;
  }
}

/** The `m.server` of a well-known body, when it is a JSON object naming a valid server name (whatever the Content-Type). */
function delegationIn(bytes: Uint8Array | null): string | undefined {
  if (bytes === null) return undefined;
  try {
    const body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes)) as unknown;
    const server = typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>)['m.server'] : undefined;
    if (typeof server !== 'string') return undefined;
    parseServerName(server);
    return server;
  } catch {
    return undefined;
  }
}

/** Steps 1 and 3.1: the certificate is for the IP address, no SNI, `Host` the name as given (its port too). */
function ipLiteral(serverName: string, ip: string, port: number | undefined, hostHeader = serverName): ResolvedServer {
  return { serverName, targets: [{ host: ip, port: port ?? DEFAULT_FEDERATION_PORT }], tlsName: ip, sni: undefined, hostHeader };
}

function named(serverName: string, tlsName: string, targets: ServerTarget[], hostHeader: string): ResolvedServer {
  return { serverName, targets, tlsName, sni: tlsName, hostHeader };
}

/**
 * Federation over HTTPS, as the wider Matrix speaks it: server discovery (`ServerDiscovery`:
 * well-known, SRV through an injectable DNS resolver, 8448), then Node's `https` with a
 * keep-alive agent, SNI and `Host` as discovery says, and the certificate checked for the name
 * discovery gives. Certificates are always checked, against Node's roots plus
 * NODE_EXTRA_CA_CERTS; there is no switch that turns the check off.
 */
import { Resolver } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';
import { Agent, request as httpsRequest, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { rootCertificates } from 'node:tls';
import { FederationUnreachable, type FederationTransport } from '../federation/transport.ts';
import { ServerDiscovery, type ResolvedServer, type ServerTarget, type SrvRecord } from '../federation/server-discovery.ts';
import { BodyTooLargeError, bodyOver } from '../http/bounded-body.ts';

export interface HttpsLimits {
  /** The largest request body sent, in bytes. */
  maxRequestBytes: number;
  /** The largest response body accepted, in bytes. */
  maxResponseBytes: number;
  /** One deadline for a whole exchange: discovery, connect, request, response. */
  timeoutMs: number;
}

export const DEFAULT_HTTPS_LIMITS: HttpsLimits = { maxRequestBytes: 4 * 1024 * 1024, maxResponseBytes: 4 * 1024 * 1024, timeoutMs: 30_000 };

export interface HttpsFederationOptions {
  /** DNS servers for SRV look-ups (`['127.0.0.1:5300']`); the system's when not given. */
  dnsServers?: string[];
  /**
   * CAs trusted beside Node's roots (PEM). In process, this is what NODE_EXTRA_CA_CERTS is to a
   * new process (Node reads that variable only at start): for tests with a CA of their own.
   */
  extraCa?: string[];
  /** Where A/AAAA names go (net's `lookup`); the system resolver by default. Tests map names to 127.0.0.1. */
  lookup?: LookupFunction;
  /** The port well-known is asked on; 443 as the spec says. Tests only: they cannot all bind 443. */
  wellKnownPort?: number;
  limits?: Partial<HttpsLimits>;
  now?: () => number;
}

export interface HttpsFederationTransport extends FederationTransport {
  readonly discovery: ServerDiscovery;
  /** Ends the kept-alive connections. */
  close(): void;
}

const MAX_REDIRECTS = 5;

/** An SRV resolver on a dns.Resolver: no such name or no such record is none, anything else a failure. */
export function dnsSrvResolver(resolver: Resolver): (name: string) => Promise<SrvRecord[]> {
  return async (name) => {
    try {
      return await resolver.resolveSrv(name);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOTFOUND' || code === 'ENODATA' || code === 'ENONAME') return [];
      throw error;
    }
  };
}

/** A failure before a connection stood: the next address may do, and the destination counts as unreachable. */
class ConnectFailure extends Error {
  override name = 'ConnectFailure';
}

export function createHttpsFederationTransport(options: HttpsFederationOptions = {}): HttpsFederationTransport {
  const limits = { ...DEFAULT_HTTPS_LIMITS, ...options.limits };
  const agent = new Agent({
    keepAlive: true,
    // `ca` replaces the roots, so extra CAs are given together with Node's own.
    ...(options.extraCa?.length ? { ca: [...rootCertificates, ...options.extraCa] } : {}),
  });
  const resolver = new Resolver({ timeout: 3_000, tries: 2 });
  if (options.dnsServers) resolver.setServers(options.dnsServers);

  /** One HTTPS exchange with one address; rejects with ConnectFailure when no verified connection was made. */
  const exchange = (
    target: ServerTarget,
    resolved: { sni: string | undefined; hostHeader: string },
    method: string,
    path: string,
    headers: Record<string, string>,
    body: Uint8Array | undefined,
    signal: AbortSignal,
    maxResponseBytes: number,
  ): Promise<Response> =>
    new Promise<Response>((resolveExchange, rejectExchange) => {
      let connected = false;
      const resolve = (response: Response) => (signal.removeEventListener('abort', onAbort), resolveExchange(response));
      const reject = (error: Error) => (signal.removeEventListener('abort', onAbort), rejectExchange(error));
      const requestOptions: RequestOptions = {
        agent,
        host: target.host,
        port: target.port,
        method,
        path,
        // No SNI for an IP address (the certificate is then checked for the address itself).
        servername: resolved.sni ?? '',
        headers: { ...headers, host: resolved.hostHeader, ...(body ? { 'content-length': String(body.byteLength) } : {}) },
        ...(options.lookup ? { lookup: options.lookup } : {}),
      };
      const req = httpsRequest(requestOptions);
      const fail = (error: Error) => {
        req.destroy();
        reject(connected ? error : new ConnectFailure(error.message, { cause: error }));
      };
      const onAbort = () => fail(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason)));
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      req.on('socket', (socket) => {
        // A kept-alive socket is already verified; a new one is once its handshake is done.
        if ((socket as TLSSocket).authorized) connected = true;
        else socket.once('secureConnect', () => (connected = true));
      });
      req.on('error', fail);
      req.on('response', (response) => {
        readResponse(response, maxResponseBytes).then(resolve, (error: Error) => {
          response.destroy();
          fail(error);
        });
      });
      req.end(body);
    });

  /** GET for well-known: one connection per hop (verified like any other), redirects followed, loops refused. */
  const wellKnownFetch = async (url: string, init: { signal: AbortSignal }): Promise<Response> => {
    const seen = new Set<string>();
    let at = new URL(url);
    if (options.wellKnownPort !== undefined && at.port === '') at.port = String(options.wellKnownPort);
    for (let hop = 0; ; hop++) {
      if (at.protocol !== 'https:') throw new Error(`well-known redirected to ${at.protocol}`);
      if (seen.has(at.href) || hop > MAX_REDIRECTS) throw new Error('well-known redirects loop or go on too long');
      seen.add(at.href);
      const host = at.hostname.replace(/^\[(.*)\]$/, '$1');
      const isIp = /^[\d.]+$/.test(host) || host.includes(':');
      const response = await exchange({ host, port: Number(at.port || 443) }, { sni: isIp ? undefined : host, hostHeader: at.host }, 'GET', at.pathname + at.search, { accept: 'application/json' }, undefined, init.signal, limits.maxResponseBytes);
      const location = response.headers.get('location');
      if (response.status < 300 || response.status >= 400 || !location) return response;
      at = new URL(location, at);
    }
  };

  const discovery = new ServerDiscovery({ fetch: wellKnownFetch, resolveSrv: dnsSrvResolver(resolver), now: options.now ?? Date.now });

  return {
    discovery,
    close: () => agent.destroy(),
    async send(destination, request, sendOptions) {
      const signal = sendOptions?.signal ? AbortSignal.any([sendOptions.signal, AbortSignal.timeout(limits.timeoutMs)]) : AbortSignal.timeout(limits.timeoutMs);
      let resolved: ResolvedServer;
      try {
        resolved = await discovery.resolve(destination);
      } catch (error) {
        throw new FederationUnreachable(destination, `cannot resolve ${destination}: ${error instanceof Error ? error.message : String(error)}`);
      }
      const bytes = request.body ? new Uint8Array(await request.arrayBuffer()) : undefined;
      if (bytes && bytes.byteLength > limits.maxRequestBytes) throw new BodyTooLargeError(limits.maxRequestBytes);
      const headers: Record<string, string> = {};
      request.headers.forEach((value, name) => (headers[name] = value));
      const url = new URL(request.url);
      const failures: string[] = [];
      for (const target of resolved.targets) {
        try {
          return await exchange(target, resolved, request.method, url.pathname + url.search, headers, bytes, signal, sendOptions?.maxResponseBytes ?? limits.maxResponseBytes);
        } catch (error) {
          if (sendOptions?.signal?.aborted) throw sendOptions.signal.reason;
          if (!(error instanceof ConnectFailure)) throw error;
          failures.push(`${target.host}:${target.port}: ${error.message}`);
          // Out of time while connecting: as unreachable as a refusal.
          if (signal.aborted) break;
        }
      }
      // None answered: look again next time, the delegation or the records may have changed.
      discovery.forget(destination);
      throw new FederationUnreachable(destination, `cannot connect to ${destination} (${failures.join('; ')})`);
    },
  };
}

/** A Node response as a fetch Response, its body read whole and bounded (by its declared length first). */
async function readResponse(response: IncomingMessage, limit: number): Promise<Response> {
  const declared = response.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) throw new BodyTooLargeError(limit);
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    total += chunk.byteLength;
    if (total > limit) throw new BodyTooLargeError(limit);
    chunks.push(chunk);
  }
  const headers = new Headers();
  for (let i = 0; i + 1 < response.rawHeaders.length; i += 2) headers.append(response.rawHeaders[i]!, response.rawHeaders[i + 1]!);
  const status = response.statusCode ?? 502;
  const nullBody = status === 204 || status === 304 || status < 200;
  const body = Buffer.concat(chunks);
  // A view of exactly the body: a small Buffer is a slice of Node's shared pool.
  return new Response(nullBody ? null : bodyOver(new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset, body.byteLength)), { status, headers });
}

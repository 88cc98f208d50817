/**
 * A `fetch` over node:https that trusts a test CA beside Node's roots, for clients in the test
 * process: Node 20's own fetch cannot be given a CA, and NODE_EXTRA_CA_CERTS is read only when a
 * process starts (children of a test get that instead). Bodies are read whole; `signal` aborts.
 */
import { Agent, request } from 'node:https';
import { rootCertificates } from 'node:tls';

export type HttpsFetch = typeof fetch & { close(): void };

export function httpsFetch(ca: string): HttpsFetch {
  const agent = new Agent({ keepAlive: true, ca: [...rootCertificates, ca] });
  const send = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const original = input instanceof Request ? input : undefined;
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const method = init?.method ?? original?.method ?? 'GET';
    const headers = new Headers(init?.headers ?? original?.headers);
    const bodyInit = init?.body ?? (original?.body ? await original.arrayBuffer() : undefined);
    const body = bodyInit == null ? undefined : Buffer.from(await new Response(bodyInit).arrayBuffer());
    if (body) headers.set('content-length', String(body.byteLength));
    const signal = init?.signal ?? original?.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      const req = request(url, { agent, method, headers: Object.fromEntries(headers), ...(signal ? { signal } : {}) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('error', reject);
        res.on('end', () => {
          const status = res.statusCode ?? 502;
          const responseHeaders = new Headers();
          for (let i = 0; i + 1 < res.rawHeaders.length; i += 2) responseHeaders.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          resolve(new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), { status, headers: responseHeaders }));
        });
      });
      req.on('error', reject);
      req.end(body);
    });
  };
  return Object.assign(send as typeof fetch, { close: () => agent.destroy() });
}

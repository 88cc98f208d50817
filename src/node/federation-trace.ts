/**
 * Every inbound server-server exchange as one JSON line in a file (`HEARTH_TRACE_FEDERATION=FILE`
 * for `npm run serve`): method, path, status and both bodies, for tests that check what crossed
 * between hosts in processes of their own against the spec, and for a person debugging a peer.
 * Written synchronously, so a line is there once the answer has gone out, whatever ends the process.
 */
import { appendFileSync } from 'node:fs';

type Inbound = (request: Request, remoteServerName: string | undefined) => Promise<Response>;

const parsed = (text: string): unknown => {
  if (text === '') return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { notJson: text.length };
  }
};

export function traceFederation(inbound: Inbound, file: string): Inbound {
  return async (request, remoteServerName) => {
    const requestText = request.body ? await request.clone().text() : '';
    const response = await inbound(request, remoteServerName);
    const json = response.headers.get('content-type')?.includes('json');
    const url = new URL(request.url);
    const line = {
      origin: remoteServerName,
      method: request.method,
      path: url.pathname + url.search,
      status: response.status,
      request: parsed(requestText),
      response: json ? parsed(await response.clone().text()) : undefined,
    };
    appendFileSync(file, `${JSON.stringify(line)}\n`);
    return response;
  };
}

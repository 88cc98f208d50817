import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One POST a push gateway of the test's own received, and how it answered. */
export interface GatewayPost {
  path: string;
  status: number;
  /** The notify body (push gateway API `POST /_matrix/push/v1/notify`). */
  body: any;
}

export interface PushGateway {
  /** `http://127.0.0.1:P/_matrix/push/v1/notify`, for a pusher's `data.url`. */
  url: string;
  /** Every POST, answered or not, in the order it came. */
  posts: GatewayPost[];
  /** The statuses still to answer with, one a POST (200 once they run out). */
  statuses: number[];
  /** Pushkeys the gateway names in its `rejected` answer, as a gateway does for an uninstalled app. */
  rejectedPushkeys: Set<string>;
  /** Resolves once `count` POSTs have come. */
  posted(count: number): Promise<GatewayPost[]>;
  /** The first POST that matches, once it has come. */
  postedWhere(matches: (post: GatewayPost) => boolean): Promise<GatewayPost>;
  /** The oldest POST not taken yet (that matches), once it has come; each is taken once. */
  next(matches?: (post: GatewayPost) => boolean): Promise<GatewayPost>;
  /** The POSTs `next` has not taken. */
  untaken(): GatewayPost[];
  close(): Promise<void>;
}

async function readJson(request: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8'));
}

/**
 * A push gateway on 127.0.0.1 that records what homeservers post to it. Sygnal, the reference
 * gateway, is not served by this machine's PyPI (PLATFORM-NOTES.md), so the tests keep this one,
 * which answers each POST with the next of `statuses` for the failure cases.
 */
export async function startPushGateway(statuses: number[] = []): Promise<PushGateway> {
  const posts: GatewayPost[] = [];
  const taken = new Set<GatewayPost>();
  const rejectedPushkeys = new Set<string>();
  const waiting: (() => void)[] = [];
  const arrival = () => new Promise<void>((resolve) => waiting.push(resolve));
  const server = createServer((request, response) => {
    void readJson(request).then((body) => {
      const status = statuses.shift() ?? 200;
      const pushkeys: string[] = (body.notification?.devices ?? []).map((d: { pushkey: string }) => d.pushkey);
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(status === 200 ? { rejected: pushkeys.filter((k) => rejectedPushkeys.has(k)) } : { errcode: 'M_UNKNOWN', error: 'scripted failure' }));
      posts.push({ path: request.url!, status, body });
      for (const wake of waiting.splice(0)) wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const gateway: PushGateway = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/_matrix/push/v1/notify`,
    posts,
    statuses,
    rejectedPushkeys,
    async posted(count) {
      while (posts.length < count) await arrival();
      return posts;
    },
    async postedWhere(matches) {
      for (;;) {
        const found = posts.find(matches);
        if (found) return found;
        await arrival();
      }
    },
    async next(matches = () => true) {
      const post = await gateway.postedWhere((p) => !taken.has(p) && matches(p));
      taken.add(post);
      return post;
    },
    untaken: () => posts.filter((p) => !taken.has(p)),
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  return gateway;
}

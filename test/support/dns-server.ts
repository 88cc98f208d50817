/**
 * A DNS server of a test's own on 127.0.0.1 (UDP), answering SRV questions from a table and
 * NXDOMAIN to anything else: enough for Node's dns.Resolver, given `setServers(['127.0.0.1:PORT'])`.
 * Written out (RFC 1035 §4, RFC 2782) rather than taken from a package: it is forty lines.
 */
import { createSocket } from 'node:dgram';
import type { AddressInfo, LookupFunction } from 'node:net';

export interface SrvAnswer {
  target: string;
  port: number;
  priority?: number;
  weight?: number;
}

export interface TestDnsServer {
  /** `127.0.0.1:PORT`, for Resolver.setServers. */
  address: string;
  /** Questions asked, as `TYPE name`. */
  asked: string[];
  srv: Map<string, SrvAnswer[]>;
  close(): Promise<void>;
}

const SRV = 33;

function encodeName(name: string): Buffer {
  const labels = name.replace(/\.$/, '').split('.').filter((l) => l !== '');
  return Buffer.concat([...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l, 'ascii')])), Buffer.from([0])]);
}

export async function startDnsServer(srv: Record<string, SrvAnswer[]> = {}): Promise<TestDnsServer> {
  const socket = createSocket('udp4');
  const table = new Map(Object.entries(srv));
  const asked: string[] = [];
  socket.on('message', (query, peer) => {
    if (query.length < 12) return;
    let at = 12;
    const labels: string[] = [];
    while (at < query.length && query[at]! > 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]!).toString('ascii'));
      at += 1 + query[at]!;
    }
    const questionEnd = at + 5;
    if (questionEnd > query.length) return;
    const type = query.readUInt16BE(at + 1);
    const name = labels.join('.').toLowerCase();
    asked.push(`${type === SRV ? 'SRV' : type} ${name}`);
    const records = type === SRV ? table.get(name) ?? [] : [];
    const answers = records.map((r) => {
      const target = encodeName(r.target);
      const rdata = Buffer.alloc(6);
      rdata.writeUInt16BE(r.priority ?? 10, 0);
      rdata.writeUInt16BE(r.weight ?? 0, 2);
      rdata.writeUInt16BE(r.port, 4);
      const head = Buffer.alloc(12);
      head.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      head.writeUInt16BE(SRV, 2);
      head.writeUInt16BE(1, 4); // IN
      head.writeUInt32BE(60, 6);
      head.writeUInt16BE(rdata.length + target.length, 10);
      return Buffer.concat([head, rdata, target]);
    });
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2);
    header.writeUInt16BE(0x8180 | (records.length === 0 ? 3 : 0), 2); // a response, recursion available; NXDOMAIN when nothing
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    socket.send(Buffer.concat([header, query.subarray(12, questionEnd), ...answers]), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(socket.address() as AddressInfo).port}`,
    asked,
    srv: table,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

/** A `lookup` for net/https that puts every name on this machine (127.0.0.1), as a test's names are. */
export const loopbackLookup: LookupFunction = (_host, options, callback) => {
  if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address: '127.0.0.1', family: 4 }]);
  else callback(null, '127.0.0.1', 4);
};

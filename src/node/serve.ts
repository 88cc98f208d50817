// `npm run serve -- --port 8008 --data ./hearth-data`: the homeserver on 127.0.0.1 for any Matrix client.
// Federation: `--listen /ip4/0.0.0.0/tcp/4001` (or `…/tcp/4002/ws`) and `--bootstrap /ip4/…/p2p/12D3…`,
// each repeatable. With no --listen the peer only dials out (bootstrap peers, peers it discovers, and
// the peers it knew before, from <data>/peers); others reach it over the connections it opens.
import './polyfills.ts';
import { parseArgs } from 'node:util';
import { startNodeHost } from './node-host.ts';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '8008' },
    data: { type: 'string', default: './hearth-data' },
    host: { type: 'string', default: '127.0.0.1' },
    'no-registration': { type: 'boolean', default: false },
    'no-rate-limits': { type: 'boolean', default: false },
    listen: { type: 'string', multiple: true, default: [] },
    bootstrap: { type: 'string', multiple: true, default: [] },
  },
});

const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port must be a port number, not ${values.port}`);
  process.exit(2);
}

const host = await startNodeHost({
  dataDir: values.data!,
  port,
  host: values.host!,
  registrationEnabled: !values['no-registration'],
  rateLimits: values['no-rate-limits'] ? false : undefined,
  log: (message, error) => console.error(message, error ?? ''),
  listen: values.listen,
  bootstrap: values.bootstrap,
});
console.log(`Hearth homeserver listening on ${host.url}`);
console.log(`server name: ${host.homeserver.serverName}`);
console.log(`peer ID: ${host.p2p.peerId}`);
for (const address of host.p2p.multiaddrs()) console.log(`libp2p listening on ${address}`);
console.log(`data: ${values.data}`);

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await host.close();
  process.exit(0);
};
process.on('SIGINT', () => void stop());
process.on('SIGTERM', () => void stop());

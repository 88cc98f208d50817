import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../scripts/build.ts';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { validateClientResponse } from '../support/spec-schema.ts';
import { api } from './harness.ts';

// The README's curl walk-through, run as a person pastes it: bash, curl and node against a Node host
// on a port of its own (PORT, as the README says to set it), so the README cannot drift from the server.

let dir: string;
let host: NodeHost;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'hearth-readme-'));
  host = await startNodeHost({ dataDir: dir, port: 0 });
});

afterAll(async () => {
  await host?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The README's shell block that registers alice and syncs: the curl walk-through. */
async function walkthrough(): Promise<string> {
  const readme = await readFile(join(PROJECT_ROOT, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
  const found = blocks.filter((block) => block.includes('/_matrix/client/v3/register') && block.includes('/sync'));
  expect(found, 'one curl walk-through in README.md').toHaveLength(1);
  return found[0]!;
}

/** curl -s prints each answer without a newline: split the output into its JSON documents. */
function jsonDocuments(text: string): unknown[] {
  const documents: unknown[] = [];
  let depth = 0;
  let start = -1;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') {
      if (depth++ === 0) start = i;
    } else if (c === '}' && --depth === 0) documents.push(JSON.parse(text.slice(start, i + 1)));
  }
  return documents;
}

describe('the README’s curl walk-through', () => {
  it('runs as written against a Node host on another port, and its last long-poll wakes for a new message', async () => {
    const script = await walkthrough();
    const port = new URL(host.url).port;
    expect(port).not.toBe('8008');
    // -x traces each command to stderr before it runs: the test sends a message once the long-poll is next.
    const child = spawn('bash', ['-euo', 'pipefail', '-xc', script], { env: { ...process.env, PORT: port }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    let sent: Promise<unknown> | undefined;
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (sent || !/^\+ curl .*sync\?since=/m.test(stderr)) return;
      // next_batch was kept before this line: whenever the message lands, the long-poll returns it. Sent as
      // alice's own device (its TOKEN and ROOM from the trace): a second sign-in would wake the sync by itself.
      const token = /^\+ TOKEN=(\S+)$/m.exec(stderr)![1]!;
      const roomId = /^\+ ROOM='?([^'\s]+)'?$/m.exec(stderr)![1]!;
      const path = `/_matrix/client/v3/rooms/${encodeURIComponent(roomId)}/send/m.room.message/t1`;
      sent = api(host, 'PUT', path, { token, body: { msgtype: 'm.text', body: 'while you wait' } });
    });
    const code = await new Promise<number | null>((done) => child.once('exit', done));
    expect(code, `${stdout}\n${stderr}`).toBe(0);
    expect(((await sent) as { status: number } | undefined)?.status).toBe(200);

    // What the block prints: /versions, register, the send, then the long-poll that woke.
    const [versions, registered, send, sync, ...rest] = jsonDocuments(stdout) as any[];
    expect(rest).toEqual([]);
    validateClientResponse('GET', '/_matrix/client/versions', 200, versions);
    expect(registered.user_id).toBe(`@alice:${host.homeserver.serverName}`);
    validateClientResponse('POST', '/_matrix/client/v3/register', 200, registered);
    expect(send.event_id).toMatch(/^\$/);
    validateClientResponse('GET', '/_matrix/client/v3/sync', 200, sync);
    const timelines = Object.values(sync.rooms?.join ?? {}).map((room: any) => room.timeline.events.map((e: any) => e.content.body));
    // Only what came after next_batch: not the walk-through's own "hello".
    expect(timelines).toEqual([['while you wait']]);
  });
});

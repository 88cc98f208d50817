import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startNodeHost } from '../../src/node/node-host.ts';
import { api, register } from './harness.ts';

// The Node host on real files: what it acknowledged survives a restart and a kill.

const directories: string[] = [];
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
  for (const dir of directories.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hearth-host-'));
  directories.push(dir);
  return dir;
}

const enc = encodeURIComponent;

describe('the Node host', () => {
  it('keeps its identity, accounts, rooms and sync tokens across a restart', async () => {
    const dir = await dataDir();
    const first = await startNodeHost({ dataDir: dir, port: 0, rateLimits: false });
    const alice = await register(first, 'alice');
    const roomId = (await api(first, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: { name: 'kept' } })).body.room_id;
    const since = (await api(first, 'GET', '/_matrix/client/v3/sync', { token: alice.accessToken })).body.next_batch;
    const serverName = first.homeserver.serverName;
    await first.close();

    const second = await startNodeHost({ dataDir: dir, port: 0, rateLimits: false });
    try {
      expect(second.homeserver.serverName).toBe(serverName);
      expect((await api(second, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/state/m.room.name`, { token: alice.accessToken })).body).toEqual({ name: 'kept' });
      await api(second, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/after`, { token: alice.accessToken, body: { msgtype: 'm.text', body: 'after restart' } });
      const sync = await api(second, 'GET', `/_matrix/client/v3/sync?since=${since}`, { token: alice.accessToken });
      expect(sync.body.rooms.join[roomId].timeline.events.map((e: any) => e.content.body)).toEqual(['after restart']);
    } finally {
      await second.close();
    }
  });

  it('refuses a second host on the same data directory', async () => {
    const dir = await dataDir();
    const first = await startNodeHost({ dataDir: dir, port: 0 });
    try {
      await expect(startNodeHost({ dataDir: dir, port: 0 })).rejects.toThrow(/lock|in use|another/i);
    } finally {
      await first.close();
    }
  });

  it('loses nothing it acknowledged when the process is killed', async () => {
    const dir = await dataDir();
    const start = () =>
      new Promise<{ child: ChildProcess; url: string }>((resolve, reject) => {
        const child = spawn(process.execPath, ['--import', 'tsx', 'src/node/serve.ts', '--port', '0', '--data', dir, '--no-rate-limits'], { stdio: ['ignore', 'pipe', 'pipe'] });
        children.push(child);
        let output = '';
        child.stdout!.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          const match = /listening on (http:\S+)/.exec(output);
          if (match) resolve({ child, url: match[1]! });
        });
        child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${output}`)));
      });
    const first = await start();
    const alice = await register(first, 'alice');
    const roomId = (await api(first, 'POST', '/_matrix/client/v3/createRoom', { token: alice.accessToken, body: {} })).body.room_id;
    const acknowledged: string[] = [];
    for (let i = 0; i < 25; i++) {
      const r = await api(first, 'PUT', `/_matrix/client/v3/rooms/${enc(roomId)}/send/m.room.message/k${i}`, { token: alice.accessToken, body: { msgtype: 'm.text', body: `k${i}` } });
      acknowledged.push(r.body.event_id);
    }
    first.child.kill('SIGKILL');
    await new Promise((resolve) => first.child.once('exit', resolve));

    const second = await start();
    const messages = await api(second, 'GET', `/_matrix/client/v3/rooms/${enc(roomId)}/messages?dir=b&limit=100`, { token: alice.accessToken });
    const stored = messages.body.chunk.map((e: any) => e.event_id);
    for (const id of acknowledged) expect(stored).toContain(id);
    second.child.kill('SIGTERM');
  });
});

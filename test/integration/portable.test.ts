import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import initSqlJs from 'sql.js';
import { startNodeHost, type NodeHost } from '../../src/node/node-host.ts';
import { serverNameFromSeed } from '../../src/crypto/identity.ts';
import { importNodeHomeserver } from '../../src/node/portable.ts';
import { writeArchive, type EntrySource } from '../../src/portable/index.ts';
import { api, register } from './harness.ts';
import { httpSyncer, longPollUntil, timelineHas } from '../support/sync-until.ts';
import { enc, PASSWORD, V3 } from '../support/client-calls.ts';

// `npm run export` while the host runs, `npm run import` into an empty folder, and the moved
// homeserver goes on: same name, same password, same room, its media, and federation with a peer.

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hearth-keep-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function host(dataDir: string, bootstrap: string[] = []): Promise<NodeHost> {
  const started = await startNodeHost({ dataDir, port: 0, listen: ['/ip4/127.0.0.1/tcp/0'], bootstrap, rateLimits: false });
  let closed = false;
  cleanups.push(async () => !closed && (await started.close()));
  return { ...started, close: async () => void ((closed = true), await started.close()) };
}

/** The compiled CLI beside serve.js, as `npm run export`/`import` run it; resolves with its exit code and what it printed. */
function cli(args: string[], passphrase = 'a long and happy passphrase'): Promise<{ code: number | null; output: string }> {
  const entry = join(dirname(inject('hearthServeEntry')), 'portable-cli.js');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [entry, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, HEARTH_PASSPHRASE: passphrase } });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

const send = async (server: { url: string }, token: string, roomId: string, body: string) => {
  const r = await api(server, 'PUT', `${V3}/rooms/${enc(roomId)}/send/m.room.message/${crypto.randomUUID()}`, { token, body: { msgtype: 'm.text', body } });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
};

describe('keep and move a Node homeserver', () => {
  it('exports while running, imports into an empty folder, and goes on there with its peer', async () => {
    const [dirA, dirB, dirC, files] = await Promise.all([tempDir(), tempDir(), tempDir(), tempDir()]);
    const a = await host(dirA);
    const b = await host(dirB, [a.p2p.multiaddrs()[0]!]);
    const alice = await register(a, 'alice');
    const bob = await register(b, 'bob');
    const created = await api(a, 'POST', `${V3}/createRoom`, { token: alice.accessToken, body: { name: 'Moving day', invite: [bob.userId] } });
    const roomId = created.body.room_id as string;
    const bobSync = httpSyncer(b, bob.accessToken);
    await longPollUntil(bobSync, (s) => !!s.rooms?.invite?.[roomId], { who: 'bob' });
    expect((await api(b, 'POST', `${V3}/join/${enc(roomId)}`, { token: bob.accessToken, body: {} })).status).toBe(200);
    for (const text of ['one', 'two', 'three']) await send(a, alice.accessToken, roomId, text);
    const picture = Uint8Array.from({ length: 1_500_000 }, (_, i) => (i * 7919) % 251);
    const upload = await fetch(`${a.url}/_matrix/media/v3/upload?filename=p.bin`, { method: 'POST', headers: { authorization: `Bearer ${alice.accessToken}`, 'content-type': 'application/octet-stream' }, body: picture });
    const mxc = ((await upload.json()) as { content_uri: string }).content_uri;
    let seenByBob = await longPollUntil(bobSync, timelineHas(roomId, 'three'), { who: 'bob' });

    // Export while A runs: through its control socket, the lock stays A's.
    const archive = join(files, 'home.hearth');
    const exported = await cli(['export', '--data', dirA, '--out', archive]);
    expect(exported.code, exported.output).toBe(0);
    expect(exported.output).toMatch(/asking it for a copy of its database/);
    expect(exported.output).toMatch(/writing: 100%/);
    expect(exported.output).toContain(`exported ${a.homeserver.serverName}`);
    expect((await readdir(dirA)).filter((f) => f.startsWith('export-'))).toEqual([]); // the copy is gone
    expect((await readFile(archive)).includes(Buffer.from('Moving day'))).toBe(false); // encrypted

    const serverName = a.homeserver.serverName;
    await a.close();

    // Refusals, each before anything is written.
    const wrong = await cli(['import', '--data', dirC, '--in', archive], 'not the passphrase');
    expect(wrong.code).toBe(1);
    expect(wrong.output).toMatch(/passphrase is wrong/);
    const cut = join(files, 'cut.hearth');
    const bytes = await readFile(archive);
    await writeFile(cut, bytes.subarray(0, bytes.byteLength - 100));
    const truncated = await cli(['import', '--data', dirC, '--in', cut]);
    expect(truncated.output).toMatch(/truncated/);
    const altered = join(files, 'altered.hearth');
    const flipped = Buffer.from(bytes);
    flipped[bytes.byteLength - 50]! ^= 0x40; // in the last of several 1 MiB parts
    await writeFile(altered, flipped);
    const tampered = await cli(['import', '--data', dirC, '--in', altered]);
    expect(tampered.output).toMatch(/damaged or was altered/);
    expect(await readdir(dirC)).toEqual([]);
    expect((await readdir(dirname(dirC))).filter((f) => f.includes('.importing-'))).toEqual([]);
    const full = await tempDir();
    await mkdir(join(full, 'something'));
    const notEmpty = await cli(['import', '--data', full, '--in', archive]);
    expect(notEmpty.output).toMatch(/is not empty/);
    expect(await readdir(full)).toEqual(['something']);

    const imported = await cli(['import', '--data', dirC, '--in', archive]);
    expect(imported.code, imported.output).toBe(0);
    expect(imported.output).toMatch(/Move, don\u2019t copy/);
    expect(imported.output).toMatch(/restoring: 100%/);
    expect(existsSync(join(dirC, 'identity.seed'))).toBe(true);

    // The moved homeserver: same name, the password signs in, the room, its messages and the media are there.
    const c = await host(dirC, [b.p2p.multiaddrs()[0]!]);
    expect(c.homeserver.serverName).toBe(serverName);
    const login = await api(c, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'alice' }, password: PASSWORD } });
    expect(login.status, JSON.stringify(login.body)).toBe(200);
    const token = login.body.access_token as string;
    const history = await api(c, 'GET', `${V3}/rooms/${enc(roomId)}/messages?dir=b&limit=20`, { token });
    expect(history.body.chunk.filter((e: any) => e.type === 'm.room.message').map((e: any) => e.content.body).reverse()).toEqual(['one', 'two', 'three']);
    const download = await fetch(`${c.url}/_matrix/client/v1/media/download/${mxc.slice(6)}`, { headers: { authorization: `Bearer ${token}` } });
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).equals(picture)).toBe(true); // (toEqual on 1.5 MB takes seconds)

    // Federation goes on, both ways.
    await send(c, token, roomId, 'from the new home');
    seenByBob = await longPollUntil(bobSync, timelineHas(roomId, 'from the new home'), { who: 'bob', since: seenByBob.next_batch });
    await send(b, bob.accessToken, roomId, 'welcome back');
    await longPollUntil(httpSyncer(c, token), timelineHas(roomId, 'welcome back'), { who: 'alice on the new host' });
  }, 120_000);

  it('exports a stopped folder, and refuses a folder with no homeserver and an existing out file', async () => {
    const [dir, files] = await Promise.all([tempDir(), tempDir()]);
    const a = await host(dir);
    await register(a, 'carol');
    const serverName = a.homeserver.serverName;
    await a.close();
    const out = join(files, 'stopped.hearth');
    const exported = await cli(['export', '--data', dir, '--out', out]);
    expect(exported.code, exported.output).toBe(0);
    expect(exported.output).not.toMatch(/asking it/);
    expect(exported.output).toContain(`exported ${serverName}`);
    expect((await cli(['export', '--data', dir, '--out', out])).output).toMatch(/exists already/);
    expect((await cli(['export', '--data', files, '--out', join(files, 'x')])).output).toMatch(/holds no homeserver/);
    const c = await tempDir();
    expect((await cli(['import', '--data', join(c, 'new'), '--in', out])).code).toBe(0);
    const moved = await host(join(c, 'new'));
    expect(moved.homeserver.serverName).toBe(serverName);
    expect((await api(moved, 'POST', `${V3}/login`, { body: { type: 'm.login.password', identifier: { type: 'm.id.user', user: 'carol' }, password: PASSWORD } })).status).toBe(200);
  }, 60_000);

  it('imports a database entry that begins with the last few bytes of a frame', async () => {
    const image = new (await initSqlJs()).Database().export();
    const seed = crypto.getRandomValues(new Uint8Array(32));
    const dir = await tempDir();
    // Frames this small put the database's first bytes, at some size, in a piece shorter than SQLite's 100-byte header.
    for (const chunkBytes of [190, 200, 210, 220, 230, 240]) {
      const parts: Uint8Array[] = [];
      const entries: EntrySource[] = [{ kind: 'identity', name: '', size: 32, read: () => [seed] }, { kind: 'database', name: '', size: image.byteLength, read: () => [image] }];
      await writeArchive({ passphrase: 'p', serverName: await serverNameFromSeed(seed), createdBy: 'node', iterations: 1, chunkBytes, entries, write: (bytes) => void parts.push(new Uint8Array(bytes)) });
      const file = join(dir, `${chunkBytes}.hearth`);
      await writeFile(file, Buffer.concat(parts));
      await importNodeHomeserver({ dataDir: join(dir, String(chunkBytes)), input: file, passphrase: 'p' });
    }
  });
});

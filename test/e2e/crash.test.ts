import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { copyFile, cp, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { serveStatic, type StaticServer } from '../../scripts/static-server.ts';
import { launchBrowserProcess, type BrowserProcess } from './browser-process.ts';
import type { Engine } from './browsers.ts';
import { startXvfb } from './webkit.ts';

// Durability in every engine (issue 39): what the homeserver in the page acknowledged survives the browser
// being killed. Each engine runs on a profile kept in a folder of the test's own; the page sends a message,
// and the moment its send has answered 200 the browser's whole process group gets SIGKILL (no unload, no
// chance to flush). Started again on the same profile, the core opens from IndexedDB and the message is there:
// the answer waited for the commit to reach the browser's storage. What a test here cannot cause is a crash
// of the OS itself; against that each acknowledged commit asks IndexedDB for durability 'strict' (Firefox's
// default, and Chromium's since 121, is 'relaxed': flushed to the OS, not to the disk).
//
// No driver: the browsers are launched as they are (browser-process.ts), WebKitGTK's MiniBrowser outside
// automation mode, where alone it keeps website data on disk. The page under test is the built Hearth page,
// in a frame of a probe page (fixtures/crash-probe.html) that calls its homeserver and reports here.

const ENGINES: Engine[] = ['chromium', 'firefox', 'webkit'];

let dist: string;
let site: StaticServer;
let reports: Server;
let reportUrl: string;
let display: { display: string; process: ChildProcess } | undefined;
const received: { run: string; report: any }[] = [];
const arrived = new Set<() => void>();

beforeAll(async () => {
  dist = await mkdtemp(join(tmpdir(), 'hearth-e2e-crash-'));
  await cp(inject('hearthDist'), dist, { recursive: true });
  await copyFile(join(import.meta.dirname, 'fixtures', 'crash-probe.html'), join(dist, 'crash-probe.html'));
  site = await serveStatic(dist, 0, '127.0.0.1', { config: { bootstrap: [], allowPrivateAddresses: true } });
  reports = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      received.push({ run: new URL(request.url!, 'http://x').searchParams.get('run') ?? '', report: JSON.parse(body || 'null') });
      for (const wake of arrived) wake();
      response.writeHead(204, { 'access-control-allow-origin': '*' }).end();
    });
  });
  reports.listen(0, '127.0.0.1');
  await once(reports, 'listening');
  reportUrl = `http://127.0.0.1:${(reports.address() as AddressInfo).port}/report`;
  display = await startXvfb();
}, 60_000);

afterAll(async () => {
  reports?.close();
  await site?.close();
  if (display && display.process.exitCode === null) {
    display.process.kill();
    await once(display.process, 'exit');
  }
  if (dist) await rm(dist, { recursive: true, force: true });
});

/** The report of run `run`, once it arrives; a report that the probe failed throws. */
async function reportOf(run: string): Promise<any> {
  for (;;) {
    const found = received.find((r) => r.run === run);
    if (found) {
      if (found.report?.phase === 'failed') throw new Error(`${run}: ${found.report.error}`);
      return found.report;
    }
    await new Promise<void>((resolve) => {
      const wake = () => (arrived.delete(wake), resolve());
      arrived.add(wake);
    });
  }
}

for (const engine of ENGINES) describe(`durability in ${engine}`, () => {
  let profile: string;
  let browser: BrowserProcess | undefined;

  beforeAll(async () => {
    profile = await mkdtemp(join(tmpdir(), `hearth-e2e-crash-${engine}-`));
  });

  afterAll(async () => {
    await browser?.killGroup();
    if (profile) await rm(profile, { recursive: true, force: true });
  });

  const probe = (run: string, query: Record<string, string>) => {
    const params = new URLSearchParams({ ...query, run, report: `${reportUrl}?run=${run}` });
    return `${site.url}/crash-probe.html?${params}`;
  };

  it('a message acknowledged before the browser’s process group is killed is there when the browser starts again on its profile', async () => {
    const text = `acknowledged in ${engine}, then killed`;
    browser = await launchBrowserProcess(engine, profile, probe(`${engine}-write`, { phase: 'write', text }), display?.display);
    const written = await reportOf(`${engine}-write`);
    expect(written).toMatchObject({ phase: 'written', eventId: expect.stringMatching(/^\$/) });
    // Acknowledged: now the crash, with nothing given a chance to finish.
    await browser.killGroup();
    browser = undefined;
    // MiniBrowser kept its website data in the profile's folder (its IndexedDB among it), not in the test runner's home.
    if (engine === 'webkit') expect(existsSync(join(profile, 'data', 'webkitgtk-4.1', 'MiniBrowser'))).toBe(true);

    browser = await launchBrowserProcess(engine, profile, probe(`${engine}-read`, { phase: 'read', token: written.token, room: written.roomId }), display?.display);
    const read = await reportOf(`${engine}-read`);
    expect(read.whoami).toMatch(/^@kit:/);
    expect(read.status).toBe(200);
    expect(read.bodies).toContainEqual({ eventId: written.eventId, body: text });
    await browser.killGroup();
    browser = undefined;
  }, 240_000);
});

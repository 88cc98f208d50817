import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './chromium.ts';
import { startFixtureServer, type FixtureServer } from './fixture-server.ts';

// The signing backends and spec vectors, run in real Chromium: the page, a Worker
// and the service worker all use this code, and WebCrypto Ed25519 must be there.
let server: FixtureServer;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  server = await startFixtureServer();
  browser = await launchChromium();
  page = await browser.newPage();
  await page.goto(server.url('test/e2e/fixtures/crypto.html'));
  await page.waitForFunction(() => (globalThis as { hearthReady?: boolean }).hearthReady === true);
});

afterAll(async () => {
  await browser?.close();
  await server?.close();
});

describe('crypto in Chromium', () => {
  it('detects WebCrypto Ed25519 and signs the spec vector with both backends', async () => {
    const result = await page.evaluate(async () => {
      const { crypto: c } = (globalThis as any).hearth;
      const seed = c.decodeBase64('YJDBA9Xnr2sVqXD9Vj7XVUnmFZcZrlw8Md7kMW+3XA1');
      const backend = await c.defaultEd25519Backend();
      const out: Record<string, string> = { backend: backend.name };
      for (const b of [backend, c.tweetnaclBackend]) {
        const key = await b.keyFromSeed(seed);
        const signed = await c.signJson({ one: 1, two: 'Two' }, 'domain', 'ed25519:1', key);
        out[b.name] = signed.signatures.domain['ed25519:1'];
        out[b.name + '-verifies'] = String(await c.verifyJsonSignature(signed, 'domain', 'ed25519:1', key.publicKey, b));
      }
      return out;
    });
    const expected = 'KqmLSbO39/Bzb0QIYE82zqLwsA+PDzYIpIRA2sRQ4sL53+sN6/fpNSoqE7BP7vBZhG6kYdD13EIMJpvhJI+6Bw';
    expect(result).toEqual({
      backend: 'webcrypto',
      webcrypto: expected,
      'webcrypto-verifies': 'true',
      tweetnacl: expected,
      'tweetnacl-verifies': 'true',
    });
  });

  it('canonicalises by code point and computes v4+ event IDs', async () => {
    const result = await page.evaluate(() => {
      const { crypto: c, events: e } = (globalThis as any).hearth;
      const event = {
        room_id: '!x:domain', sender: '@a:domain', origin: 'domain', origin_server_ts: 1000000, signatures: {},
        hashes: { sha256: '5jM4wQpv6lnBo7CLIghJuHdW+s2CMBJPUOGOC89ncos' }, type: 'X', content: {},
        prev_events: [], auth_events: [], depth: 3, unsigned: { age_ts: 1000000 },
      };
      return {
        order: c.canonicalJson({ '\u{1F408}': 1, '\uffff': 2, '\ue000': 3 }),
        v10: e.computeEventId(event, e.requireRoomVersion('10')),
        v11: e.computeEventId(event, e.requireRoomVersion('11')),
      };
    });
    expect(result).toEqual({
      order: '{"\ue000":3,"\uffff":2,"\u{1F408}":1}',
      v10: '$8yif6p8EqgoSten2BLje9ntKm720NyFLWQv9tn8memc',
      v11: '$70O_oKlXzFbkfu0KE88USi98DjSWrOELrPj-8tisl8I',
    });
  });
});

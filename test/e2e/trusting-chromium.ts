import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { assertChromiumInstalled, CHROMIUM_FLAGS, CHROMIUM_PATH } from './chromium.ts';

/**
 * Chromium as a person's browser meets a public HTTPS site: it trusts a test CA the way
 * a person's system does, through the NSS database in its HOME (`~/.pki/nssdb`, filled with
 * `certutil` from Debian's libnss3-tools), never by ignoring certificate errors; and it
 * resolves the site's names (`hearth.test`) to the test's addresses with `--host-resolver-rules`,
 * since there is no DNS here. With `netns` it runs inside that network namespace (`ip netns exec`),
 * as a browser on another machine; playwright drives it over a pipe, so no port crosses namespaces.
 */
export interface TrustingChromium {
  browser: Browser;
  close(): Promise<void>;
}

export interface TrustingChromiumOptions {
  /** The CA certificate file (PEM) to trust. */
  caFile: string;
  /** Name → address, e.g. `{ 'hearth.test': '127.0.0.1' }`. */
  hosts: Record<string, string>;
  /** A network namespace to run in (`ip netns exec NAME`). */
  netns?: string;
}

export function assertCertutilInstalled(): void {
  try {
    execFileSync('certutil', ['-H'], { stdio: 'ignore' });
  } catch (error) {
    // certutil -H exits 1 after printing its help; only a missing binary is ENOENT.
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error('The public-origin browser tests trust a test CA through an NSS database, made with `certutil`, which is missing. Install it with: apt-get install -y libnss3-tools');
    }
  }
}

export async function launchTrustingChromium(options: TrustingChromiumOptions): Promise<TrustingChromium> {
  assertChromiumInstalled();
  assertCertutilInstalled();
  const home = await mkdtemp(join(tmpdir(), 'hearth-chromium-home-'));
  try {
    const nssdb = join(home, '.pki', 'nssdb');
    mkdirSync(nssdb, { recursive: true });
    execFileSync('certutil', ['-N', '-d', `sql:${nssdb}`, '--empty-password'], { stdio: 'pipe' });
    // C,,: a CA trusted to issue server certificates.
    execFileSync('certutil', ['-A', '-d', `sql:${nssdb}`, '-n', 'Hearth test CA', '-t', 'C,,', '-i', options.caFile], { stdio: 'pipe' });
    const rules = Object.entries(options.hosts).map(([name, address]) => `MAP ${name} ${address}`).join(', ');
    let executablePath = CHROMIUM_PATH;
    if (options.netns) {
      if (!/^[\w.-]+$/.test(options.netns + CHROMIUM_PATH.replace(/\//g, ''))) throw new Error(`unexpected characters in ${options.netns} or ${CHROMIUM_PATH}`);
      executablePath = join(home, 'chromium-in-netns');
      writeFileSync(executablePath, `#!/bin/sh\nexec ip netns exec ${options.netns} ${CHROMIUM_PATH} "$@"\n`);
      chmodSync(executablePath, 0o755);
    }
    const browser = await chromium.launch({
      executablePath,
      args: [...CHROMIUM_FLAGS, `--host-resolver-rules=${rules}`],
      env: { ...process.env, HOME: home },
    });
    return {
      browser,
      close: async () => {
        await browser.close();
        await rm(home, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(home, { recursive: true, force: true });
    throw error;
  }
}

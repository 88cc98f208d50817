import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { Builder, type WebDriver } from 'selenium-webdriver';

// A folder module of a CommonJS package, which an ES import cannot name: required.
const { DriverService } = createRequire(import.meta.url)('selenium-webdriver/remote') as typeof import('selenium-webdriver/remote');

// WebKit, Safari's engine, as Debian ships it: WebKitGTK's MiniBrowser, driven by WebKitWebDriver over
// classic WebDriver (selenium-webdriver), in a virtual X display (Xvfb): MiniBrowser has no headless mode.

export const MINIBROWSER_PATH = process.env.HEARTH_MINIBROWSER ?? '/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser';
const WEBKIT_DRIVER_PATH = '/usr/bin/WebKitWebDriver';
const XVFB_PATH = '/usr/bin/Xvfb';

export function assertWebKitInstalled(): void {
  const missing = [
    [MINIBROWSER_PATH, 'libwebkit2gtk-4.1-0'],
    [WEBKIT_DRIVER_PATH, 'webkit2gtk-driver'],
    [XVFB_PATH, 'xvfb'],
  ].filter(([path]) => !existsSync(path!));
  if (missing.length > 0) {
    throw new Error(
      `Browser tests need WebKitGTK's MiniBrowser, WebKitWebDriver and Xvfb; missing: ${missing.map(([path]) => path).join(', ')}.\n` +
        `Install them with: apt-get update && apt-get install -y ${missing.map(([, pkg]) => pkg).join(' ')}\n` +
        `(or point HEARTH_MINIBROWSER at another MiniBrowser).`,
    );
  }
}

/** A virtual display on a number Xvfb chose itself (`-displayfd`): it answers once the server is ready. */
export async function startXvfb(): Promise<{ display: string; process: ChildProcess }> {
  const xvfb = spawn(XVFB_PATH, ['-displayfd', '1', '-screen', '0', '1280x1024x24', '-nolisten', 'tcp'], { stdio: ['ignore', 'pipe', 'ignore'] });
  let output = '';
  const display = await new Promise<string>((resolve, reject) => {
    xvfb.once('exit', (code) => reject(new Error(`Xvfb exited with ${code} before it had a display`)));
    xvfb.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('\n')) resolve(`:${output.trim()}`);
    });
  });
  return { display, process: xvfb };
}

/** One WebKit browser: a display, a driver, and sessions, each a MiniBrowser with storage of its own. */
export interface WebKit {
  newSession(): Promise<WebDriver>;
  close(): Promise<void>;
}

export async function launchWebKit(): Promise<WebKit> {
  assertWebKitInstalled();
  const xvfb = await startXvfb();
  const service = new DriverService.Builder(WEBKIT_DRIVER_PATH).setLoopback(true).setEnvironment({ ...(process.env as Record<string, string>), DISPLAY: xvfb.display }).build();
  const sessions: WebDriver[] = [];
  const close = async () => {
    for (const session of sessions) await session.quit().catch(() => {});
    await service.kill().catch(() => {});
    if (xvfb.process.exitCode === null) {
      xvfb.process.kill();
      await once(xvfb.process, 'exit');
    }
  };
  try {
    const url = await service.start();
    return {
      newSession: async () => {
        const session = await new Builder()
          .usingServer(url)
          .withCapabilities({ browserName: 'MiniBrowser', 'webkitgtk:browserOptions': { binary: MINIBROWSER_PATH, args: ['--automation'] } })
          .build();
        sessions.push(session);
        return session;
      },
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

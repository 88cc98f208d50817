import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { readdirSync, readFileSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Engine } from './browsers.ts';
import { assertChromiumInstalled, CHROMIUM_FLAGS, CHROMIUM_PATH } from './chromium.ts';
import { assertFirefoxInstalled, FIREFOX_PATH } from './firefox.ts';
import { assertWebKitInstalled, MINIBROWSER_PATH } from './webkit.ts';

// A browser this test launched itself, with no driver, on a profile kept in a folder: the way to kill it as a
// crash would (SIGKILL to its whole process group, every helper process with it) and start it again on the same
// data. No driver, because WebKitGTK's MiniBrowser keeps website data only outside automation mode (under
// --automation, which WebKitWebDriver needs, its session is always ephemeral), and because a driver's own
// connection is no part of what a crash test is about. The page itself reports what it did (fixtures/crash-probe.html).

export interface BrowserProcess {
  readonly pid: number;
  /** SIGKILL to the process group, then waits until no process of it is left. */
  killGroup(): Promise<void>;
}

/** Firefox preferences for a profile of the test's own: no crash-restored tabs (a restored probe would run again), no first-run pages. */
const FIREFOX_PREFS = {
  'browser.sessionstore.resume_from_crash': false,
  'browser.shell.checkDefaultBrowser': false,
  'browser.startup.homepage_override.mstone': 'ignore',
  'datareporting.policy.dataSubmissionEnabled': false,
  'toolkit.telemetry.reportingpolicy.firstRun': false,
  'browser.aboutwelcome.enabled': false,
};

/**
 * Launches `engine` on `profile` (a folder that outlives it) opening `url`, as the leader of a process group of
 * its own. WebKit needs an X display (`display`); its website data goes under `profile` through XDG_DATA_HOME,
 * where MiniBrowser keeps it ($XDG_DATA_HOME/webkitgtk-4.1/MiniBrowser).
 */
export async function launchBrowserProcess(engine: Engine, profile: string, url: string, display?: string): Promise<BrowserProcess> {
  let command: string;
  let args: string[];
  const env: NodeJS.ProcessEnv = { ...process.env };
  switch (engine) {
    case 'chromium':
      assertChromiumInstalled();
      command = CHROMIUM_PATH;
      args = [...CHROMIUM_FLAGS, `--user-data-dir=${profile}`, url];
      break;
    case 'firefox':
      assertFirefoxInstalled();
      await mkdir(profile, { recursive: true });
      await writeFile(join(profile, 'user.js'), Object.entries(FIREFOX_PREFS).map(([name, value]) => `user_pref(${JSON.stringify(name)}, ${JSON.stringify(value)});\n`).join(''));
      command = FIREFOX_PATH;
      args = ['--headless', '--no-remote', '--profile', profile, url];
      break;
    case 'webkit':
      assertWebKitInstalled();
      if (!display) throw new Error('WebKit needs an X display');
      command = MINIBROWSER_PATH;
      args = [url];
      Object.assign(env, { DISPLAY: display, XDG_DATA_HOME: join(profile, 'data'), XDG_CACHE_HOME: join(profile, 'cache') });
      break;
  }
  const child: ChildProcess = spawn(command, args, { detached: true, stdio: 'ignore', env });
  await once(child, 'spawn');
  const pid = child.pid!;
  const exited = once(child, 'exit');
  return {
    pid,
    killGroup: async () => {
      try {
        process.kill(-pid, 'SIGKILL');
      } catch {
        // the group is gone already
      }
      await exited;
      // Helpers that outlive the leader for a moment (renderers, WebKit's network process) are killed with it; wait until none is left.
      while (groupAlive(pid)) await new Promise((resolve) => setTimeout(resolve, 20));
    },
  };
}

/** Whether a process of the group is still running (a zombie, killed and waiting for a parent to reap it, is not). */
function groupAlive(pgid: number): boolean {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp …: comm may hold spaces and parentheses, so read after its last ')'.
    const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(pgrp) === pgid && state !== 'Z') return true;
  }
  return false;
}

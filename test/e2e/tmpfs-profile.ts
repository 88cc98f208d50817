import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { assertChromiumInstalled, CHROMIUM_FLAGS, CHROMIUM_PATH } from './chromium.ts';

/**
 * Chromium with its profile on a small tmpfs of its own, so that the quota it grants an origin
 * (60 % of the size of the profile's file system) is small and real writes hit it.
 *
 * The tmpfs is mounted inside a private mount namespace that Chromium runs in (`unshare`): as root
 * `unshare --mount`, as anyone else `unshare --user --map-root-user --mount` (an unprivileged user
 * namespace). The mount exists only while Chromium runs and goes with its last process, so no test
 * run, however it ends, leaves a mount behind. A machine
 * that allows neither makes this throw (the test fails, never skips), saying what to enable.
 */
export interface TmpfsProfile {
  context: BrowserContext;
  /** The tmpfs's size, bytes. */
  size: number;
  close(): Promise<void>;
}

/** Which `unshare` flags mount a tmpfs here, tried on a scratch folder; undefined: none. */
function namespaceFlags(scratch: string): string[] | undefined {
  const candidates = process.getuid?.() === 0 ? [['--mount'], ['--user', '--map-root-user', '--mount']] : [['--user', '--map-root-user', '--mount']];
  for (const flags of candidates) {
    try {
      execFileSync('unshare', [...flags, 'mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', scratch], { stdio: 'pipe' });
      return flags;
    } catch {
      // not allowed here: try the next way
    }
  }
  return undefined;
}

export async function launchOnTmpfs(sizeMiB: number): Promise<TmpfsProfile> {
  assertChromiumInstalled();
  const base = await mkdtemp(join(tmpdir(), 'hearth-tmpfs-profile-'));
  const profile = join(base, 'profile');
  mkdirSync(profile);
  // Paths go into a shell line below: only plain characters.
  if (!/^[\w/.-]+$/.test(profile + CHROMIUM_PATH)) throw new Error(`unexpected characters in ${profile} or ${CHROMIUM_PATH}`);
  const flags = namespaceFlags(profile);
  if (!flags) {
    await rm(base, { recursive: true, force: true });
    throw new Error(
      'The full-quota browser test runs Chromium with its profile on a small tmpfs, mounted in a private mount namespace, ' +
        'and this machine allows neither `unshare --mount` (as root) nor `unshare --user --map-root-user --mount` (unprivileged user namespaces). ' +
        'Run the tests as root, or enable user namespaces (sysctl user.max_user_namespaces > 0; on Debian/Ubuntu kernel.unprivileged_userns_clone=1, ' +
        'and kernel.apparmor_restrict_unprivileged_userns=0 where AppArmor restricts them).',
    );
  }
  // Chromium, started inside the namespace, on the tmpfs mounted over its profile folder.
  const wrapper = join(base, 'chromium-on-tmpfs');
  writeFileSync(wrapper, `#!/bin/sh\nexec unshare ${flags.join(' ')} sh -c 'mount -t tmpfs -o size=${sizeMiB}m tmpfs ${profile} && exec ${CHROMIUM_PATH} "$@"' chromium "$@"\n`);
  chmodSync(wrapper, 0o755);
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, { executablePath: wrapper, args: CHROMIUM_FLAGS, headless: true });
  } catch (error) {
    await rm(base, { recursive: true, force: true });
    throw error;
  }
  return {
    context,
    size: sizeMiB * 1024 * 1024,
    close: async () => {
      await context.close();
      await rm(base, { recursive: true, force: true });
    },
  };
}

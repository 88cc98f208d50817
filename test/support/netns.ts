/**
 * Network namespaces of a test's own (`ip netns`), joined by veth pairs: machines on a network that
 * the test builds, cuts, degrades (`tc netem`) and puts behind NATs (`iptables`), with nothing reaching
 * beyond them. Each namespace is named `h<pid>-<name>`, so parallel runs never meet; `close()` ends every
 * process still inside them (all started by the test) and deletes them, which deletes their veths.
 * Needs root (or CAP_NET_ADMIN) and iproute2: `assertNetworkNamespaces` says so in one sentence
 * where they are missing, so such a test fails clearly rather than skipping.
 */
import { execFileSync, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';

export interface Namespace {
  /** The name `ip netns` knows it by. */
  readonly name: string;
  /** Runs a command inside, synchronously; returns its stdout (throws with its stderr on failure). */
  run(command: string, args: string[]): string;
  /** Starts a process inside (`ip netns exec NAME …`). */
  spawn(command: string, args: string[], options?: SpawnOptions): ChildProcess;
}

export interface Lab {
  /** A new namespace with its loopback up. */
  namespace(name: string): Namespace;
  /**
   * A veth pair between two namespaces (or a namespace and this one, `'host'`), each end given an
   * address (`10.240.0.1/24`) and brought up. Returns the devices' names, `[at a, at b]`.
   */
  link(a: Namespace | 'host', aAddress: string, b: Namespace | 'host', bAddress: string): [string, string];
  close(): void;
}

const ip = (args: string[]): string => execFileSync('ip', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** Throws, saying what is missing, unless this process may make network namespaces (root, iproute2). */
export function assertNetworkNamespaces(what: string): void {
  const probe = `h${process.pid}-probe`;
  try {
    ip(['netns', 'add', probe]);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? '`ip` (iproute2) is not installed' : String((error as { stderr?: string }).stderr ?? error).trim();
    throw new Error(`${what} builds its network in Linux network namespaces (ip netns, veth pairs, iptables), which needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and iproute2, iptables, coturn: ${reason}. Run the tests as root, with apt-get install -y iproute2 iptables coturn.`);
  }
  ip(['netns', 'del', probe]);
}

export function createLab(): Lab {
  const namespaces: Namespace[] = [];
  let veths = 0;
  const hostDevices: string[] = [];
  const lab: Lab = {
    namespace(short) {
      const name = `h${process.pid}-${short}`;
      ip(['netns', 'add', name]);
      const ns: Namespace = {
        name,
        run: (command, args) => execFileSync('ip', ['netns', 'exec', name, command, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }),
        spawn: (command, args, options = {}) => spawn('ip', ['netns', 'exec', name, command, ...args], options),
      };
      namespaces.push(ns);
      ns.run('ip', ['link', 'set', 'lo', 'up']);
      return ns;
    },
    link(a, aAddress, b, bAddress) {
      const n = ++veths;
      // Interface names are at most 15 characters, and the host's must not clash with another run's.
      const aDev = a === 'host' ? `h${process.pid % 100000}v${n}a` : `v${n}a`;
      const bDev = b === 'host' ? `h${process.pid % 100000}v${n}b` : `v${n}b`;
      const tmpA = `h${process.pid % 100000}t${n}a`;
      const tmpB = `h${process.pid % 100000}t${n}b`;
      // Made in this namespace under unique names, then moved and renamed.
      ip(['link', 'add', tmpA, 'type', 'veth', 'peer', 'name', tmpB]);
      for (const [end, tmp, dev, address] of [[a, tmpA, aDev, aAddress], [b, tmpB, bDev, bAddress]] as const) {
        if (end === 'host') {
          ip(['link', 'set', tmp, 'name', dev]);
          ip(['addr', 'add', address, 'dev', dev]);
          ip(['link', 'set', dev, 'up']);
          hostDevices.push(dev);
        } else {
          ip(['link', 'set', tmp, 'netns', end.name]);
          end.run('ip', ['link', 'set', tmp, 'name', dev]);
          end.run('ip', ['addr', 'add', address, 'dev', dev]);
          end.run('ip', ['link', 'set', dev, 'up']);
        }
      }
      return [aDev, bDev];
    },
    close() {
      for (const ns of namespaces.splice(0)) {
        // Whatever the test started in there and left running (each started by this test, in its own namespace).
        const pids = (() => {
          try {
            return ip(['netns', 'pids', ns.name]).split(/\s+/).filter(Boolean).map(Number);
          } catch {
            return [];
          }
        })();
        for (const pid of pids) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
        try {
          ip(['netns', 'del', ns.name]);
        } catch {
          // already gone
        }
      }
      // A host-side veth goes with its namespace end; one whose namespace was never made is removed here.
      for (const dev of hostDevices.splice(0)) {
        try {
          ip(['link', 'del', dev]);
        } catch {
          // gone with its pair
        }
      }
    },
  };
  return lab;
}

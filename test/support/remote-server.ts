/**
 * A homeserver that is not Hearth (Synapse, Dendrite) run as a child process for the interop tests:
 * its output kept as its log, up once `/_matrix/client/versions` answers over HTTPS, and kept
 * running or stopped, halted (as a crash leaves it) and started again on the same data folder and
 * port. What differs between implementations, their config and command, is the caller's.
 */
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';

/** What every remote server of a test offers, whichever implementation it is. */
export interface RemoteServer {
  /** Which implementation and version, for messages: `Synapse 1.163.2`. */
  label: string;
  /** `localhost:PORT`, or `127.0.0.1:PORT`. */
  name: string;
  port: number;
  /** `https://localhost:PORT`, its client and federation APIs both. */
  url: string;
  /** A fetch that trusts the test's CA, for the client API. */
  fetch: typeof fetch;
  dataDir: string;
  /** The process ID of the server running now (a restart changes it). */
  pid(): number;
  /** Everything it wrote to its output, across restarts. */
  log(): string;
  /** Kills the process and keeps its data folder and port, as a crash would leave them. */
  halt(): Promise<void>;
  /** Starts it again after halt() on the same data, name and port; answers once it is up. */
  resume(): Promise<void>;
  /** Kills it and removes its data folder. */
  stop(): Promise<void>;
  /** Milliseconds from its process's start to its first answer of /versions (with a new data folder: making the database and key too). */
  startMs: number;
  /** Ends the process (SIGTERM, a clean stop, unless told) and starts it again on the same data folder and port; resolves once it answers /versions, with the milliseconds from the new process's start to that. */
  restart(signal?: 'SIGTERM' | 'SIGKILL'): Promise<number>;
}

export interface RemoteServerSpec extends Pick<RemoteServer, 'label' | 'name' | 'port' | 'url' | 'fetch' | 'dataDir'> {
  /** The command that runs it, in `dataDir` (its data and config, removed by stop()). */
  command: string;
  args: string[];
  env?: Record<string, string>;
}

const running = new Set<RemoteServer['stop']>();

/** Runs a remote server's command and answers once it is up; a process that exits first throws with its log. */
export async function runRemoteServer(spec: RemoteServerSpec): Promise<RemoteServer> {
  let output = '';
  let child: ServerProcess | undefined;
  const halt = async (signal: 'SIGTERM' | 'SIGKILL' = 'SIGKILL') => {
    await child?.kill(signal);
    child = undefined;
  };
  const stop = async () => {
    running.delete(stop);
    await halt();
    await rm(spec.dataDir, { recursive: true, force: true, maxRetries: 5 });
  };
  /** Starts the process on the data folder and port; answers the milliseconds from its start to its first /versions. */
  const launch = async (): Promise<number> => {
    const started = performance.now();
    child = spawnServer(spec, (chunk) => (output += chunk));
    try {
      await untilUp(child, spec.url, spec.fetch);
    } catch (error) {
      await halt();
      throw new Error(`${spec.label} ${(error as Error).message} before it answered /_matrix/client/versions; its log:\n${output}`);
    }
    return performance.now() - started;
  };
  running.add(stop);
  let startMs: number;
  try {
    startMs = await launch();
  } catch (error) {
    await stop();
    throw error;
  }
  const { label, name, port, url, fetch, dataDir } = spec;
  return {
    label, name, port, url, fetch, dataDir, startMs,
    pid: () => child!.pid,
    log: () => output,
    halt: () => halt(),
    resume: async () => {
      if (!child) await launch();
    },
    stop,
    restart: async (signal = 'SIGTERM') => {
      await halt(signal);
      return launch();
    },
  };
}

/** Stops every remote server still running, one whose start failed a test's hook time-out too (for afterAll). */
export async function stopAllRemoteServers(): Promise<void> {
  await Promise.all([...running].map((stop) => stop()));
}

interface ServerProcess {
  pid: number;
  exited: Promise<string>;
  gone(): string | undefined;
  kill(signal: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

function spawnServer(spec: RemoteServerSpec, log: (chunk: string) => void): ServerProcess {
  const child = spawn(spec.command, spec.args, { cwd: spec.dataDir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...spec.env } });
  child.stdout.on('data', (chunk: Buffer) => log(chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => log(chunk.toString()));
  let gone: string | undefined;
  const exited = new Promise<string>((resolve) => {
    child.once('exit', (code, signal) => resolve((gone = `exited (${code ?? signal})`)));
    child.once('error', (error) => resolve((gone = `could not start (${error.message})`)));
  });
  return {
    pid: child.pid!,
    exited,
    gone: () => gone,
    kill: async (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      await exited;
    },
  };
}

/** Up when the client API answers; a server that exits first failed to start (thrown as how it exited). */
async function untilUp(server: ServerProcess, url: string, fetch: typeof globalThis.fetch): Promise<void> {
  for (;;) {
    const gone = server.gone();
    if (gone) throw new Error(gone);
    const answered = await fetch(`${url}/_matrix/client/versions`).then((r) => r.ok, () => false);
    if (answered) return;
    // Nothing tells when the server listens but its answering: ask again soon (20 ms, so a bench's start-up figure is close).
    await Promise.race([server.exited, new Promise((resolve) => setTimeout(resolve, 20))]);
  }
}

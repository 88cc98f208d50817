import { randomBytes } from 'node:crypto';
import { chmod, unlink } from 'node:fs/promises';
import { createServer, request } from 'node:http';
import { join } from 'node:path';

/**
 * `<data>/control.sock`: how `npm run export` reaches a host that runs on the data folder. The
 * host holds the database open exclusively (native SQLite, `locking_mode = EXCLUSIVE`, and the
 * `LOCK` file), so no second process can read it; over this socket the host itself copies its
 * database to a file at one commit (`POST /snapshot`), and the export reads the rest (seed, media,
 * peer store) from the folder, as those are files that are only ever replaced whole. Only who
 * may write to the data folder may connect (the socket is 0600), and it does nothing else.
 */
export const CONTROL_SOCKET = 'control.sock';
/** Unix socket paths are limited to about 108 bytes. */
const MAX_SOCKET_PATH = 100;

export interface ControlHandlers {
  /** Copies the database, consistent at one commit, to `file`. */
  snapshot(file: string): Promise<void>;
}

export interface ControlSocket {
  close(): Promise<void>;
}

export async function startControlSocket(dataDir: string, handlers: ControlHandlers, log?: (message: string) => void): Promise<ControlSocket | undefined> {
  const path = join(dataDir, CONTROL_SOCKET);
  if (path.length > MAX_SOCKET_PATH) {
    log?.(`no control socket: ${path} is too long for one; npm run export needs this host stopped`);
    return undefined;
  }
  // We hold the database lock: a socket file left here is a dead host's.
  await unlink(path).catch(() => undefined);
  const server = createServer((req, res) => {
    const answer = (status: number, body: object) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    if (req.method !== 'POST' || req.url !== '/snapshot') return answer(404, { errcode: 'M_UNRECOGNIZED', error: 'the control socket answers POST /snapshot only' });
    const file = join(dataDir, `export-${randomBytes(8).toString('hex')}.sqlite`);
    handlers.snapshot(file).then(
      () => answer(200, { file }),
      (error: unknown) => {
        void unlink(file).catch(() => undefined);
        answer(500, { errcode: 'M_UNKNOWN', error: `could not copy the database: ${(error as Error).message}` });
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => resolve());
  });
  await chmod(path, 0o600);
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Asks the host running on dataDir for a copy of its database; resolves with the file it wrote (the caller removes it). */
export function requestSnapshot(dataDir: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: join(dataDir, CONTROL_SOCKET), method: 'POST', path: '/snapshot' }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        try {
          const body = JSON.parse(text) as { file?: string; error?: string };
          if (res.statusCode === 200 && body.file) resolve(body.file);
          else reject(new Error(body.error ?? `the host answered ${res.statusCode}`));
        } catch {
          reject(new Error(`the host answered ${res.statusCode} with something that is not JSON`));
        }
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) =>
      reject(new Error(`the homeserver in ${dataDir} is running but its control socket does not answer (${error.code ?? error.message}); stop it and export again`)),
    );
    req.end();
  });
}

/**
 * nginx (Debian's nginx-light) as a test's HTTPS front: a static host serving the built page under a
 * path prefix, and a reverse proxy that ends TLS in front of a Node peer's plain WebSocket listener:
 * what README "Host it" tells a person to set up, run here as written there. It runs in the foreground
 * (`daemon off`) with a prefix folder of the test's own, in a network namespace when asked.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { existsSync, watch } from 'node:fs';

export const NGINX = process.env.HEARTH_NGINX ?? '/usr/sbin/nginx';

export interface NginxSite {
  /** The host name the certificate is for. */
  serverName: string;
  port: number;
  /** Serve `root` at `prefix/` (a static host), with `config` as `prefix/hearth-config.json`. */
  static?: { root: string; prefix: string; config?: unknown };
  /** Proxy everything to this plain-HTTP upstream (`127.0.0.1:4001`), WebSocket upgrades included. */
  proxyTo?: string;
}

export interface Nginx {
  log(): Promise<string>;
  close(): Promise<void>;
}

export function assertNginxInstalled(): void {
  if (spawnSync(NGINX, ['-v'], { stdio: 'ignore' }).error) {
    throw new Error(`The public-origin tests serve the page and proxy the peer with nginx, missing at ${NGINX}. Install it with: apt-get install -y nginx-light (or point HEARTH_NGINX at another).`);
  }
}

/** The server block README "Host it" gives for a peer behind a proxy (the upstream and names filled in). */
export function proxyBlock(site: { serverName: string; port: number; upstream: string; cert: string; key: string }): string {
  return `server {
    listen ${site.port} ssl;
    server_name ${site.serverName};
    ssl_certificate ${site.cert};
    ssl_certificate_key ${site.key};
    location / {
      proxy_pass http://${site.upstream};
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto https;
      # A libp2p connection is quiet for long stretches: do not cut it after nginx's default 60 s.
      proxy_read_timeout 1d;
      proxy_send_timeout 1d;
    }
  }`;
}

export async function startNginx(sites: NginxSite[], tls: { cert: string; key: string }, options: { netns?: string } = {}): Promise<Nginx> {
  assertNginxInstalled();
  const dir = await mkdtemp(join(tmpdir(), 'hearth-nginx-'));
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  await writeFile(certFile, tls.cert);
  await writeFile(keyFile, tls.key, { mode: 0o600 });
  const blocks: string[] = [];
  for (const [i, site] of sites.entries()) {
    if (site.proxyTo) {
      blocks.push(proxyBlock({ serverName: site.serverName, port: site.port, upstream: site.proxyTo, cert: certFile, key: keyFile }));
      continue;
    }
    const { root, prefix, config } = site.static!;
    const configFile = join(dir, `hearth-config-${i}.json`);
    if (config !== undefined) await writeFile(configFile, JSON.stringify(config));
    blocks.push(`server {
    listen ${site.port} ssl;
    server_name ${site.serverName};
    ssl_certificate ${certFile};
    ssl_certificate_key ${keyFile};
    ${config !== undefined ? `location = ${prefix}/hearth-config.json { alias ${configFile}; add_header Cache-Control no-cache; }` : ''}
    location ${prefix}/ { alias ${root}/; }
  }`);
  }
  // As root, nginx's workers would run as nobody, who cannot read the test's private temporary folders.
  const conf = `${process.getuid?.() === 0 ? 'user root;' : ''}
pid ${dir}/nginx.pid;
error_log ${dir}/error.log info;
worker_processes 1;
events { worker_connections 256; }
http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log ${dir}/access.log;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  ${blocks.join('\n  ')}
}
`;
  await writeFile(join(dir, 'nginx.conf'), conf);
  const command = options.netns ? ['ip', ['netns', 'exec', options.netns, NGINX]] as const : [NGINX, []] as const;
  const child: ChildProcess = spawn(command[0], [...command[1], '-p', dir, '-c', join(dir, 'nginx.conf'), '-g', 'daemon off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // nginx writes its pid file once its listening sockets are bound (or exits, saying why).
  await pidFileOrExit(dir, exited, () => stderr);
  const readLog = async (name: string) => (await import('node:fs/promises')).readFile(join(dir, name), 'utf8').catch(() => '');
  return {
    log: async () => `${await readLog('error.log')}\n${await readLog('access.log')}`,
    close: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves once `dir/nginx.pid` exists; rejects if nginx exits first. */
async function pidFileOrExit(dir: string, exited: Promise<void>, output: () => string): Promise<void> {
  const watcher = watch(dir);
  try {
    const appeared = new Promise<void>((resolve) => {
      watcher.on('change', () => existsSync(join(dir, 'nginx.pid')) && resolve());
      if (existsSync(join(dir, 'nginx.pid'))) resolve();
    });
    const gone = exited.then(() => {
      throw new Error(`nginx exited before it was up:\n${output()}`);
    });
    await Promise.race([appeared, gone]);
  } finally {
    watcher.close();
  }
}

/**
 * A certificate authority of a test's own, made with the machine's `openssl`: a CA and leaf
 * certificates it signs for the names a test serves. Its PEM goes to an agent's extra CAs in
 * process, or to a child's NODE_EXTRA_CA_CERTS.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCa {
  /** The CA certificate (PEM) and the file it is in, for NODE_EXTRA_CA_CERTS. */
  cert: string;
  certFile: string;
  /** A key and certificate for `names` (DNS names, or IP addresses), signed by this CA. */
  issue(names: string[]): { key: string; cert: string };
  dispose(): void;
}

const openssl = (dir: string, args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export function createTestCa(name = 'Hearth Test CA'): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'hearth-ca-'));
  openssl(dir, ['req', '-x509', ...EC, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  let serial = 0;
  return {
    cert: readFileSync(join(dir, 'ca.pem'), 'utf8'),
    certFile: join(dir, 'ca.pem'),
    issue(names) {
      const n = ++serial;
      const alt = names.map((host) => (/^[\d.]+$|:/.test(host) ? `IP:${host}` : `DNS:${host}`)).join(',');
      writeFileSync(join(dir, `leaf${n}.ext`), `subjectAltName=${alt}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`);
      openssl(dir, ['req', ...EC, '-keyout', `leaf${n}.key`, '-out', `leaf${n}.csr`, '-subj', `/CN=${names[0]}`]);
      openssl(dir, ['x509', '-req', '-in', `leaf${n}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-set_serial', String(1000 + n),
        '-out', `leaf${n}.pem`, '-days', '2', '-extfile', `leaf${n}.ext`]);
      return { key: readFileSync(join(dir, `leaf${n}.key`), 'utf8'), cert: readFileSync(join(dir, `leaf${n}.pem`), 'utf8') };
    },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/**
 * The WebRTC-Direct listener's certificate, kept in `<data>/webrtc-direct-certificate.json` (0600).
 * A browser dials a WebRTC-Direct peer by its address, which carries the certificate's hash
 * (`…/webrtc-direct/certhash/<hash>/p2p/…`): that address is what a site writes into its
 * hearth-config.json, so the hash must not change. @libp2p/webrtc 6.0.33 left to itself makes a new
 * certificate at every start (it keeps the key only with a keychain service) and renews it every 14
 * days (its renewal timer cannot be set further off: Node's timers end at 24.8 days). A certificate
 * it is given is used as it is and never renewed, so we make one once, valid for ten years: the
 * browser checks a WebRTC peer's certificate only against the hash (and Noise proves the peer ID).
 */
import * as x509 from '@peculiar/x509';
import { base64url } from 'multiformats/bases/base64';
import { sha256 } from 'multiformats/hashes/sha2';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileDurably } from './file-persistence.ts';

export interface WebRTCDirectCertificate {
  /** PKCS#8 PEM of the ECDSA P-256 key. */
  privateKey: string;
  /** The certificate, PEM. */
  pem: string;
  /** multibase base64url of the SHA-256 multihash of the certificate's DER: what the address carries. */
  certhash: string;
}

const FILE = 'webrtc-direct-certificate.json';
const TEN_YEARS_MS = 10 * 365 * 24 * 60 * 60 * 1000;

export async function loadOrCreateWebRTCDirectCertificate(dataDir: string): Promise<WebRTCDirectCertificate> {
  const path = join(dataDir, FILE);
  try {
    const kept = JSON.parse(await readFile(path, 'utf8')) as Partial<WebRTCDirectCertificate>;
    if (typeof kept.privateKey === 'string' && typeof kept.pem === 'string' && typeof kept.certhash === 'string') return kept as WebRTCDirectCertificate;
    throw new Error(`${path} is not a WebRTC-Direct certificate`);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  x509.cryptoProvider.set(globalThis.crypto);
  const algorithm = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = await crypto.subtle.generateKey(algorithm, true, ['sign', 'verify']);
  const notBefore = new Date(Date.now() - 60_000);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString('hex'),
    name: 'CN=hearth-webrtc-direct',
    notBefore,
    notAfter: new Date(notBefore.getTime() + TEN_YEARS_MS),
    signingAlgorithm: algorithm,
    keys,
    extensions: [new x509.BasicConstraintsExtension(false, undefined, true)],
  });
  const pkcs8 = Buffer.from(await crypto.subtle.exportKey('pkcs8', keys.privateKey)).toString('base64');
  const made: WebRTCDirectCertificate = {
    privateKey: ['-----BEGIN PRIVATE KEY-----', ...(pkcs8.match(/.{1,64}/g) ?? []), '-----END PRIVATE KEY-----'].join('\n'),
    pem: cert.toString('pem'),
    certhash: base64url.encode((await sha256.digest(new Uint8Array(cert.rawData))).bytes),
  };
  await writeFileDurably(path, new TextEncoder().encode(JSON.stringify(made)));
  return made;
}

import { decodeBase64 } from '../../src/crypto/base64.ts';

/** The spec's test signing key (appendices §Cryptographic Test Vectors). */
export const SPEC_SEED = decodeBase64('YJDBA9Xnr2sVqXD9Vj7XVUnmFZcZrlw8Md7kMW+3XA1');
export const SPEC_PUBLIC_KEY_B64 = 'XGX0JRS2Af3be3knz2fBiRbApjm2Dh61gXDJA8kcJNI';
export const SPEC_SERVER = 'domain';
export const SPEC_KEY_ID = 'ed25519:1';

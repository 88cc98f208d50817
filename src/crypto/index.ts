export * from './base64.ts';
export * from './canonical-json.ts';
export * from './ed25519.ts';
export * from './sha256.ts';
export * from './signing.ts';
export * from './random.ts';
export * from './identity.ts';

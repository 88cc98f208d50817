/**
 * What this implementation calls itself to other servers (`GET /_matrix/federation/v1/version`).
 * The version is package.json's; a test keeps the two equal (src/ cannot import package.json: the
 * Node build's root is src/).
 */
export const IMPLEMENTATION = { name: 'Hearth', version: '0.1.0' } as const;

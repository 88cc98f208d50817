import { describe, expect, it } from 'vitest';
import { transportByName } from './transport-by-name.ts';
import type { FederationTransport } from './transport.ts';

describe('choosing the transport by the destination', () => {
  it('sends hex names over the Hearth transport and every other name over HTTPS', async () => {
    const used: string[] = [];
    const named = (name: string): FederationTransport => ({ send: async (destination) => (used.push(`${name} ${destination}`), new Response('{}')) });
    const transport = transportByName({ hearth: named('libp2p'), https: named('https') });
    const hex = 'ab'.repeat(32);
    for (const destination of [hex, 'example.org', 'localhost:8448', '[::1]', 'AB'.repeat(32)]) await transport.send(destination, new Request('http://x/'));
    expect(used).toEqual([`libp2p ${hex}`, 'https example.org', 'https localhost:8448', 'https [::1]', `https ${'AB'.repeat(32)}`]);
  });
});

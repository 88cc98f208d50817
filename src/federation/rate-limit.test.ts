import { afterEach, describe, expect, it } from 'vitest';
import { federatedServers } from '../../test/support/federated-homeservers.ts';
import { signingPeer } from '../../test/support/signing-peer.ts';
import { validateFederationResponse } from '../../test/support/spec-schema.ts';

// Federation rate limits per origin (issue 24, "Hostile input and load"): a server that floods
// transactions or key queries is slowed with 429 M_LIMIT_EXCEEDED and retry_after_ms; the others
// are not, and a real homeserver's traffic stays within the default.

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

describe('federation rate limits', () => {
  it('slows a flooding origin with 429 M_LIMIT_EXCEEDED and retry_after_ms, and no other', async () => {
    let now = 1_000_000;
    const net = await federatedServers(1, { federationRateLimits: { perSecond: 1, burst: 5 }, now: () => now });
    close = net.close;
    const a = net.servers[0]!;
    const alice = await a.register('alice');
    const [flooder, other] = [await signingPeer(), await signingPeer()];
    const send = (peer: typeof flooder, i: number) =>
      peer.call(a.homeserver, 'PUT', `/_matrix/federation/v1/send/t${i}`, { origin: peer.name, origin_server_ts: now, pdus: [], edus: [] });
    const keyQuery = (peer: typeof flooder) =>
      peer.call(a.homeserver, 'POST', '/_matrix/federation/v1/user/keys/query', { device_keys: { [alice.userId]: [] } });

    for (let i = 0; i < 4; i++) expect((await send(flooder, i)).status).toBe(200);
    expect((await keyQuery(flooder)).status).toBe(200);
    const refused = [await send(flooder, 5), await keyQuery(flooder)];
    for (const answer of refused) {
      expect(answer.status).toBe(429);
      expect(answer.body).toMatchObject({ errcode: 'M_LIMIT_EXCEEDED', retry_after_ms: expect.any(Number) });
      expect(answer.body.retry_after_ms).toBeGreaterThan(0);
    }
    validateFederationResponse('PUT', '/_matrix/federation/v1/send/t5', refused[0]!.status, refused[0]!.body);

    // Another server is not slowed by the flood.
    expect((await send(other, 0)).status).toBe(200);
    expect((await keyQuery(other)).status).toBe(200);
    // Once the time it was told to wait has passed, the flooder is served again.
    now += refused[0]!.body.retry_after_ms;
    expect((await send(flooder, 6)).status).toBe(200);
  });

  it('does not limit requests that fail authentication against the origin they claim', async () => {
    let now = 1_000_000;
    const net = await federatedServers(1, { federationRateLimits: { perSecond: 1, burst: 1 }, now: () => now });
    close = net.close;
    const a = net.servers[0]!;
    const [victim, forger] = [await signingPeer(), await signingPeer()];
    // Requests claiming the victim's name but not signed by its key are refused as unauthenticated, and use up nothing of its allowance.
    for (let i = 0; i < 3; i++) {
      const forged = await forger.call(a.homeserver, 'PUT', `/_matrix/federation/v1/send/f${i}`, { origin: victim.name, origin_server_ts: now, pdus: [], edus: [] }, {
        authorization: `X-Matrix origin="${victim.name}",destination="${a.serverName}",key="ed25519:hearth",sig="AAAA"`, remoteServerName: undefined,
      });
      expect(forged.status).toBe(401);
    }
    expect((await victim.call(a.homeserver, 'PUT', '/_matrix/federation/v1/send/v0', { origin: victim.name, origin_server_ts: now, pdus: [], edus: [] })).status).toBe(200);
  });
});

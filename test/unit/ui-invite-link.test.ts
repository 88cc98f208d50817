import { describe, expect, it } from 'vitest';
import { inviteLink, invitedUserFromHash, serverOf, shortServerName, shortUserId } from '../../src/ui/ids.ts';

const server = 'ab'.repeat(32);

describe('the page’s invite links', () => {
  it('round-trip a Matrix ID through the fragment', () => {
    const link = inviteLink(`@alice:${server}`, 'http://127.0.0.1:8080');
    expect(link).toBe(`http://127.0.0.1:8080/#invite=@alice:${server}`);
    expect(invitedUserFromHash(new URL(link).hash)).toBe(`@alice:${server}`);
    // Some apps percent-encode what they pass on.
    expect(invitedUserFromHash(`#invite=${encodeURIComponent(`@alice:${server}`)}`)).toBe(`@alice:${server}`);
  });

  it('ignore fragments that are not an invite to a Matrix ID', () => {
    for (const hash of ['', '#', '#invite=', '#invite=alice', '#invite=@alice', '#invite=%E0%A4%A', '#room=!x:y', '#invite=@a b:c']) expect(invitedUserFromHash(hash), hash).toBeUndefined();
  });

  it('shorten server names to their ends', () => {
    expect(shortServerName(server)).toBe('abababab\u2026abab');
    expect(shortServerName('localhost')).toBe('localhost');
    expect(serverOf(`@bob:${server}`)).toBe(server);
    expect(shortUserId(`@bob:${server}`)).toBe('@bob:abababab\u2026abab');
  });
});

describe('how a peer is reached, in words', () => {
  it('names the transport of each kind of address', async () => {
    const { linkKind, addressHost, addressPeerId } = await import('../../src/ui/ids.ts');
    const id = '12D3KooWSPw3CyjSi5bSsntFi7qPoFgttmpEqCoVgZQua36Q43cX';
    expect(linkKind(`/dns4/peer.example.org/tcp/443/wss/p2p/${id}`)).toBe('secure WebSockets');
    expect(linkKind(`/dns4/peer.example.org/tcp/443/tls/ws/p2p/${id}`)).toBe('secure WebSockets');
    expect(linkKind(`/ip4/127.0.0.1/tcp/4001/ws/p2p/${id}`)).toBe('WebSockets');
    expect(linkKind(`/ip4/10.0.0.1/tcp/4001/ws/p2p/${id}/p2p-circuit/webrtc/p2p/${id}`)).toBe('WebRTC');
    expect(linkKind(`/webrtc/p2p/${id}`)).toBe('WebRTC');
    expect(linkKind(`/ip4/10.0.0.1/tcp/4001/ws/p2p/${id}/p2p-circuit/p2p/${id}`)).toBe('relay');
    expect(linkKind(`/ip4/203.0.113.5/udp/4001/webrtc-direct/certhash/uEiA/p2p/${id}`)).toBe('WebRTC-Direct');
    expect(linkKind(`/ip4/127.0.0.1/tcp/4001/p2p/${id}`)).toBe('TCP');
    expect(addressHost(`/dns4/peer.example.org/tcp/443/wss/p2p/${id}`)).toBe('peer.example.org:443');
    expect(addressPeerId(`/dns4/peer.example.org/tcp/443/wss/p2p/${id}`)).toBe(id);
    expect(addressPeerId('/dns4/peer.example.org/tcp/443/wss')).toBeUndefined();
  });
});

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

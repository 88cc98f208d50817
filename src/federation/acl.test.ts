import { describe, expect, it } from 'vitest';
import { serverAllowedByAcl } from './acl.ts';

describe('server ACLs', () => {
  it('allows everyone when the room has no ACL', () => {
    expect(serverAllowedByAcl(undefined, 'evil.example')).toBe(true);
  });

  it('applies deny before allow, with globs, case-insensitively and without ports', () => {
    const acl = { allow: ['*'], deny: ['evil.example', '*.bad.example', 'b?t.example'] };
    expect(serverAllowedByAcl(acl, 'good.example')).toBe(true);
    expect(serverAllowedByAcl(acl, 'evil.example')).toBe(false);
    expect(serverAllowedByAcl(acl, 'EVIL.example:8448')).toBe(false);
    expect(serverAllowedByAcl(acl, 'a.bad.example')).toBe(false);
    expect(serverAllowedByAcl(acl, 'bad.example')).toBe(true);
    expect(serverAllowedByAcl(acl, 'bit.example')).toBe(false);
    expect(serverAllowedByAcl(acl, 'boat.example')).toBe(true);
  });

  it('denies whoever no allow entry matches, and treats dots and other characters literally', () => {
    expect(serverAllowedByAcl({ deny: [] }, 'good.example')).toBe(false);
    expect(serverAllowedByAcl({ allow: ['good.example'] }, 'goodxexample')).toBe(false);
    expect(serverAllowedByAcl({ allow: ['a+b.example'] }, 'a+b.example')).toBe(true);
  });

  it('refuses IP literals only when allow_ip_literals is false', () => {
    const open = { allow: ['*'] };
    expect(serverAllowedByAcl(open, '1.2.3.4:8448')).toBe(true);
    expect(serverAllowedByAcl({ ...open, allow_ip_literals: false }, '1.2.3.4')).toBe(false);
    expect(serverAllowedByAcl({ ...open, allow_ip_literals: false }, '[::1]:8448')).toBe(false);
    expect(serverAllowedByAcl({ ...open, allow_ip_literals: 'no' }, '1.2.3.4')).toBe(true);
  });
});

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { HOST_NODE_FLAGS } from '../../scripts/host-flags.ts';

const scripts = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts;

describe("the Node host's V8 flags", () => {
  it.each(['serve', 'start'])('are what `npm run %s` gives node', (name) => {
    // The V8 flags come first, before `--import tsx` or the script.
    const flags = /(?:^|&& )node ((?:--(?!import)\S+ )*)/.exec(scripts[name]!)?.[1]?.trim().split(' ') ?? [];
    expect(flags).toEqual([...HOST_NODE_FLAGS]);
  });

  it('are accepted by this Node (a V8 flag that a Node upgrade dropped would stop the host starting)', () => {
    expect(execFileSync(process.execPath, [...HOST_NODE_FLAGS, '-e', 'process.stdout.write("up")'], { encoding: 'utf8' })).toBe('up');
  });
});

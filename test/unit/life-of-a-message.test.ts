import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

// docs/LIFE-OF-A-MESSAGE.md follows one message file by file: it must name files that exist, and
// its count must be what it lists (issue 37).
const ROOT = new URL('../../', import.meta.url);
const doc = readFileSync(new URL('docs/LIFE-OF-A-MESSAGE.md', ROOT), 'utf8');

/** Every `code span` that looks like a path of ours: a top folder of the repository, then a file with an extension. */
const PATH = /`((?:src|worker|test|docs|scripts|bench)\/[\w./-]+\.\w+)`/g;

describe('docs/LIFE-OF-A-MESSAGE.md', () => {
  it('names only files that exist', () => {
    const named = [...new Set([...doc.matchAll(PATH)].map((m) => m[1]!))];
    expect(named.length).toBeGreaterThan(40);
    expect(named.filter((path) => !existsSync(new URL(path, ROOT)))).toEqual([]);
  });

  it('gives at the top the number of files the message passes through: one numbered step each, none named twice', () => {
    const section = doc.slice(doc.indexOf('<!-- page-to-page: begin -->'), doc.indexOf('<!-- page-to-page: end -->'));
    const steps = [...section.matchAll(/^(\d+)\. `([^`]+)`/gm)];
    expect(steps.map((m) => Number(m[1]))).toEqual(steps.map((_, i) => i + 1));
    const files = steps.map((m) => m[2]!);
    expect(new Set(files).size).toBe(files.length);
    const stated = /passes through (\d+) files of Hearth/.exec(doc);
    expect(Number(stated?.[1])).toBe(files.length);
  });
});

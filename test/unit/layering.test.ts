import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseOptions, type ICruiseResult, type IViolation } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import { beforeAll, describe, expect, it } from 'vitest';
import { ARCHITECTURE_MD, layersDiagram, withDiagram } from '../../scripts/layers-diagram.ts';
import { layers } from '../../scripts/layers.mjs';

// The layering check (.dependency-cruiser.mjs, made from scripts/layers.mjs) as `npm run lint:deps` runs it.
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const FIXTURE = fileURLToPath(new URL('../fixtures/layering', import.meta.url));

let options: ICruiseOptions;
beforeAll(async () => {
  options = await extractDepcruiseOptions(`${ROOT}.dependency-cruiser.mjs`);
});

async function violationsIn(baseDir: string): Promise<IViolation[]> {
  const roots = ['src', 'worker', 'scripts'].filter((d) => readdirSync(baseDir).includes(d));
  const { output } = await cruise(roots, { ...options, baseDir });
  return (output as ICruiseResult).summary.violations.filter((v) => v.rule.severity !== 'ignore');
}

describe('the layering check', () => {
  it('fails on a cycle, an upward import, the page importing its host and the core importing a platform\'s module, and on nothing else', async () => {
    const found = await violationsIn(FIXTURE);
    const cycles = found.filter((v) => v.rule.name === 'no-circular');
    expect(cycles.length).toBeGreaterThan(0);
    for (const cycle of cycles) {
      expect([cycle.from, cycle.to].sort()).toEqual(['src/rooms/ring-a.ts', 'src/rooms/ring-b.ts']);
    }
    const others = found.filter((v) => v.rule.name !== 'no-circular').map((v) => `${v.rule.name}: ${v.from} → ${v.to}`);
    expect(others.sort()).toEqual([
      'down-only-src-rooms: src/rooms/upward.ts → src/client/api.ts',
      'isolated-src-ui: src/ui/page.ts → worker/host.ts',
      'platform-node-builtins: src/rooms/platform.ts → fs',
    ]);
  }, 30_000);

  it('finds no violation in the tree', async () => {
    const found = await violationsIn(ROOT);
    expect(found.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`)).toEqual([]);
  }, 60_000);

  it('places every folder and module at the top of src/ in a layer', () => {
    const listed = new Set(layers.flatMap((l) => l.folders));
    const entries = readdirSync(`${ROOT}src`, { withFileTypes: true })
      .filter((e) => e.isDirectory() || (e.name.endsWith('.ts') && !e.name.endsWith('.test.ts')))
      .map((e) => `src/${e.name}`);
    expect(entries.filter((f) => !listed.has(f))).toEqual([]);
    expect(['worker', 'scripts'].filter((f) => !listed.has(f))).toEqual([]);
  });
});

describe('the layers picture in docs/ARCHITECTURE.md', () => {
  it('is the one drawn from scripts/layers.mjs', () => {
    const doc = readFileSync(ARCHITECTURE_MD, 'utf8');
    expect(doc).toContain(layersDiagram());
    expect(withDiagram(doc)).toBe(doc);
  });
});

describe('file size (issue 37)', () => {
  /** Past this a file holds several concerns: split it along a seam. Tests are not held to it. */
  const MAX_LINES = 500;

  it(`no file in src/ or worker/ is over ${MAX_LINES} lines`, () => {
    const files = ['src', 'worker'].flatMap((dir) =>
      readdirSync(`${ROOT}${dir}`, { recursive: true, encoding: 'utf8' })
        .filter((name) => /\.ts$/.test(name) && !name.endsWith('.test.ts'))
        .map((name) => `${dir}/${name}`));
    expect(files.length).toBeGreaterThan(100);
    const long = files.map((file) => ({ file, lines: readFileSync(`${ROOT}${file}`, 'utf8').split('\n').length - 1 })).filter(({ lines }) => lines > MAX_LINES);
    expect(long).toEqual([]);
  });
});

// dependency-cruiser's configuration for Hearth: the layering of scripts/layers.mjs as rules.
// `npm run lint:deps` checks src/, worker/ and scripts/ with it, and `npm test` runs that first;
// `npx tsx scripts/layers-diagram.ts` redraws the picture of the same rules in docs/ARCHITECTURE.md.
//
// Known violations: while the fixes of issue 19 land, the violations the tree had when the check
// came are listed in .dependency-cruiser-known-violations.json and reported as ignored, not as
// errors; any other violation fails (`npm run lint:deps -- --no-ignore-known` shows them all). The
// aim is no such file: once the list is empty, delete it.
// To rebuild it, delete it and run `npx depcruise-baseline src worker scripts --config .dependency-cruiser.mjs`.
import { existsSync, readFileSync } from 'node:fs';
import { layerRules } from './scripts/layers.mjs';

const KNOWN = new URL('./.dependency-cruiser-known-violations.json', import.meta.url);
const useKnown = existsSync(KNOWN) && !process.argv.includes('--no-ignore-known');

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: layerRules(),
  options: {
    doNotFollow: { path: 'node_modules' },
    // Type-only imports count: a cycle of types is still a cycle.
    tsPreCompilationDeps: true,
    moduleSystems: ['es6', 'cjs'],
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      extensions: ['.ts', '.mjs', '.js', '.cjs', '.d.ts', '.d.mts'],
    },
    ...(useKnown ? { knownViolations: JSON.parse(readFileSync(KNOWN, 'utf8')) } : {}),
  },
};

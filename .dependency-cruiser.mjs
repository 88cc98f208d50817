// dependency-cruiser's configuration for Hearth: the layering of scripts/layers.mjs as rules.
// `npm run lint:deps` checks src/, worker/ and scripts/ with it, and `npm test` runs that first;
// `npx tsx scripts/layers-diagram.ts` redraws the picture of the same rules in docs/ARCHITECTURE.md.

import { layerRules } from './scripts/layers.mjs';

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
  },
};

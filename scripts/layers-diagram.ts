/**
 * Draws the layering of scripts/layers.mjs (the list .dependency-cruiser.mjs makes its rules from)
 * as a mermaid diagram with its legend, between the markers in docs/ARCHITECTURE.md, so the picture
 * and the check cannot drift apart.
 *
 *   npm run docs:layers              rewrite the picture in docs/ARCHITECTURE.md
 *   npm run docs:layers -- --check   exit 1 if the picture there differs from the rules
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { layers, surfaces } from './layers.mjs';

export const BEGIN = '<!-- layers:begin: drawn by `npm run docs:layers` from scripts/layers.mjs; do not edit by hand -->';
export const END = '<!-- layers:end -->';
export const ARCHITECTURE_MD = fileURLToPath(new URL('../docs/ARCHITECTURE.md', import.meta.url));

const nodeId = (folder: string): string => folder.replace(/\.ts$/, '').replace(/[^a-z0-9]+/gi, '_');
const label = (folder: string): string => (/\.[a-z]+$/.test(folder) || folder.includes('/') ? folder : `${folder}/`);

/** The generated block: the mermaid picture, then the same rules in words. */
export function layersDiagram(): string {
  const chain = layers.filter((l) => !l.isolated);
  const lines = ['```mermaid', 'flowchart TD'];
  layers.forEach((layer, i) => {
    lines.push(`  subgraph L${i}["${layer.name}"]`);
    for (const folder of layer.folders) lines.push(`    ${nodeId(folder)}["${label(folder)}"]`);
    lines.push('  end');
  });
  for (let i = 0; i + 1 < chain.length; i++) {
    lines.push(`  L${layers.indexOf(chain[i]!)} --> L${layers.indexOf(chain[i + 1]!)}`);
  }
  for (const layer of layers.filter((l) => l.isolated)) {
    for (const host of layer.hostedBy ?? []) {
      for (const folder of layer.folders) lines.push(`  ${nodeId(host)} -->|hosts| ${nodeId(folder)}`);
    }
  }
  for (const surface of surfaces) {
    lines.push(`  ${nodeId(surface.from)} -.->|"only ${surface.only.join(', ')}"| ${nodeId(surface.to)}`);
  }
  lines.push('```', '');
  lines.push('An arrow from a layer means: its modules may import any layer below it, never one above it');
  lines.push('nor another folder of their own layer. Tests (`*.test.ts`) are exempt from that direction, not');
  lines.push('from the ban on import cycles (type-only imports count). Top to bottom:', '');
  for (const layer of layers) {
    const where = layer.isolated
      ? ` (imports nothing of the project outside itself; only ${(layer.hostedBy ?? []).map(label).join(', ')} may import it)`
      : '';
    lines.push(`- **${layer.name}**: ${layer.folders.map((f) => `\`${label(f)}\``).join(', ')}: ${layer.owns}${where}.`);
  }
  lines.push('', 'Narrowed imports (dotted arrows):', '');
  for (const surface of surfaces) {
    lines.push(`- \`${surface.from}\` may import from \`${surface.to}\` only ${surface.only.map((f) => `\`${f}\``).join(', ')}: ${surface.why}.`);
  }
  return lines.join('\n');
}

/** `doc` with the block between the markers replaced by the generated one. */
export function withDiagram(doc: string): string {
  const begin = doc.indexOf(BEGIN);
  const end = doc.indexOf(END);
  if (begin < 0 || end < begin) throw new Error(`docs/ARCHITECTURE.md has no ${BEGIN} … ${END} markers`);
  return `${doc.slice(0, begin + BEGIN.length)}\n${layersDiagram()}\n${doc.slice(end)}`;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const doc = readFileSync(ARCHITECTURE_MD, 'utf8');
  const next = withDiagram(doc);
  if (process.argv.includes('--check')) {
    if (next !== doc) {
      console.error('docs/ARCHITECTURE.md: the layers picture differs from scripts/layers.mjs; run `npm run docs:layers`');
      process.exit(1);
    }
  } else if (next !== doc) {
    writeFileSync(ARCHITECTURE_MD, next);
    console.log('docs/ARCHITECTURE.md: layers picture redrawn');
  }
}

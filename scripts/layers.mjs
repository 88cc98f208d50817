// The layering of Hearth, top to bottom: the one list that both the dependency check
// (.dependency-cruiser.mjs, run by `npm run lint:deps`) and the picture in docs/ARCHITECTURE.md
// (scripts/layers-diagram.ts) are made from, so the two cannot drift apart.
//
// The rule it encodes: a module may import only from the layers below its own, never from a layer
// above it nor from another folder of its own layer. Tests (*.test.ts) are exempt from that
// direction, never from the rule against cycles.

/** @type {import('./layers.d.mts').Layer[]} */
export const layers = [
  { name: 'tools', folders: ['scripts'], owns: 'build, start and doc scripts; may drive a host' },
  { name: 'hosts', folders: ['src/node', 'worker'], owns: 'the Node host and the browser host: they inject platform specifics and call the composition root' },
  {
    name: 'page',
    folders: ['src/ui'],
    owns: 'the built-in client page: it talks to the homeserver with fetch and to its host through the interface the host hands it',
    isolated: true,
    hostedBy: ['worker'],
  },
  { name: 'composition root', folders: ['src/homeserver.ts', 'src/index.ts'], owns: 'createHomeserver wires the components; index.ts is the package root' },
  { name: 'edges', folders: ['src/client', 'src/mailbox', 'src/p2p'], owns: 'the client-server API, the mailbox (store-and-forward, its routes mounted on the federation app), federation over libp2p' },
  { name: 'federation', folders: ['src/federation'], owns: 'the server-server API: its routes, and the outbound side other edges use' },
  { name: 'features', folders: ['src/search', 'src/spaces', 'src/sliding-sync'], owns: 'search, the space hierarchy and sliding sync, over the room engine and sync' },
  { name: 'sync', folders: ['src/sync'], owns: '/sync, /messages, visibility, push' },
  { name: 'domain', folders: ['src/rooms', 'src/keys', 'src/media'], owns: 'the room engine, end-to-end keys, the content repository' },
  { name: 'users', folders: ['src/users'], owns: 'accounts, devices, profiles, push rules' },
  { name: 'events', folders: ['src/events'], owns: 'room versions, PDUs, auth rules, state resolution' },
  { name: 'base', folders: ['src/crypto', 'src/storage', 'src/portable'], owns: 'signing and hashing; the database and its durability; the archive that holds a whole homeserver' },
  { name: 'http', folders: ['src/http'], owns: 'the shared HTTP layer: bodies, Matrix errors, validation' },
  { name: 'util', folders: ['src/util'], owns: 'coded error, keyed lock, backoff' },
];

/**
 * Narrowed downward imports: where `from` may import only these files of `to` (paths relative to
 * `to`). Every other downward import is open.
 * @type {import('./layers.d.mts').Surface[]}
 */
export const surfaces = [
  {
    from: 'src/client',
    to: 'src/federation',
    only: ['federation.ts', 'client.ts', 'transport.ts', 'memberships.ts', 'api-error.ts'],
    why: "the client API uses federation's outbound side (joins, leaves, invites and backfill across servers, queries of other servers, the transport contract, and what a failed request to another server answers), never its routes, app or request context",
  },
  {
    from: 'src/p2p',
    to: 'src/federation',
    only: ['transport.ts'],
    why: 'libp2p carries federation requests: it implements the FederationTransport contract and knows nothing else of federation',
  },
];

/**
 * The ports rule: the core is platform-free, so what only one platform has is imported only by the modules that
 * implement a port for that platform (a host's, or one adapter named here), and reaches the core injected.
 * @type {import('./layers.d.mts').PlatformBound[]}
 */
export const platformBound = [
  {
    platform: 'Node',
    core: true,
    packages: ['better-sqlite3', 'sharp'],
    implementedIn: ['src/node', 'scripts'],
    why: 'the native database and the thumbnailer, and Node\'s own modules, are the Node host\'s: the core gets a Database, a Thumbnailer, a MediaStore',
  },
  {
    platform: 'browser',
    packages: ['idb', 'comlink'],
    implementedIn: ['worker', 'src/storage/indexeddb-persistence.ts'],
    why: "IndexedDB and the page's workers are the browser host's (IndexedDB persistence is storage's adapter, which the host hands the core)",
  },
];

/** The regular expression (as a string) matching a folder of the list, or one file of it. */
export function pathPattern(folder) {
  const escaped = folder.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return /\.[a-z]+$/.test(folder) ? `^${escaped}$` : `^${escaped}/`;
}

/** Regular expression matching any of the folders (or files). */
export function anyOf(folders) {
  return folders.map(pathPattern).join('|');
}

const TESTS = '\\.test\\.ts$';
const slug = (folder) => folder.replace(/\.ts$/, '').replace(/[^a-z0-9]+/gi, '-');

/**
 * The forbidden rules of .dependency-cruiser.mjs, made from the layers and surfaces above.
 * @returns {import('dependency-cruiser').IForbiddenRuleType[]}
 */
export function layerRules() {
  const rules = [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'No import cycles, type-only ones included, tests included.',
      from: { path: '^(src|worker|scripts)/' },
      to: { circular: true },
    },
    {
      name: 'not-to-tests',
      severity: 'error',
      comment: 'Product code never imports a test or test support.',
      from: { path: '^(src|worker|scripts)/', pathNot: TESTS },
      to: { path: `^test/|${TESTS}` },
    },
    {
      name: 'in-a-layer',
      severity: 'error',
      comment: 'Every module that imports project code belongs to a layer of scripts/layers.mjs.',
      from: { path: '^(src|worker|scripts)/', pathNot: `${anyOf(layers.flatMap((l) => l.folders))}|${TESTS}` },
      to: { path: '^(src|worker|scripts)/' },
    },
  ];
  const chain = layers.filter((l) => !l.isolated);
  for (const layer of layers) {
    for (const folder of layer.folders) {
      if (layer.isolated) {
        rules.push({
          name: `isolated-${slug(folder)}`,
          severity: 'error',
          comment: `${folder} imports nothing of the project outside itself: ${layer.owns}.`,
          from: { path: pathPattern(folder), pathNot: TESTS },
          to: { path: '^(src|worker|scripts)/', pathNot: pathPattern(folder) },
        });
        rules.push({
          name: `hosted-${slug(folder)}`,
          severity: 'error',
          comment: `Only ${layer.hostedBy.join(', ')} may import ${folder}.`,
          from: { path: '^(src|worker|scripts)/', pathNot: `${anyOf([folder, ...layer.hostedBy])}|${TESTS}` },
          to: { path: pathPattern(folder) },
        });
        continue;
      }
      const index = chain.indexOf(layer);
      const above = chain.slice(0, index).flatMap((l) => l.folders);
      const beside = layer.folders.filter((f) => f !== folder);
      const barred = [...above, ...beside];
      if (barred.length === 0) continue;
      rules.push({
        name: `down-only-${slug(folder)}`,
        severity: 'error',
        comment: `${folder} (layer "${layer.name}") imports only from the layers below it.`,
        from: { path: pathPattern(folder), pathNot: TESTS },
        to: { path: anyOf(barred) },
      });
    }
  }
  for (const bound of platformBound) {
    const allowed = `${anyOf(bound.implementedIn)}|${TESTS}`;
    rules.push({
      name: `platform-${slug(bound.platform.toLowerCase())}`,
      severity: 'error',
      comment: `Only ${bound.implementedIn.join(', ')} import what only the ${bound.platform} platform has: ${bound.why}.`,
      from: { path: '^(src|worker|scripts)/', pathNot: allowed },
      to: { path: `^node_modules/(${bound.packages.map((p) => p.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')).join('|')})/` },
    });
    if (bound.core) {
      rules.push({
        name: `platform-${slug(bound.platform.toLowerCase())}-builtins`,
        severity: 'error',
        comment: `Only ${bound.implementedIn.join(', ')} import ${bound.platform}'s built-in modules: ${bound.why}.`,
        from: { path: '^(src|worker|scripts)/', pathNot: allowed },
        to: { dependencyTypes: ['core'] },
      });
    }
  }
  for (const surface of surfaces) {
    rules.push({
      name: `surface-${slug(surface.from)}-to-${slug(surface.to)}`,
      severity: 'error',
      comment: `${surface.from} may import from ${surface.to} only ${surface.only.join(', ')}: ${surface.why}.`,
      from: { path: pathPattern(surface.from), pathNot: TESTS },
      to: { path: pathPattern(surface.to), pathNot: anyOf(surface.only.map((f) => `${surface.to}/${f}`)) },
    });
  }
  return rules;
}

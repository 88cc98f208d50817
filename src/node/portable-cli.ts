// `npm run export -- --data DIR --out FILE` and `npm run import -- --data DIR --in FILE`: a homeserver as
// one encrypted file (src/portable, src/node/portable.ts). The passphrase comes from HEARTH_PASSPHRASE or,
// on a terminal, from a prompt (asked twice for an export). Export works on a stopped data folder or on
// one a host is running on (through its control socket); import wants an empty or missing folder.
// Progress goes to stderr as lines; a refusal prints one line and exits 1.
import './polyfills.ts';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { parseArgs } from 'node:util';
import type { ArchiveProgress } from '../portable/index.ts';
import { exportNodeHomeserver, importNodeHomeserver, MOVE_DONT_COPY } from './portable.ts';

const [command, ...rest] = process.argv.slice(2);
const { values } = parseArgs({ args: rest, options: { data: { type: 'string' }, out: { type: 'string' }, in: { type: 'string' } } });

const fail = (message: string, code = 1): never => {
  console.error(`hearth ${command ?? ''}: ${message}`);
  process.exit(code);
};

if (command !== 'export' && command !== 'import') fail('say export or import');
if (!values.data) fail('--data DIR is required', 2);
if (command === 'export' && !values.out) fail('--out FILE is required', 2);
if (command === 'import' && !values.in) fail('--in FILE is required', 2);

/** Reads a line without echoing it. */
function ask(question: string): Promise<string> {
  let muted = false;
  const output = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (!muted) process.stderr.write(chunk);
      done();
    },
  });
  const rl = createInterface({ input: process.stdin, output, terminal: true });
  return new Promise((resolve) => {
    rl.question(question, (answer) => {
      rl.close();
      process.stderr.write('\n');
      resolve(answer);
    });
    muted = true;
  });
}

async function passphrase(confirm: boolean): Promise<string> {
  const fromEnv = process.env['HEARTH_PASSPHRASE'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  if (!process.stdin.isTTY) return fail('set HEARTH_PASSPHRASE, or run on a terminal to be asked for the passphrase');
  const first = await ask('Passphrase: ');
  if (first.length === 0) return fail('the passphrase is empty');
  if (confirm && (await ask('The same passphrase again: ')) !== first) return fail('the two passphrases differ');
  return first;
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`;
let lastTenth = -1;
let lastPhase = '';
function progress({ phase, doneBytes, totalBytes }: ArchiveProgress): void {
  if (phase !== lastPhase) lastTenth = -1;
  lastPhase = phase;
  const tenth = totalBytes === 0 ? 10 : Math.floor((doneBytes / totalBytes) * 10);
  if (tenth === lastTenth) return;
  lastTenth = tenth;
  console.error(`${phase}: ${tenth * 10}% (${mb(doneBytes)} of ${mb(totalBytes)})`);
}
const log = (line: string) => console.error(line);

try {
  if (command === 'export') {
    const secret = await passphrase(true);
    const started = performance.now();
    const { manifest, bytes } = await exportNodeHomeserver({ dataDir: values.data!, out: values.out!, passphrase: secret, onProgress: progress, log });
    console.error(`exported ${manifest.serverName} to ${values.out}: ${manifest.entries.length} entries, ${mb(bytes)}, in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    console.error('Keep the file and its passphrase: together they are your homeserver. Without the passphrase nobody, you included, can open it.');
  } else {
    console.error(MOVE_DONT_COPY);
    const secret = await passphrase(false);
    const manifest = await importNodeHomeserver({ dataDir: values.data!, input: values.in!, passphrase: secret, onProgress: progress, log });
    console.error(`imported ${manifest.serverName} into ${values.data}. Start it with: npm run serve -- --data ${values.data}`);
  }
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}

/**
 * Keep, move and reset the homeserver (issue 22), through `host.keep` and the storage calls of
 * `PageHost`: the storage panel (usage of the quota, whether the browser keeps the data, export,
 * reset) that the top bar's storage figure opens, and "Import a homeserver" on the account screen.
 */
import { formatBytes, h } from './dom.ts';
import type { PageHost } from './host.ts';

/** From this share of the quota on, the page warns. */
export const STORAGE_WARN_AT = 0.8;

export interface StorageFigures {
  usage: number;
  quota: number | undefined;
  persisted: boolean | undefined;
}

/** The share of the quota in use, or undefined where the browser gives no quota. */
export function quotaShare(figures: { usage: number; quota: number | undefined }): number | undefined {
  return figures.quota ? figures.usage / figures.quota : undefined;
}

const percent = (share: number) => `${(share * 100).toFixed(share < 0.1 ? 1 : 0)} %`;

/** What the top bar shows: what the figure is, and a warning past 80 %. */
export function storageLabel(figures: { usage: number; quota: number | undefined }): { text: string; title: string; warn: boolean } {
  const share = quotaShare(figures);
  const warn = share !== undefined && share >= STORAGE_WARN_AT;
  const ofQuota = share !== undefined ? ` (${percent(share)} of the ${formatBytes(figures.quota!)} this browser allows this site)` : '';
  return {
    text: warn ? `Storage ${percent(share!)} full` : `Storage: ${formatBytes(figures.usage)}`,
    title: `What this site keeps in your browser: your homeserver\u2019s database, media and keys, ${formatBytes(figures.usage)}${ofQuota}. Open for the quota, export and reset.`,
    warn,
  };
}

/**
 * Safari, as the issue defines it by its user agent: "Safari" without Chrome, Chromium or Android (which all
 * say Safari too). Safari deletes a site's storage after seven days without a visit, unless the site is
 * installed to the home screen (or the Dock), which this page is made to be (manifest.webmanifest).
 */
export function isSafari(userAgent: string): boolean {
  return /Safari\//.test(userAgent) && !/Chrome|Chromium|Android/.test(userAgent);
}

/** The note for Safari users, where the page is not yet installed; null elsewhere. */
export function safariNote(): HTMLElement | null {
  const installed = matchMedia('(display-mode: standalone)').matches || (navigator as { standalone?: boolean }).standalone === true;
  if (!isSafari(navigator.userAgent) || installed) return null;
  return h(
    'p',
    { class: 'warning safari-note', role: 'note' },
    'Safari deletes a site\u2019s data after seven days without a visit, and your homeserver with it. Add Hearth to your home screen (Share, then Add to Home Screen; on a Mac, File, then Add to Dock) and open it from there: Safari keeps an installed app\u2019s data. Export a copy too.',
  );
}

/** What not having persistent storage means, by what the browser answered when asked. */
const NOT_PERSISTENT: Record<'not-asked' | 'asking' | 'refused', string> = {
  'not-asked': 'Not persistent: the browser may clear this site\u2019s data, and your homeserver with it, when the disk runs low. Ask it to keep the data, and export a copy.',
  // Firefox asks the person, beside the address bar, and answers only once they have chosen.
  asking: 'The browser is asking you whether this site may keep its data: answer its prompt (beside the address bar) with Allow. Until then it may clear the data when the disk runs low.',
  // Chromium decides by itself (sites installed, bookmarked or used often), and answers no at once otherwise.
  refused: 'The browser did not agree to keep this site\u2019s data: it may still clear it, and your homeserver with it, when the disk runs low. Installing Hearth as an app or bookmarking it may change its mind; in any case, export a copy now and then.',
};

function suggestedName(serverName: string | undefined): string {
  return `hearth-${(serverName ?? 'homeserver').slice(0, 8)}-${new Date().toISOString().slice(0, 10)}.hearth`;
}

/** A passphrase twice, a button and a progress bar: the archive downloads when it is made. */
function exportSection(host: PageHost): { element: HTMLElement; focus(): void } {
  const passphrase = h('input', { id: 'export-passphrase', type: 'password', autocomplete: 'new-password', minLength: 8 });
  const again = h('input', { id: 'export-passphrase-again', type: 'password', autocomplete: 'new-password' });
  const progress = h('progress', { max: 1, value: 0, hidden: true, 'aria-label': 'Export progress' });
  const status = h('p', { class: 'hint', role: 'status' });
  const error = h('p', { class: 'error', role: 'alert' });
  const button = h('button', { type: 'submit', class: 'primary' }, 'Export');
  const form = h(
    'form',
    {
      class: 'keep-export',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        error.textContent = status.textContent = '';
        if (passphrase.value.length < 8) return void ((error.textContent = 'Choose a passphrase of at least 8 characters: without it nobody, you included, can open the file.'), passphrase.focus());
        if (passphrase.value !== again.value) return void ((error.textContent = 'The two passphrases differ. Type the same one in both fields.'), again.focus());
        button.disabled = true;
        progress.hidden = false;
        progress.value = 0;
        try {
          const blob = await host.keep.exportHomeserver(passphrase.value, (fraction) => (progress.value = fraction));
          const link = h('a', { href: URL.createObjectURL(blob), download: suggestedName(host.status.serverName) }, `Download ${formatBytes(blob.size)} again`);
          status.replaceChildren(`Exported ${formatBytes(blob.size)}. Keep the file and its passphrase together somewhere safe. `, link);
          link.click();
          passphrase.value = again.value = '';
        } catch (e) {
          error.textContent = `Could not export: ${e instanceof Error ? e.message : String(e)}`;
        } finally {
          button.disabled = false;
          progress.hidden = true;
        }
      },
    },
    h('h3', {}, 'Export this homeserver'),
    h('p', { class: 'hint' }, 'One file with your homeserver\u2019s identity, accounts, rooms, keys, media and peers, encrypted with a passphrase. With the file and the passphrase you can import it into another browser, or into a Node host (npm run import).'),
    h('label', { for: 'export-passphrase' }, 'Export passphrase'),
    passphrase,
    h('label', { for: 'export-passphrase-again' }, 'Repeat the passphrase'),
    again,
    error,
    button,
    progress,
    status,
  );
  return { element: form, focus: () => passphrase.focus() };
}

/** Reset asks twice, and offers an export first. */
function resetSection(host: PageHost, exportFirst: () => void): HTMLElement {
  const area = h('div', { class: 'keep-reset' });
  const error = h('p', { class: 'error', role: 'alert' });
  const start = () =>
    area.replaceChildren(
      h('h3', {}, 'Reset this homeserver'),
      h('p', { class: 'hint' }, 'Deletes the homeserver from this browser, to start again with a new one.'),
      h('button', { type: 'button', class: 'danger', onclick: first }, 'Reset\u2026'),
    );
  const first = () =>
    area.replaceChildren(
      h('h3', {}, 'Reset this homeserver'),
      h('p', { role: 'alert' }, 'This deletes your homeserver from this browser: its identity, every account, room, message, key and file. Its server name ends with it, and other servers will not reach it again. Export it first if you may want it back.'),
      h('button', { type: 'button', class: 'primary', onclick: () => (start(), exportFirst()) }, 'Export first'),
      h('button', { type: 'button', class: 'danger', onclick: second }, 'Continue to reset'),
      h('button', { type: 'button', class: 'link', onclick: start }, 'Cancel'),
    );
  const second = () =>
    area.replaceChildren(
      h('h3', {}, 'Are you sure?'),
      h('p', { role: 'alert' }, 'This cannot be undone.'),
      h(
        'button',
        {
          type: 'button',
          class: 'danger',
          onclick: async (event: Event) => {
            (event.currentTarget as HTMLButtonElement).disabled = true;
            try {
              await host.keep.resetHomeserver();
            } catch (e) {
              error.textContent = `Could not reset: ${e instanceof Error ? e.message : String(e)}`;
            }
          },
        },
        'Delete this homeserver',
      ),
      h('button', { type: 'button', class: 'link', onclick: start }, 'Cancel'),
      error,
    );
  start();
  return area;
}

/** The storage panel: a dialog the top bar's storage figure opens. */
export class StoragePanel {
  readonly element: HTMLDialogElement;
  private readonly figures = h('div', { class: 'keep-figures' });
  private readonly exporter: { element: HTMLElement; focus(): void };
  /** What asking the browser to keep the data has come to, in this page's life. */
  private persistAsk: keyof typeof NOT_PERSISTENT = 'not-asked';

  constructor(
    private readonly host: PageHost,
    /** Runs when the panel has fresh figures (opened, persistence asked), for the top bar. */
    private readonly onChange: () => void = () => undefined,
  ) {
    this.exporter = exportSection(host);
    this.element = h(
      'dialog',
      { class: 'keep-panel card', 'aria-labelledby': 'keep-title' },
      h('h2', { id: 'keep-title' }, 'Storage and backup'),
      this.figures,
      this.exporter.element,
      resetSection(host, () => this.exporter.focus()),
      h('button', { type: 'button', class: 'link keep-close', onclick: () => this.element.close() }, 'Close'),
    );
  }

  async open(): Promise<void> {
    if (!this.element.isConnected) document.body.append(this.element);
    if (!this.element.open) this.element.showModal();
    await this.refresh();
    // The top bar shows the same figure: fresh now too.
    this.onChange();
  }

  async refresh(): Promise<void> {
    const [estimate, persisted] = await Promise.all([this.host.storageEstimate(), this.host.keep.persisted()]);
    const rows: (HTMLElement | null)[] = [];
    if (estimate) {
      const share = quotaShare(estimate);
      rows.push(
        h('p', { class: 'keep-usage' }, `Your homeserver\u2019s database, media and keys use ${formatBytes(estimate.usage)}` + (share !== undefined ? ` of the ${formatBytes(estimate.quota!)} this browser allows this site (${percent(share)}).` : '.')),
        share !== undefined ? h('progress', { max: 1, value: Math.min(share, 1), 'aria-label': 'Storage used' }) : null,
        share !== undefined && share >= STORAGE_WARN_AT
          ? h('p', { class: 'warning', role: 'alert' }, `Storage is ${percent(share)} full. When it is full the homeserver refuses new messages and uploads. Export your homeserver, then free space in this browser.`)
          : null,
      );
    } else rows.push(h('p', { class: 'hint' }, 'This browser does not say how much this site stores.'));
    if (persisted === true) rows.push(h('p', { class: 'keep-persisted', 'data-persisted': 'true' }, 'Persistent: the browser will not clear this site\u2019s data to free space.'));
    else if (persisted === undefined) {
      // No StorageManager at all (WebKitGTK; older Safari): nothing to ask.
      rows.push(h('p', { class: 'keep-persisted', 'data-persisted': 'unsupported' }, 'This browser cannot be asked to keep this site\u2019s data: it may clear it, and your homeserver with it, when space runs low. Export a copy now and then.'));
    } else {
      rows.push(h('p', { class: 'keep-persisted', 'data-persisted': 'false', 'data-asked': this.persistAsk }, NOT_PERSISTENT[this.persistAsk]));
      if (this.persistAsk !== 'asking') rows.push(h('button', { type: 'button', onclick: () => void this.askToPersist() }, 'Ask the browser to keep it'));
    }
    this.figures.replaceChildren(h('h3', {}, 'Storage'), ...[safariNote(), ...rows].filter((row): row is HTMLElement => row !== null));
  }

  /** Asks, and says so while the browser asks the person (its answer may take as long as they do). */
  private async askToPersist(): Promise<void> {
    this.persistAsk = 'asking';
    await this.refresh();
    const granted = await this.host.persistStorage();
    this.persistAsk = granted ? 'not-asked' : 'refused';
    await this.refresh();
    this.onChange();
  }
}

/** "Import a homeserver", beside "Create an account": a file, its passphrase, and move-don't-copy said plainly. */
export function importCard(host: PageHost): HTMLElement {
  const file = h('input', { id: 'import-file', type: 'file', accept: '.hearth,application/octet-stream', required: true });
  const passphrase = h('input', { id: 'import-passphrase', type: 'password', autocomplete: 'current-password', required: true });
  const progress = h('progress', { max: 1, value: 0, hidden: true, 'aria-label': 'Import progress' });
  const error = h('p', { class: 'error', role: 'alert' });
  // An import that stopped midway was cleared away at this start (known once the core runs): say so, once, where it is tried again.
  let told = false;
  host.subscribe(() => {
    const interrupted = host.keep.interruptedImport();
    if (interrupted && !told) (told = true), (error.textContent = interrupted);
  });
  const button = h('button', { type: 'submit' }, 'Import');
  return h(
    'form',
    {
      class: 'card keep-import',
      onsubmit: async (event: Event) => {
        event.preventDefault();
        error.textContent = '';
        const chosen = file.files?.[0];
        if (!chosen) return void ((error.textContent = 'Choose the file you exported.'), file.focus());
        button.disabled = true;
        progress.hidden = false;
        try {
          await host.keep.importHomeserver(chosen, passphrase.value, (fraction) => (progress.value = fraction));
        } catch (e) {
          error.textContent = e instanceof Error ? e.message : String(e);
          button.disabled = false;
          progress.hidden = true;
        }
      },
    },
    h('h2', {}, 'Import a homeserver'),
    h('p', { class: 'hint' }, 'Moving your homeserver here from another browser or a Node host? Import the file you exported, and sign in with your password.'),
    h('p', { class: 'hint' }, 'Move, don\u2019t copy: stop the old one (or reset it) before this one goes online. Two copies running at once sign different events as the same server, and its rooms fork.'),
    h('label', { for: 'import-file' }, 'Homeserver file'),
    file,
    h('label', { for: 'import-passphrase' }, 'Archive passphrase'),
    passphrase,
    error,
    button,
    progress,
  );
}

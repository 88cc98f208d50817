import { App } from './app.ts';
import { SdkAccounts } from './client/accounts.ts';
import { loadEmojiFont } from './emoji-font.ts';
import type { PageHost } from './host.ts';
import './style.css';

// As the page's script starts, while the host starts its homeserver: the app's first screen waits for it (emoji-font.ts).
void loadEmojiFont();

/**
 * The built-in client's entry: its host (worker/page.ts in the browser) calls it once the
 * homeserver's URL is served, with the host interface. The client then talks to the
 * homeserver only through fetch to `host.homeserverUrl`, like any Matrix client would, except
 * uploads, which the host hands its core itself when it can (`uploadMedia`), so the page sees progress.
 */
export async function startPage(root: HTMLElement, host: PageHost): Promise<void> {
  await new App(root, host, new SdkAccounts(host.homeserverUrl, (upload, onProgress) => host.uploadMedia(upload, onProgress))).run();
}

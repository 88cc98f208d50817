import { App } from './app.ts';
import { SdkAccounts } from './client/accounts.ts';
import type { PageHost } from './host.ts';
import './style.css';

/**
 * The built-in client's entry: its host (worker/page.ts in the browser) calls it once the
 * homeserver's URL is served, with the host interface. The client then talks to the
 * homeserver only through fetch to `host.homeserverUrl`, like any Matrix client would.
 */
export async function startPage(root: HTMLElement, host: PageHost): Promise<void> {
  await new App(root, host, new SdkAccounts(host.homeserverUrl)).run();
}

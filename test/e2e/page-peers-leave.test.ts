import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openPeersView, pageServerName, registerThroughUi, startRelayedPages, type RelayedPages } from './hearth-page.ts';

// Issue 38: the Peers panel followed a page that had closed. Ben's page goes away; its browser hangs up the
// WebRTC link to Ana's page (DTLS close_notify, SCTP abort), but libp2p ended that connection only when its
// own check failed (ICE consent or libp2p's ping, up to ten seconds later): Ana's panel said "2 connected",
// Ben *direct*, after the Node relay had printed "peer left". Now Ana's page ends the link when Ben hangs
// up, and the panel, which redraws on each connection's close, drops him at once.
//
// The test waits on the page, not a clock: an init script in each page records what its RTCPeerConnections
// report. Ana's panel must drop Ben before her side of the link has taken him for gone on its own (ICE
// `disconnected`, a timeout): without the fix it drops him only after that.

let relayed: RelayedPages;
let pageA: Page;
let pageB: Page;

type LinkState = { what: 'ice' | 'connection'; state: string };

/** Records each RTCPeerConnection's ICE and connection states, in order, as `testLinkStates`. */
function recordLinkStates(): void {
  const Real = globalThis.RTCPeerConnection;
  if (!Real) return;
  const states: LinkState[] = [];
  class Recorded extends Real {
    constructor(configuration?: RTCConfiguration) {
      super(configuration);
      this.addEventListener('iceconnectionstatechange', () => states.push({ what: 'ice', state: this.iceConnectionState }));
      this.addEventListener('connectionstatechange', () => states.push({ what: 'connection', state: this.connectionState }));
    }
  }
  Object.assign(globalThis, { RTCPeerConnection: Recorded, testLinkStates: states });
}

const linkStates = (page: Page): Promise<LinkState[]> => page.evaluate(() => (globalThis as any).testLinkStates);

beforeAll(async () => {
  relayed = await startRelayedPages(inject('hearthDist'), 'peers-leave', { initScript: recordLinkStates });
  [pageA, pageB] = relayed.pages as [Page, Page];
  await registerThroughUi(pageA, 'ana');
  await registerThroughUi(pageB, 'ben');
}, 180_000);

afterAll(async () => {
  await relayed?.close();
});

describe('the Peers panel follows the connections', () => {
  it('a closed page leaves the other page’s panel when it hangs up, not when a check times out', async () => {
    const serverB = await pageServerName(pageB);
    const panelA = await openPeersView(pageA);
    // The top bar's Peers button says the count at a glance.
    const countA = pageA.getByRole('banner').getByRole('button', { name: /^Peers · / });
    const peersA = panelA.getByRole('list', { name: 'Connected peers' });
    const benRow = peersA.getByRole('listitem').filter({ has: pageA.getByRole('button', { name: `Copy server name ${serverB}` }) });
    // Ben's page, reached over the WebRTC link the two made through the relay: what a person sees is *direct*.
    await benRow.filter({ hasText: 'direct' }).waitFor({ timeout: 60_000 });
    await countA.filter({ hasText: '\u00b7 2 connected' }).waitFor();
    expect(await linkStates(pageA)).toContainEqual({ what: 'connection', state: 'connected' });

    // Ben closes his tab.
    await pageB.close();

    await benRow.waitFor({ state: 'detached', timeout: 60_000 });
    const afterDrop = await linkStates(pageA);
    await countA.filter({ hasText: '\u00b7 1 connected' }).waitFor();
    expect(await peersA.getByRole('listitem').count()).toBe(1);
    // Dropped on Ben's hang-up: Ana's side never had to find the link dead (ICE disconnected or failed).
    expect(afterDrop.filter(({ state }) => state === 'disconnected' || state === 'failed')).toEqual([]);
  }, 120_000);
});

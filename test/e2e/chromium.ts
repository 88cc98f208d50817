import { existsSync } from 'node:fs';
import { chromium, type Browser } from 'playwright-core';

export const CHROMIUM_PATH = process.env.HEARTH_CHROMIUM ?? '/usr/bin/chromium';

// Flags this machine needs: without the background-networking ones Chromium keeps
// dialling Google's hosts, which the closed network refuses.
export const CHROMIUM_FLAGS = [
  '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
  '--disable-background-networking', '--disable-component-update', '--disable-sync',
  // Headless Chromium hides host ICE candidates behind mDNS names it cannot resolve here: without this, no WebRTC on loopback.
  '--disable-features=WebRtcHideLocalIpsWithMdns',
];

export function assertChromiumInstalled(): void {
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `Browser tests need Chromium at ${CHROMIUM_PATH} and it is missing.\n` +
        `Install it with: apt-get update && apt-get install -y chromium\n` +
        `(or point HEARTH_CHROMIUM at another Chromium binary).`,
    );
  }
}

export async function launchChromium(): Promise<Browser> {
  assertChromiumInstalled();
  return chromium.launch({ executablePath: CHROMIUM_PATH, args: CHROMIUM_FLAGS });
}

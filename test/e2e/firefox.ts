import { existsSync } from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';

export const FIREFOX_PATH = process.env.HEARTH_FIREFOX ?? '/usr/bin/firefox-esr';

export function assertFirefoxInstalled(): void {
  if (!existsSync(FIREFOX_PATH)) {
    throw new Error(
      `Browser tests need Firefox at ${FIREFOX_PATH} and it is missing.\n` +
        `Install it with: apt-get update && apt-get install -y firefox-esr\n` +
        `(or point HEARTH_FIREFOX at another Firefox binary).`,
    );
  }
}

/** Debian's Firefox ESR, driven over WebDriver BiDi (playwright-core drives only its own patched Firefox). */
export async function launchFirefox(): Promise<Browser> {
  assertFirefoxInstalled();
  return puppeteer.launch({ browser: 'firefox', executablePath: FIREFOX_PATH, headless: true });
}

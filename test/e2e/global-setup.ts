import { assertChromiumInstalled } from './chromium.ts';

// Fail the whole browser suite loudly, never skip it, when Chromium is missing.
export default function setup(): void {
  assertChromiumInstalled();
}

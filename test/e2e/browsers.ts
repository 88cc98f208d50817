import type { ElementHandle, Browser as PlaywrightBrowser, Page as PlaywrightPage } from 'playwright-core';
import type { Browser as PuppeteerBrowser, ElementHandle as PuppeteerElement, Page as PuppeteerPage } from 'puppeteer-core';
import { Key, type WebDriver, type WebElement } from 'selenium-webdriver';
import { launchChromium } from './chromium.ts';
import { launchFirefox } from './firefox.ts';
import { launchWebKit, type WebKit } from './webkit.ts';

// One tab, whichever engine runs it (issue 39). Chromium is driven by playwright-core, Firefox by
// puppeteer-core over WebDriver BiDi (playwright drives only its own patched Firefox), WebKit (WebKitGTK's
// MiniBrowser) by selenium-webdriver over classic WebDriver (webkit.ts). The flows the
// tests share (page-flows.ts) are written once against `Tab`; each driver supplies a few primitives:
// evaluate an expression, wait until one is truthy, click what it returned, choose a file, press a key, reload. Elements are found
// in the page by one function (`findTarget`), so "the button named Send" means the same in every engine.

export type Engine = 'chromium' | 'firefox' | 'webkit';

/** What to find, as a person would: a control by its label, a button by its name, or CSS with the text it shows (whitespace collapsed). */
export type Target = { label: string } | { button: string; within?: string } | { css: string; text?: string; exactText?: string };

/** The keys a test presses. */
export type PressedKey = 'Escape' | 'Enter';

export interface Tab {
  readonly engine: Engine;
  /** Runs `fn(arg)` in the page (it is sent as source: it may use nothing from outside itself). */
  evaluate<R, A = undefined>(fn: (arg: A) => R | Promise<R>, arg?: A): Promise<Awaited<R>>;
  /** Waits until `fn(arg)` is truthy in the page. */
  waitForFunction<A>(fn: (arg: A) => unknown, arg: A, timeoutMs?: number): Promise<void>;
  /** Waits until the target is shown, or (`gone`) until none is. */
  waitFor(target: Target, options?: { gone?: boolean; timeoutMs?: number }): Promise<void>;
  /** The target's text once it is shown. */
  textOf(target: Target, timeoutMs?: number): Promise<string>;
  /** Clicks the target with the driver's own input, once it is shown and enabled. */
  click(target: Target, timeoutMs?: number): Promise<void>;
  /** Sets a field's value as Playwright's `fill` does (the value, then `input` and `change`), once it is shown. */
  fill(target: Target, value: string, timeoutMs?: number): Promise<void>;
  /**
   * Chooses a file on disk in a file input, with the driver's own file upload, once it is there. The input may be
   * hidden: a page often hides it behind the button that opens the browser's file chooser, which no driver here can answer.
   */
  setInputFiles(target: Target, path: string, timeoutMs?: number): Promise<void>;
  /** Presses a key with the driver's own keyboard, in whatever has the focus. */
  press(key: PressedKey): Promise<void>;
  /** Reloads and waits for the page's load event. */
  reload(): Promise<void>;
  /**
   * Turns the network off (or on) for this tab, as the browser would with no network: `navigator.onLine`
   * and its `offline`/`online` events follow. Undefined where the engine's driver cannot (WebKit over
   * classic WebDriver has no network emulation): a test takes the network away for real there.
   */
  readonly setOffline?: (offline: boolean) => Promise<void>;
  close(): Promise<void>;
}

/** A browser profile of its own: storage, service workers and so its own homeserver. */
export interface Profile {
  readonly engine: Engine;
  newTab(url: string): Promise<Tab>;
  close(): Promise<void>;
}

export interface EngineBrowser {
  readonly engine: Engine;
  newProfile(): Promise<Profile>;
  close(): Promise<void>;
}

const DEFAULT_TIMEOUT_MS = 30_000;

/** Finds a shown element for a target (shown or not, with `evenHidden`); sent into the page as source, so it is self-contained. */
function findTarget(target: Target & { evenHidden?: boolean }): Element | null {
  const norm = (text: string | null | undefined) => (text ?? '').replace(/\s+/g, ' ').trim();
  const shown = (element: Element) => (typeof element.checkVisibility === 'function' ? element.checkVisibility() : true);
  let candidates: Element[];
  if ('label' in target) {
    candidates = [...document.querySelectorAll('[aria-label]')].filter((element) => norm(element.getAttribute('aria-label')) === target.label);
    for (const label of document.querySelectorAll('label')) {
      if (norm(label.textContent) !== target.label) continue;
      const control = label.htmlFor ? document.getElementById(label.htmlFor) : label.querySelector('input, textarea, select');
      if (control) candidates.push(control);
    }
    for (const element of document.querySelectorAll('[aria-labelledby]')) {
      const name = (element.getAttribute('aria-labelledby') ?? '').split(/\s+/).map((id) => norm(document.getElementById(id)?.textContent)).join(' ');
      if (name === target.label) candidates.push(element);
    }
  } else if ('button' in target) {
    const scopes: ParentNode[] = target.within ? [...document.querySelectorAll(target.within)] : [document];
    candidates = scopes
      .flatMap((scope) => [...scope.querySelectorAll('button, [role="button"], input[type="submit"], input[type="button"]')])
      .filter((element) => norm(element.getAttribute('aria-label') ?? (element instanceof HTMLInputElement ? element.value : element.textContent)) === target.button);
  } else {
    const { exactText, text } = target;
    candidates = [...document.querySelectorAll(target.css)].filter((element) =>
      exactText !== undefined ? norm(element.textContent) === exactText : text === undefined || norm(element.textContent).includes(text),
    );
  }
  return (target.evenHidden ? candidates[0] : candidates.find(shown)) ?? null;
}

/** What Playwright's `fill` does to a field; sent into the page as source. */
function setValue(field: HTMLInputElement, value: string): void {
  field.focus();
  // The prototype's setter, as typing sets it (a framework may wrap the instance's).
  Object.getOwnPropertyDescriptor(Object.getPrototypeOf(field), 'value')!.set!.call(field, value);
  field.dispatchEvent(new Event('input', { bubbles: true }));
  field.dispatchEvent(new Event('change', { bubbles: true }));
}

/**
 * An expression that calls `fn` with `arg` (JSON), for drivers that take source. Under tsx (the benches) esbuild
 * keeps function names by wrapping inner functions in a `__name` helper the page lacks: it is given one that does nothing.
 */
const call = (fn: (arg: any) => unknown, arg: unknown): string => `((__name) => (${fn.toString()})(${arg === undefined ? '' : JSON.stringify(arg)}))((target) => target)`;
const find = (target: Target & { evenHidden?: boolean }) => call(findTarget, target);
const describeTarget = (target: Target) => JSON.stringify(target);

/** The primitives a driver gives; the rest of `Tab` is built on them. */
interface Driver {
  evaluate(expression: string): Promise<unknown>;
  /** Polls `expression` until it is truthy (an Error past the timeout); `click` clicks the element it returned. */
  waitFor(expression: string, timeoutMs: number, click?: boolean): Promise<void>;
  /** Gives the file input `expression` returns the file at `path`. */
  setFiles(expression: string, path: string): Promise<void>;
  press(key: PressedKey): Promise<void>;
  reload(): Promise<void>;
  setOffline?(offline: boolean): Promise<void>;
  close(): Promise<void>;
}

function tabOver(engine: Engine, driver: Driver): Tab {
  const waitFor = async (expression: string, timeoutMs: number, what: string, click = false) => {
    try {
      await driver.waitFor(expression, timeoutMs, click);
    } catch (error) {
      throw new Error(`${engine}: ${what}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  return {
    engine,
    evaluate: async (fn, arg) => (await driver.evaluate(call(fn, arg))) as any,
    waitForFunction: (fn, arg, timeoutMs = DEFAULT_TIMEOUT_MS) => waitFor(call(fn, arg), timeoutMs, `waiting for ${fn.toString().slice(0, 120)}`),
    waitFor: (target, { gone = false, timeoutMs = DEFAULT_TIMEOUT_MS } = {}) =>
      waitFor(gone ? `!${find(target)}` : find(target), timeoutMs, `waiting for ${describeTarget(target)}${gone ? ' to go' : ''}`),
    textOf: async (target, timeoutMs = DEFAULT_TIMEOUT_MS) => {
      await waitFor(find(target), timeoutMs, `waiting for ${describeTarget(target)}`);
      return String(await driver.evaluate(`${find(target)}?.textContent ?? ''`));
    },
    click: async (target, timeoutMs = DEFAULT_TIMEOUT_MS) => {
      const enabled = `(() => { const element = ${find(target)}; return element && !element.disabled ? element : null; })()`;
      // A list the page re-renders may replace the element between finding and clicking it: find it again.
      for (let attempt = 1; ; attempt++) {
        try {
          return await waitFor(enabled, timeoutMs, `clicking ${describeTarget(target)}`, true);
        } catch (error) {
          if (attempt === 5 || !/detached|not attached|stale/i.test(String(error))) throw error;
        }
      }
    },
    fill: async (target, value, timeoutMs = DEFAULT_TIMEOUT_MS) => {
      await waitFor(find(target), timeoutMs, `waiting for ${describeTarget(target)}`);
      await driver.evaluate(`((__name) => (${setValue.toString()})(${find(target)}, ${JSON.stringify(value)}))((target) => target)`);
    },
    setInputFiles: async (target, path, timeoutMs = DEFAULT_TIMEOUT_MS) => {
      const input = find({ ...target, evenHidden: true });
      await waitFor(input, timeoutMs, `waiting for ${describeTarget(target)}`);
      await driver.setFiles(input, path);
    },
    press: (key) => driver.press(key),
    reload: () => driver.reload(),
    ...(driver.setOffline ? { setOffline: driver.setOffline } : {}),
    close: () => driver.close(),
  };
}

function logPageErrors(engine: Engine, on: (handler: (error: unknown) => void) => void): void {
  on((error) => console.error(`[${engine} page error] ${error instanceof Error ? error.message : String(error)}`));
}

let settledWaits = 0;

/**
 * `expression` for Playwright's waitForFunction, which takes a Promise for a truthy answer at once (puppeteer
 * and the WebDriver tab wait for it): each poll reads the answer of the last evaluation, once it has settled,
 * and starts the next.
 */
function settled(expression: string): string {
  const key = `wait${++settledWaits}`;
  return `(() => {
    const waits = (globalThis.hearthTestWaits ??= {});
    const slot = waits[${JSON.stringify(key)}];
    if (slot === undefined) {
      const entry = (waits[${JSON.stringify(key)}] = { done: false, value: null });
      Promise.resolve().then(() => ${expression}).then((value) => Object.assign(entry, { done: true, value }), () => (entry.done = true));
      return null;
    }
    if (!slot.done) return null;
    delete waits[${JSON.stringify(key)}];
    return slot.value || null;
  })()`;
}

/** A Playwright page as a Tab. */
export function playwrightTab(page: PlaywrightPage, engine: Engine = 'chromium'): Tab {
  logPageErrors(engine, (handler) => page.on('pageerror', handler));
  return tabOver(engine, {
    evaluate: (expression) => page.evaluate(expression),
    waitFor: async (expression, timeoutMs, click) => {
      // Polled on a timer: a tab behind another (after a second tab was opened) gets no animation frames.
      const handle = await page.waitForFunction(settled(expression), undefined, { timeout: timeoutMs, polling: 20 });
      if (click) await (handle.asElement() as unknown as ElementHandle<Element>).click({ timeout: timeoutMs });
      await handle.dispose();
    },
    setFiles: async (expression, path) => {
      const handle = await page.evaluateHandle(expression);
      await (handle.asElement() as unknown as ElementHandle<HTMLInputElement>).setInputFiles(path);
      await handle.dispose();
    },
    press: (key) => page.keyboard.press(key),
    reload: async () => void (await page.reload()),
    // Playwright emulates it for the whole context (every tab of the profile, its service worker included).
    setOffline: (offline) => page.context().setOffline(offline),
    close: () => page.close(),
  });
}

/** A puppeteer page (Firefox over WebDriver BiDi) as a Tab. */
export function puppeteerTab(page: PuppeteerPage, engine: Engine = 'firefox'): Tab {
  logPageErrors(engine, (handler) => page.on('pageerror', handler));
  return tabOver(engine, {
    evaluate: (expression) => page.evaluate(expression),
    waitFor: async (expression, timeoutMs, click) => {
      const handle = await page.waitForFunction(expression, { timeout: timeoutMs, polling: 20 });
      if (click) await (handle.asElement() as PuppeteerElement<Element>).click();
      await handle.dispose();
    },
    setFiles: async (expression, path) => {
      const handle = await page.evaluateHandle(expression);
      // WebDriver BiDi's input.setFiles.
      await (handle.asElement() as PuppeteerElement<HTMLInputElement>).uploadFile(path);
      await handle.dispose();
    },
    press: (key) => page.keyboard.press(key),
    reload: async () => void (await page.reload()),
    // WebDriver BiDi's emulation.setNetworkConditions, for this tab: Firefox then answers its requests with a network error and its navigator.onLine is false.
    setOffline: (offline) => page.setOfflineMode(offline),
    close: () => page.close(),
  });
}

const WEBDRIVER_KEYS: Record<PressedKey, string> = { Escape: Key.ESCAPE, Enter: Key.ENTER };

/** Which window of a WebDriver session its commands go to: each tab switches to its own first. */
interface WindowFocus {
  current: string;
}

/**
 * A window of a WebDriver session (WebKit) as a Tab. Classic WebDriver has no wait of its own: the page
 * polls the expression inside one asynchronous script, on a short timer rather than at each animation
 * frame, since a window behind another gets no frames.
 */
export function webDriverTab(session: WebDriver, window: string, focus: WindowFocus, engine: Engine = 'webkit'): Tab {
  const here = async () => {
    if (focus.current === window) return;
    await session.switchTo().window(window);
    focus.current = window;
  };
  const poll = (expression: string, timeoutMs: number, click: boolean | undefined) =>
    session.executeAsyncScript<WebElement | true | { failed: string }>(`
        const done = arguments[arguments.length - 1];
        const deadline = Date.now() + ${Math.max(0, timeoutMs)};
        let lastError = '';
        const check = async () => {
          let value = null;
          try {
            value = await (${expression});
          } catch (error) {
            lastError = String(error);
          }
          if (value) done(${click ? 'value' : 'true'});
          else if (Date.now() > deadline) done({ failed: 'Waiting failed: ${timeoutMs}ms exceeded' + (lastError && ' (' + lastError + ')') });
          else setTimeout(check, 20);
        };
        check();`);
  return tabOver(engine, {
    evaluate: async (expression) => {
      await here();
      return session.executeScript(`return ${expression};`);
    },
    waitFor: async (expression, timeoutMs, click) => {
      await here();
      await session.manage().setTimeouts({ script: timeoutMs + 10_000 });
      const deadline = Date.now() + timeoutMs;
      let found: WebElement | true | { failed: string };
      for (;;) {
        try {
          found = await poll(expression, deadline - Date.now(), click);
          break;
        } catch (error) {
          // The page navigated (a reload the page made itself, as after an import) while the script waited: wait in the new document.
          if (!/before the unload event/.test(String(error)) || Date.now() > deadline) throw error;
        }
      }
      if (typeof found === 'object' && found !== null && 'failed' in found) throw new Error(found.failed);
      if (click) await (found as WebElement).click();
    },
    setFiles: async (expression, path) => {
      await here();
      // Classic WebDriver's way: keys sent to a file input are the path of the file to choose.
      await (await session.executeScript<WebElement>(`return ${expression};`)).sendKeys(path);
    },
    press: async (key) => {
      await here();
      await session.actions().sendKeys(WEBDRIVER_KEYS[key]).perform();
    },
    reload: async () => {
      await here();
      await session.navigate().refresh();
    },
    close: async () => {
      await here();
      const others = (await session.getAllWindowHandles()).filter((handle) => handle !== window);
      // The last window is the session: quit it. Otherwise the next command goes to a window still open.
      if (others[0] === undefined) return session.quit();
      await session.close();
      await session.switchTo().window(others[0]);
      focus.current = others[0];
    },
  });
}

function playwrightBrowser(browser: PlaywrightBrowser): EngineBrowser {
  return {
    engine: 'chromium',
    newProfile: async () => {
      // Tab.waitFor hands Playwright a string predicate, which it evaluates as a string made code: the page's
      // Content-Security-Policy refuses that ('unsafe-eval' is not allowed). The policy is tested elsewhere
      // (page-behaviours.test.ts), in contexts that keep it.
      const context = await browser.newContext({ bypassCSP: true });
      return {
        engine: 'chromium',
        newTab: async (url) => {
          const page = await context.newPage();
          const tab = playwrightTab(page);
          await page.goto(url);
          return tab;
        },
        close: () => context.close(),
      };
    },
    close: () => browser.close(),
  };
}

function puppeteerBrowser(browser: PuppeteerBrowser): EngineBrowser {
  return {
    engine: 'firefox',
    newProfile: async () => {
      // A WebDriver BiDi user context: storage, service workers and cookies of its own, as a profile has.
      const context = await browser.createBrowserContext();
      return {
        engine: 'firefox',
        newTab: async (url) => {
          const page = await context.newPage();
          const tab = puppeteerTab(page);
          await page.goto(url);
          return tab;
        },
        close: () => context.close(),
      };
    },
    close: () => browser.close(),
  };
}

function webKitBrowser(webkit: WebKit): EngineBrowser {
  return {
    engine: 'webkit',
    newProfile: async () => {
      // A WebDriver session is a MiniBrowser of its own, with its own (ephemeral) website data; its windows share it.
      const session = await webkit.newSession();
      const focus: WindowFocus = { current: await session.getWindowHandle() };
      let opened = false;
      return {
        engine: 'webkit',
        newTab: async (url) => {
          // The session's first window is the first tab; later ones are new windows of the same MiniBrowser.
          if (opened) focus.current = (await session.switchTo().newWindow('tab'), await session.getWindowHandle());
          opened = true;
          await session.get(url);
          return webDriverTab(session, focus.current, focus);
        },
        close: () => session.quit().catch(() => {}),
      };
    },
    close: () => webkit.close(),
  };
}

export async function launchEngine(engine: Engine): Promise<EngineBrowser> {
  switch (engine) {
    case 'chromium':
      return playwrightBrowser(await launchChromium());
    case 'firefox':
      return puppeteerBrowser(await launchFirefox());
    case 'webkit':
      return webKitBrowser(await launchWebKit());
  }
}

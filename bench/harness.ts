import type { Page } from 'playwright-core';

/** Mean time per call in milliseconds, after a short warm-up. */
export async function measure(iterations: number, fn: () => unknown): Promise<number> {
  for (let i = 0; i < Math.min(20, iterations); i++) await fn();
  const start = performance.now();
  for (let i = 0; i < iterations; i++) await fn();
  return (performance.now() - start) / iterations;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export type Row = [label: string, value: number, unit: string, note?: string];

export function report(name: string, context: string, rows: Row[]): void {
  console.log(`\n## ${name} (${context})`);
  const width = Math.max(...rows.map((r) => r[0].length));
  for (const [label, value, unit, note] of rows) {
    const shown = value >= 100 ? value.toFixed(0) : value >= 1 ? value.toFixed(2) : value.toFixed(4);
    console.log(`  ${label.padEnd(width)}  ${shown.padStart(10)} ${unit}${note ? `   (${note})` : ''}`);
  }
}

/**
 * A client-server request as a Matrix client makes it, JSON in and out, through any
 * Request → Response function (`fetch` over HTTP, or a homeserver's own `fetch`).
 * A non-2xx answer throws: a bench measures what works.
 */
export async function clientRequest(fetchFn: (request: Request) => Promise<Response>, url: string, method: string, token?: string, body?: unknown): Promise<any> {
  const response = await fetchFn(new Request(url, {
    method,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  }));
  const json = await response.json();
  if (!response.ok) throw new Error(`${method} ${new URL(url).pathname} → ${response.status}: ${JSON.stringify(json)}`);
  return json;
}

/**
 * A client-server request made from inside a page, so it goes through the page's
 * service worker as the page's own client's would (the function runs in the page,
 * so it cannot share clientRequest's code).
 */
export function pageRequest(page: Page, method: string, path: string, token?: string, body?: unknown): Promise<any> {
  return page.evaluate(
    async ({ method, path, token, body }) => {
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      if (token) headers['authorization'] = `Bearer ${token}`;
      // Rate-limited (the page's homeserver limits room creation), it waits as the answer asks, as a client does.
      for (;;) {
        const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
        const json = await response.json();
        if (response.status === 429) {
          await new Promise((resolve) => setTimeout(resolve, json.retry_after_ms ?? 1000));
          continue;
        }
        if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${JSON.stringify(json)}`);
        return json;
      }
    },
    { method, path, token, body },
  );
}

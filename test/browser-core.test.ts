// The core API in headless Chromium, loaded as plain ESM from a static server
// with the Wasm fetched and stream-compiled by the default source, must give
// the same results as the same calls in Node.

import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as kv from '../bindings/index.node.js';
import { scenario } from './browser/scenario.js';
import { haveChromium, launchChromium, type Browser } from './support/browser.js';
import { serveStatic, type StaticServer } from './support/static-server.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url)).replace(/\/$/, '');

describe.skipIf(!haveChromium)('the core in headless Chromium', () => {
  let server: StaticServer;
  let browser: Browser;
  beforeAll(async () => {
    server = await serveStatic(ROOT, { transpile: true });
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('loads the Wasm with compileStreaming and matches Node call for call', async () => {
    const page = await browser.context.newPage();
    const logs: string[] = [];
    page.on('console', (m) => logs.push(m.text()));
    page.on('pageerror', (e) => logs.push(String(e)));
    await page.goto(`${server.url}/test/browser/core.html`);
    await page.waitForFunction(() => (window as unknown as { done?: boolean }).done === true, undefined, { timeout: 60_000 });
    const got = await page.evaluate(() => {
      const w = window as unknown as Record<string, unknown>;
      return { failure: w['failure'], result: w['result'], streamingCalls: w['streamingCalls'], loadedBefore: w['loadedBefore'], syncError: w['syncError'] };
    });
    expect(got.failure, logs.join('\n')).toBeUndefined();
    expect(got.streamingCalls).toBe(1);
    expect(got.loadedBefore).toBe(false);
    // No synchronous loader in a browser: constructors ask for loadCore() first.
    expect(got.syncError).toBe('kvpool: the Wasm core is not loaded yet; `await loadCore()` (or use an async `create()`) first');
    expect(server.requests).toContain('/build/kvpool.wasm');
    const bare = ['/node_modules/@assemblyscript/loader/', '/node_modules/@msgpack/msgpack/', '/node_modules/yaml/browser/', '/node_modules/@noble/hashes/esm/'];
    expect(server.requests.filter((p) => p.startsWith('/node_modules/')).every((p) => bare.some((b) => p.startsWith(b)))).toBe(true);
    expect(got.result).toEqual(scenario(kv));
    await page.close();
  });
});

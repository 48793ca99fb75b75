// The pool inspector in headless Chromium: built with Vite, served statically,
// replaying a small workload. What the page shows must be the pool's state:
// the legend counts equal the pool's figures and the same replay run in Node,
// hovering a block names its state and holders, a dropped trace replaces the
// workload. Leaves a screenshot in test-results/inspector.png.

import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Page } from 'playwright-core';
import { build } from 'vite';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateWorkload } from '../bindings/replay/workload.js';
import { Session, type SessionOptions } from '../inspector/src/session.js';
import { haveChromium, launchChromium, type Browser } from './support/browser.js';
import { serveStatic, type StaticServer } from './support/static-server.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const RESULTS = join(ROOT, 'test-results');
// Small enough to see every block; at request 35 rank 0 has blocks in all five states.
const OPTIONS: SessionOptions = {
  numBlocks: 512, blockSize: 128, dpSize: 2, maxRunning: 8, requests: 60, seed: 3, publishAfterPrefill: false, eviction: 'lru', hostBlocks: 0, slidingWindow: 0,
};
const STOP_AT = 35;
const STATES = ['free', 'held', 'shared', 'cached', 'padding'] as const;

type Figures = { free: number[]; used: number[]; cached: number[]; evictable: number[]; states: number[][]; done: number };

/** The page's pool, read through the inspector's debug handle. */
function pageFigures(page: Page): Promise<Figures> {
  return page.evaluate(() => {
    const s = window.kvpoolInspector!.session!;
    return {
      free: s.pool.numFreeBlocks(),
      used: s.pool.numUsedBlocks(),
      cached: s.pool.numBlocksInPrefixCache(),
      evictable: s.pool.stats().map((x) => x.numEvictableBlocks),
      states: s.pool.managers.map((m) => Array.from(m.blockStates())),
      done: s.done,
    };
  });
}

async function legend(page: Page, rank: number): Promise<Record<(typeof STATES)[number], number>> {
  const out = {} as Record<(typeof STATES)[number], number>;
  for (const s of STATES) out[s] = Number(await page.getByTestId(`count-r${rank}-${s}`).textContent());
  return out;
}

const nextFrame = (page: Page) => page.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));

async function hoverBlock(page: Page, rank: number, id: number): Promise<string> {
  const grid = page.getByTestId(`grid-r${rank}`);
  const box = (await grid.boundingBox())!;
  const cols = Number(await grid.getAttribute('data-cols'));
  const cell = Number(await grid.getAttribute('data-cell'));
  await page.mouse.move(box.x + ((id % cols) + 0.5) * cell, box.y + (Math.floor(id / cols) + 0.5) * cell);
  const tip = page.getByTestId('tooltip');
  await tip.waitFor({ state: 'visible' });
  return (await tip.textContent())!;
}

describe.skipIf(!haveChromium)('the pool inspector in headless Chromium', () => {
  let server: StaticServer;
  let browser: Browser;
  let out: string;
  beforeAll(async () => {
    out = mkdtempSync(join(tmpdir(), 'kvpool-inspector-'));
    await build({ configFile: join(ROOT, 'inspector/vite.config.ts'), logLevel: 'silent', build: { outDir: out, emptyOutDir: true } });
    server = await serveStatic(out);
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await server?.close();
    if (out) rmSync(out, { recursive: true, force: true });
  });

  it('replays a workload and shows the pool as it is', async () => {
    const page = await browser.context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const q = new URLSearchParams(Object.entries(OPTIONS).map(([k, v]) => [k, String(v)]));
    await page.goto(`${server.url}/?${q}`);
    await page.waitForFunction(() => window.kvpoolInspector?.ready === true);
    await expect.poll(() => page.getByTestId('status').textContent()).toMatch(/^request 0 \/ 60 · running 0/);
    expect(await legend(page, 0)).toEqual({ free: 511, held: 0, shared: 0, cached: 0, padding: 1 });

    for (let i = 0; i < 3; i++) await page.click('#step');
    await expect.poll(() => page.getByTestId('status').textContent()).toMatch(/^request 3 \/ 60 /);

    // Play at one request every 4 frames, pause part-way, then step on to STOP_AT.
    await page.locator('#speed').fill('1');
    await page.click('#play');
    await page.waitForFunction(() => window.kvpoolInspector!.session!.done >= 12);
    await page.click('#play');
    expect(await page.textContent('#play')).toBe('Play');
    let done = await page.evaluate(() => window.kvpoolInspector!.session!.done);
    expect(done).toBeLessThan(STOP_AT);
    while (done < STOP_AT) {
      await page.keyboard.press('ArrowRight');
      done++;
    }
    await nextFrame(page);
    const fig = await pageFigures(page);
    expect(fig.done).toBe(STOP_AT);
    expect(await page.getByTestId('status').textContent()).toMatch(new RegExp(`^request ${STOP_AT} / 60 · running [1-8] `));

    // The same replay in Node, stepped as far: the same pool, block for block.
    const node = new Session(OPTIONS);
    try {
      node.step(fig.done);
      expect(fig.states).toEqual(node.pool.managers.map((m) => Array.from(m.blockStates())));
      expect(fig.free).toEqual(node.pool.numFreeBlocks());
      expect(fig.cached).toEqual(node.pool.numBlocksInPrefixCache());
    } finally {
      node.dispose();
    }

    for (let r = 0; r < OPTIONS.dpSize; r++) {
      const l = await legend(page, r);
      expect(l.free).toBe(fig.free[r]);
      expect(l.held + l.shared).toBe(fig.used[r]);
      expect(l.cached).toBe(fig.evictable[r]);
      expect(l.padding).toBe(1);
      expect(l.free + l.held + l.shared + l.cached + l.padding).toBe(OPTIONS.numBlocks);
      expect(await page.getByTestId(`figures-r${r}`).textContent()).toContain(`free ${fig.free[r]} · used ${fig.used[r]} · in prefix cache ${fig.cached[r]}`);
    }
    expect(fig.used.reduce((a, b) => a + b)).toBeGreaterThan(0);
    expect(fig.cached.reduce((a, b) => a + b)).toBeGreaterThan(0);
    const running = Number(await page.getByTestId('running-count').textContent());
    expect(running).toBeGreaterThan(0);
    expect(await page.locator('#sequences tbody tr:not([hidden])').count()).toBe(running);

    // Hover: each state by name, with the holders.
    const [free, held, shared, cached] = [0, 1, 2, 3].map((code) => fig.states[0]!.indexOf(code));
    expect(Math.min(free!, held!, shared!, cached!)).toBeGreaterThan(0);
    expect(await hoverBlock(page, 0, 0)).toBe('dp rank 0 · block 0 · padding');
    expect(await hoverBlock(page, 0, free!)).toBe(`dp rank 0 · block ${free} · free`);
    expect(await hoverBlock(page, 0, cached!)).toBe(`dp rank 0 · block ${cached} · cached\nholders: prefix cache`);
    expect(await hoverBlock(page, 0, shared!)).toMatch(new RegExp(`^dp rank 0 · block ${shared} · shared\nholders: request #\\d+, request #\\d+`));
    const text = await hoverBlock(page, 0, held);
    expect(text).toMatch(new RegExp(`^dp rank 0 · block ${held} · held\\nholders: request #\\d+`));
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: join(RESULTS, 'inspector.png'), fullPage: true });
    expect(errors).toEqual([]);
    await page.close();
  });

  it('replays a trace dropped on the page, and reports a malformed one', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${server.url}/?numBlocks=256&dpSize=1&requests=10`);
    await page.waitForFunction(() => window.kvpoolInspector?.ready === true);
    const trace = generateWorkload({ requests: 7, seed: 9 })
      .map((r) => JSON.stringify({ timestamp: r.timestamp, input_length: r.inputLength, output_length: r.outputLength, hash_ids: [...r.hashIds] }))
      .join('\n');
    const drop = (name: string, text: string) =>
      page.evaluate(
        ([n, t]) => {
          const dt = new DataTransfer();
          dt.items.add(new File([t!], n!, { type: 'text/plain' }));
          document.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
        },
        [name, text],
      );
    await drop('chats.jsonl', trace);
    await expect.poll(() => page.getByTestId('trace-name').textContent()).toBe('chats.jsonl (7 requests)');
    await expect.poll(() => page.getByTestId('status').textContent()).toMatch(/^request 0 \/ 7 /);
    await page.locator('#speed').fill('7');
    await page.click('#play');
    await expect.poll(() => page.getByTestId('status').textContent()).toMatch(/^request 7 \/ 7 · finished · running 0 /);
    expect(await legend(page, 0)).toMatchObject({ held: 0, shared: 0, padding: 1 });

    await page.setInputFiles('#trace-file', { name: 'bad.jsonl', mimeType: 'text/plain', buffer: Buffer.from('{"input_length": 5, "output_length": 1, "hash_ids": [1]}\n{"input_length": -1}\n') });
    await expect.poll(() => page.locator('#error').textContent()).toBe('bad.jsonl: trace line 2: "input_length" must be a non-negative integer, got -1');
    expect(await page.getByTestId('trace-name').textContent()).toBe('chats.jsonl (7 requests)');
    await page.close();
  });

  it("says what is wrong with the URL's options, naming the value given, and shows the defaults", async () => {
    const page = await browser.context.newPage();
    for (const [query, error] of [
      ['eviction=xyz', `the URL's options: options.eviction must be one of 'lru', 'lfu', 'priority', got "xyz"`],
      ['numBlocks=abc', "the URL's numBlocks=abc is not a number"],
      ['numBlocks=1', "the URL's options: options.numBlocks must be >= 2, got 1"],
    ]) {
      await page.goto(`${server.url}/?${query}`);
      await page.waitForFunction(() => window.kvpoolInspector?.ready === true);
      expect(await page.locator('#error').textContent()).toBe(`${error}; the defaults are shown instead`);
      expect(await page.locator('select[name="eviction"]').inputValue()).toBe('lru');
    }
    await page.close();
  });

  it('keeps the running-sequences table in step with the status line while playing', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${server.url}/?numBlocks=2000&requests=300&maxRunning=24&speed=4`);
    await page.waitForFunction(() => window.kvpoolInspector?.ready === true);
    await page.click('#play');
    const seen = new Set<number>();
    for (let i = 0; i < 20; i++) {
      // Both read in one evaluation: what the page shows at one moment.
      const [status, count, rows] = await page.evaluate(() => [
        document.getElementById('status')!.textContent!,
        document.querySelector('[data-testid="running-count"]')!.textContent!,
        document.querySelectorAll('#sequences tbody tr:not([hidden])').length,
      ] as const);
      const running = Number(/running (\d+)/.exec(status)![1]);
      expect(Number(count)).toBe(running);
      expect(rows).toBe(Math.min(running, 48));
      seen.add(Number(/^request (\d+)/.exec(status)![1]));
      await page.waitForTimeout(30);
    }
    expect(seen.size).toBeGreaterThan(3); // it was really playing
    await page.close();
  });

  it('offers the host tier, eviction policy and sliding window, and starts from the command line\'s defaults', async () => {
    const page = await browser.context.newPage();
    await page.goto(`${server.url}/`);
    await page.waitForFunction(() => window.kvpoolInspector?.ready === true);
    const opts = await page.evaluate(() => window.kvpoolInspector!.session!.options);
    expect(opts).toMatchObject({ numBlocks: 65536, dpSize: 1, blockSize: 16, maxRunning: 32, eviction: 'lru', hostBlocks: 0, slidingWindow: 0 });
    await page.goto(`${server.url}/?numBlocks=600&requests=80&hostBlocks=3000&eviction=lfu`);
    await page.waitForFunction(() => window.kvpoolInspector?.ready === true);
    expect(await page.locator('#ranks h2').allTextContents()).toEqual(['dp rank 0 · 600 blocks of 16 tokens', 'host tier · rank 0 · 3000 blocks of 16 tokens']);
    expect(await page.locator('select[name="eviction"]').inputValue()).toBe('lfu');
    await page.locator('#speed').fill('7');
    await page.click('#play');
    await expect.poll(() => page.getByTestId('status').textContent()).toMatch(/^request 80 \/ 80 · finished .* · host-tier$/);
    const mode = await page.evaluate(() => {
      const r = window.kvpoolInspector!.session!.result();
      return { mode: r.mode, loaded: r.mode === 'host-tier' ? r.hostTier.blocksLoaded : -1 };
    });
    expect(mode.mode).toBe('host-tier');
    expect(mode.loaded).toBeGreaterThan(0);
    // A sliding window through the form: a composite pool.
    await page.fill('input[name="hostBlocks"]', '0');
    await page.fill('input[name="slidingWindow"]', '256');
    await page.selectOption('select[name="eviction"]', 'lru');
    await page.click('#options button[type="submit"]');
    await expect.poll(() => page.locator('#ranks h2').allTextContents()).toEqual(['dp rank 0 · full sub-manager · 600 blocks of 16 tokens']);
    await page.close();
  });

  it('opened from file://, the static build says it needs a server', async () => {
    const page = await browser.context.newPage();
    await page.goto(`file://${join(out, 'index.html')}`);
    await expect.poll(() => page.locator('#needs-server').isVisible()).toBe(true);
    expect(await page.locator('#needs-server').textContent()).toMatch(/npm run inspect/);
    await page.close();
  });
});

// The fleet report as a planner reads it, in headless Chromium at 1400 px:
// the results table fits the page (it used to scroll sideways), every
// column and chart says its unit (queueing counts engine steps, latency is
// in ms), and a timed sweep's fixed options do not list the step clock's
// --step-ms. A screenshot is kept in test-results/fleet-report.png.

import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { capture } from './support/capture.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { fleetReportHtml } from '../bindings/node/fleet-report.js';
import { haveChromium, launchChromium, type Browser } from './support/browser.js';

const dir = mkdtempSync(join(tmpdir(), 'kvpool-report-layout-'));
const html = join(dir, 'timed.html');
const ARGS = ['sweep', '--requests', '60', '--max-running', '4', '--num-blocks', '2400,4800', '--eviction', 'lru,lfu', '--scheduler', 'continuous', '--speedup', '20,40',
  '--router', 'round-robin,least-loaded,approximate-prefix', '--engines', '1,2', '--slo-ttft-ms', '2000', '--workers', '2', '--no-progress'];

let table = '';
beforeAll(async () => {
  const r = await capture(() => main([...ARGS, '--report', html]));
  expect(r.code).toBe(0);
  table = r.out;
}, 240_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the timed fleet report says its units', () => {
  it('lists no step of the step clock among the fixed options, and the timing model by name', () => {
    const text = readFileSync(html, 'utf8');
    const fixed = /<p class="fixed">Fixed: (.*?)\.<\/p>/.exec(text)![1]!;
    expect(fixed).not.toContain('--step-ms');
    expect(fixed).toContain('timing model polynomial');
    expect(fixed).not.toMatch(/--timing|--concurrency 0|--publish-after-prefill false/);
  });

  it('heads its columns and axes with units: queueing in engine steps, latency in ms', () => {
    const text = readFileSync(html, 'utf8');
    const head = [.../<thead><tr>(.*?)<\/tr><\/thead>/.exec(text)![1]!.matchAll(/<th>(.*?)<\/th>/g)].map((m) => m[1]);
    expect(head).toEqual(expect.arrayContaining(['queueing mean (engine steps)', 'queueing p99 (engine steps)', 'p99 TTFT (ms)', 'p99 ITL (ms)', 'p99 end-to-end (ms)', 'output tokens/s']));
    expect(text).toContain('queueing in engine steps (a timed step lasts what the timing model says of its batch)');
    expect(text).toContain('>queueing p99 (engine steps)<');
    // The terminal's table too.
    expect(table.split('\n')[1]).toMatch(/queue mean \(steps\)\s+queue p99 \(steps\)\s+imbalance\s+rejected\s+TTFT p99 ms\s+TPOT p99 ms\s+ITL p99 ms\s+E2E p99 ms\s+output tok\/s$/);
  });
});

describe('the fixed options are flags the sweep takes, with the value every fleet had', () => {
  const fixedOf = async (options: FleetOptions[], varied: Parameters<typeof fleetReportHtml>[1]) =>
    /<p class="fixed">Fixed: (.*?)\.<\/p>/.exec(await fleetReportHtml(options.map((o) => fleetSync({ requests: 8, ...o })), varied))![1]!;

  it('names only flags kvpool sweep accepts, on either engine and with a profile', async () => {
    const help = (await capture(() => main(['sweep', '--help']))).out;
    const fixed = [
      await fixedOf([1, 2].map((engines) => ({ engines, timing: true })), ['engines']),
      await fixedOf([1, 2].map((engines) => ({ engines, engine: 'vllm' as const, timing: true })), ['engines']),
      await fixedOf([1, 2].map((engines) => ({ engines, engine: 'vllm' as const, schedulerReserveFullIsl: false, timing: true })), ['engines']),
      await fixedOf([1, 2].map((engines) => ({ engines, timing: { kind: 'profile' as const, profile: 'rtxpro6000/llama-3.1-8b' } })), ['engines']),
    ];
    for (const f of fixed) for (const [, flag] of f.matchAll(/(--[a-z-]+)/g)) expect(help, `${flag} in "${f}"`).toMatch(new RegExp(`^  ${flag}\\b`, 'm'));
    // What no flag sets is named as the command's configuration line names it.
    expect(fixed[0]).toContain('KV blocks per engine 65536');
    expect(fixed[1]).toContain('--engine vllm');
    expect(fixed[2]).toContain('--no-scheduler-reserve-full-isl');
  });

  it('leaves out what differs between fleets although no varied option names it (KV blocks per engine, over a --num-blocks axis)', async () => {
    const fixed = await fixedOf([1000, 2000].map((numBlocks) => ({ engines: 1, numBlocks, timing: true })), ['numBlocks']);
    expect(fixed).not.toMatch(/kv[ -]blocks[ -]per[ -]engine|kv[ -]gib[ -]per[ -]engine|--num-blocks/i);
    expect(fixed).toContain('--block-size 16');
  });
});

describe.skipIf(!haveChromium)('the timed fleet report in Chromium at 1400 px', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
  });

  it('fits the window: no sideways scrolling, the results table within its section', async () => {
    const page = await browser.context.newPage();
    await page.setViewportSize({ width: 1400, height: 1000 });
    await page.goto(pathToFileURL(html).href);
    mkdirSync('test-results', { recursive: true });
    await page.screenshot({ path: 'test-results/fleet-report.png', fullPage: true });
    const m = await page.evaluate(() => {
      const table = document.querySelector('#results table')!.getBoundingClientRect();
      const section = document.querySelector('#results')!.getBoundingClientRect();
      return { page: document.documentElement.scrollWidth, window: window.innerWidth, table: table.right, section: section.right, columns: document.querySelectorAll('#results th').length };
    });
    expect(m.columns).toBeGreaterThanOrEqual(17);
    expect(m.page).toBeLessThanOrEqual(m.window);
    expect(m.table).toBeLessThanOrEqual(m.section + 0.5);
    await page.close();
  });
});

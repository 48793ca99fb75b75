// The sweep report as a person sees it: the HTML file opened from disk in
// headless Chromium (no server, no network), a screenshot kept in
// test-results/, and every point of the charts carrying the value the
// results table gives for the same configuration.

import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { capture } from './support/capture.js';
import { haveChromium, launchChromium, type Browser } from './support/browser.js';

const dir = mkdtempSync(join(tmpdir(), 'kvpool-report-'));
const html = join(dir, 'sweep.html');
const svg = join(dir, 'sweep.svg');
const ARGS = ['sweep', '--requests', '300', '--num-blocks', '500,1000,2000', '--eviction', 'lru,lfu', '--host-blocks', '0,6000', '--dp-size', '1,2', '--workers', '2'];

/** "a: 1; b: x" -> { a: '1', b: 'x' } (Vega's description of a mark). */
function fields(label: string): Record<string, string> {
  // Numbers lose the thousands separators of the axis format.
  const value = (v: string) => (/^[\d,]+$/.test(v) ? v.replace(/,/g, '') : v);
  return Object.fromEntries(label.split('; ').map((kv) => [kv.slice(0, kv.indexOf(': ')), value(kv.slice(kv.indexOf(': ') + 2))]));
}

describe('kvpool sweep --report', () => {
  beforeAll(async () => {
    const r = await capture(() => main([...ARGS, '--report', html, '--format', 'json']));
    expect(r.err).toMatch(/report written to/);
    expect(r.code).toBe(0);
    const s = await capture(() => main([...ARGS, '--report', svg, '--format', 'json']));
    expect(s.code).toBe(0);
  });

  it('is self-contained: no script, no link, no request to anywhere', () => {
    const text = readFileSync(html, 'utf8');
    expect(text).not.toMatch(/<script|<link|<img|<iframe|@import|url\(/i);
    expect(text.match(/<svg/g)!.length).toBe(4); // hit rate, evictions, host tier, ranks
    expect(text).toMatch(/<table>/);
  });

  it('the .svg is the four charts in one drawing', () => {
    const text = readFileSync(svg, 'utf8');
    expect(text.startsWith('<svg')).toBe(true);
    expect(text.match(/<svg/g)!.length).toBe(1);
    for (const t of ['hit rate', 'evicted blocks', 'served from cache (device + host)', 'blocks allocated']) expect(text).toContain(t);
  });

  describe.skipIf(!haveChromium)('in Chromium', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await launchChromium();
    });
    afterAll(async () => {
      await browser?.close();
    });

    it('charts exactly the values of the results table (and leaves a screenshot in test-results/)', async () => {
      const page = await browser.context.newPage();
      const failed: string[] = [];
      page.on('requestfailed', (r) => failed.push(r.url()));
      page.on('request', (r) => {
        if (!r.url().startsWith('file:')) failed.push(r.url());
      });
      await page.goto(pathToFileURL(html).href);
      mkdirSync('test-results', { recursive: true });
      await page.screenshot({ path: 'test-results/sweep-report.png', fullPage: true });
      expect(failed).toEqual([]);

      const table = await page.$$eval('#results tbody tr', (trs) =>
        trs.map((tr) => Object.fromEntries(Array.from(tr.querySelectorAll('td')).map((td) => [td.dataset['key']!, td.dataset['value']!]))),
      );
      expect(table.length).toBe(24);
      const points = async (section: string) =>
        (await page.$$eval(`#${section} [aria-roledescription="point"]`, (ps) => ps.map((p) => p.getAttribute('aria-label')!))).map(fields);

      // Each point: "blocks per rank (log scale): 500; hit rate: 9.4428%; eviction: lru; with: host blocks 0, dp size 1".
      const key = (numBlocks: string, eviction: string, hostBlocks: string, dpSize: string) => `${numBlocks}/${eviction}/${hostBlocks}/${dpSize}`;
      const byConfig = new Map(table.map((r) => [key(r['numBlocks']!, r['eviction']!, r['hostBlocks']!, r['dpSize']!), r]));
      const withOf = (w: string) => Object.fromEntries(w.split(', ').map((x) => [x.replace(/ \d+$/, ''), x.replace(/^.* /, '')]));

      const hit = await points('hit-rate');
      expect(hit.length).toBe(24);
      for (const p of hit) {
        const w = withOf(p['with']!);
        const row = byConfig.get(key(p['blocks per rank (log scale)']!, p['eviction']!, w['host blocks']!, w['dp size']!))!;
        expect(row, JSON.stringify(p)).toBeDefined();
        expect(p['hit rate']).toBe(`${(Number(row['hitRate']) * 100).toFixed(4)}%`);
      }
      const ev = await points('evictions');
      expect(ev.length).toBe(24);
      for (const p of ev) {
        const w = withOf(p['with']!);
        const row = byConfig.get(key(p['blocks per rank (log scale)']!, p['eviction']!, w['host blocks']!, w['dp size']!))!;
        expect(p['evicted blocks']).toBe(row['evictedBlocks']);
      }
      // The host-tier chart: device + host share of the prompt blocks, for every configuration.
      const host = await points('host-tier');
      expect(host.length).toBe(24);
      for (const p of host) {
        const row = [...byConfig.values()].find(
          (r) => r['numBlocks'] === p['blocks per rank (log scale)'] && r['hostBlocks'] === p['host blocks'] && r['eviction'] === p['eviction'] && p['series']!.includes(`dp size ${r['dpSize']}`),
        )!;
        const served = (Number(row['matchedBlocks']) + Number(row['blocksLoaded'] || 0)) / Number(row['promptBlocks']);
        expect(p['served from cache (device + host)']).toBe(`${(served * 100).toFixed(4)}%`);
      }
      const hosted = table.filter((r) => r['hostBlocks'] !== '0');
      expect(hosted.every((r) => Number(r['blocksLoaded']) > 0)).toBe(true);
      // The ranks chart: one bar per rank of the dp size 2 configurations.
      const bars = await page.$$eval('#ranks [aria-roledescription="bar"]', (bs) => bs.map((b) => b.getAttribute('aria-label')!));
      expect(bars.length).toBe(12 * 2);
      await page.close();
    });
  });
});

// A report is written for whatever a sweep accepted. A thousand speed-ups
// used to print the table and then fail with "Maximum call stack size
// exceeded" (Vega-Lite turned the panel order into one nested expression
// per panel); a router name with U+2028 failed with "Unexpected token
// ILLEGAL" (the name went into that expression). A --report into a folder
// that is not there is refused before the sweep runs, not after it.

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import type { Router } from '../bindings/fleet/router.js';
import { fleetReportHtml, writeFleetReport } from '../bindings/node/fleet-report.js';
import { reportHtml } from '../bindings/node/report.js';
import { replaySync } from '../bindings/replay/replay.js';
import { capture } from './support/capture.js';

const dir = mkdtempSync(join(tmpdir(), 'kvpool-report-input-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const section = (html: string, id: string) => html.slice(html.indexOf(`<section id="${id}">`), html.indexOf('</section>', html.indexOf(`<section id="${id}">`)));
const tableRows = (html: string) => [...section(html, 'results').matchAll(/<tr><td.*?<\/tr>/g)];

describe('a report for any input the sweep accepted', () => {
  it('a thousand speed-ups: the table, then the report with a panel per speed-up', async () => {
    const speedups = Array.from({ length: 1000 }, (_, i) => String(1 + i / 10));
    const html = join(dir, 'thousand.html');
    const r = await capture(() => main(['sweep', '--requests', '6', '--engines', '1', '--timing', 'default', '--speedup', speedups.join(','), '--workers', '2', '--no-progress', '--report', html]));
    expect(r.err).not.toMatch(/call stack/);
    expect(r.code).toBe(0);
    expect(r.err).toContain(`kvpool: report written to ${html}`);
    const text = readFileSync(html, 'utf8');
    expect(tableRows(text).length).toBe(1000);
    // Every panel of the TTFT chart is there, in the table's order (its header names the speed-up).
    const ttft = section(text, 'ttft-p99');
    expect([...ttft.matchAll(/aria-roledescription="bar"/g)].length).toBe(1000);
    const headers = [...ttft.matchAll(/>speedup ([\d.]+)</g)].map((m) => m[1]);
    expect(headers).toEqual(speedups);
  }, 120_000);

  it('names with line separators, quotes and markup: the report is written, each name shown as it is, nothing of it run', async () => {
    const name = 'fast\u2028lane\u2029 "<script>alert(1)</script>" & \\ \'';
    const router: Router = { name, route: (q, f) => q.index % f.engines };
    const runs = [1, 2].map((engines) => fleetSync({ requests: 12, engines, timing: true, router })).map((r) => ({ ...r, config: { ...r.config, trace: 'trace\u2028"<b>"' } }));
    const file = join(dir, 'names.html');
    await writeFleetReport(file, runs, ['router', 'engines'], { ttftMs: 100 });
    const html = readFileSync(file, 'utf8');
    expect(html).not.toMatch(/<script|<b>/);
    expect(html).not.toMatch(/[\u2028\u2029]/);
    // The name in the results table, escaped, with each separator as a character reference.
    expect(section(html, 'results')).toContain('fast&#x2028;lane&#x2029; &quot;&lt;script&gt;alert(1)&lt;/script&gt;&quot; &amp; \\ \'');
    expect(html).toContain('<title>kvpool sweep: trace&#x2028;&quot;&lt;b&gt;&quot;, fleets</title>');
    // In the charts too: every bar names its router.
    expect([...section(html, 'ttft-p99').matchAll(/router: fast&#x2028;lane&#x2029; &quot;&lt;script&gt;/g)].length).toBe(2);
    // The plain sweep's report takes any trace name the same way.
    const run = replaySync({ requests: 20, numBlocks: 500 });
    const plain = await reportHtml([{ ...run, config: { ...run.config, trace: 'a\u2028b <i>' } }], []);
    expect(plain).toContain('kvpool sweep: a&#x2028;b &lt;i&gt;');
  }, 60_000);

  it('one fleet far slower than the rest: the axis is cut so the others and the target stay readable, the cut bar labelled with its value', async () => {
    // 40 requests at once: one engine queues them all, sixteen share them.
    const runs = [1, 4, 8, 16].map((engines) => fleetSync({ requests: 40, engines, timing: true, arrival: 'instant', maxRunning: 4 }));
    const p99 = runs.map((r) => r.latency!.ttftMs.p99);
    expect(p99[0]).toBeGreaterThan(4 * p99[2]!);
    const target = p99[3]! * 1.5;
    const html = await fleetReportHtml(runs, ['router', 'engines'], { ttftMs: target });
    const ttft = section(html, 'ttft-p99');
    const cut = Number(/The axis ends at ([\d,.]+)/.exec(ttft)![1]!.replace(/,/g, ''));
    // The axis ends well below the slowest fleet and above the target.
    expect(cut).toBeLessThan(p99[0]!);
    expect(cut).toBeGreaterThan(target);
    // Every bar keeps its own value in its description; the cut ones have it written on them.
    const bars = [...ttft.matchAll(/aria-label="([^"]*)" role="graphics-symbol" aria-roledescription="bar"/g)].map((m) => Number(/p99 TTFT \(ms\), cut at [\d,]+: ([\d,.]+)/.exec(m[1]!)![1]!.replace(/,/g, '')));
    expect(bars.map((b, i) => Math.abs(b - p99[i]!) <= 0.05)).toEqual([true, true, true, true]);
    const written = [...ttft.matchAll(/<text[^>]*>([\d,.]+)<\/text>/g)].map((m) => m[1]!);
    for (const v of p99.filter((x) => x > cut)) expect(written).toContain(v.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 }));
    // The hit rate (a share) is never cut.
    expect(section(html, 'fleet-hit-rate')).not.toContain('The axis ends at');
  }, 60_000);

  it('a --report whose folder is not there is refused before the sweep runs', async () => {
    const r = await capture(() => main(['sweep', '--requests', '2000', '--num-blocks', '500,1000', '--workers', '1', '--report', join(dir, 'missing', 'r.html')]));
    expect(r.code).toBe(1);
    expect(r.out).toBe('');
    expect(r.err).toBe(`kvpool: --report ${join(dir, 'missing', 'r.html')}: the folder ${join(dir, 'missing')} does not exist\n`);
    const f = await capture(() => main(['sweep', '--requests', '2000', '--engines', '1,2', '--report', join(dir, 'thousand.html', 'r.svg')]));
    expect(f.code).toBe(1);
    expect(f.out).toBe('');
    expect(f.err).toMatch(/is not a folder\n$/);
  });
});

// The report writers check what they are given before drawing anything:
// a hand-built call fails naming the argument (it failed deep in the
// chart code), and no file is written.

import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { fleetReportHtml, writeFleetReport } from '../bindings/node/fleet-report.js';
import { reportHtml, reportSvg, writeReport } from '../bindings/node/report.js';
import { replaySync } from '../bindings/replay/replay.js';

describe('report arguments', () => {
  const run = replaySync({ requests: 20 });
  const dir = mkdtempSync(join(tmpdir(), 'kvpool-report-args-'));

  it('refuses runs that are not results, and option names no sweep varies', async () => {
    await expect(reportSvg(null as never, [])).rejects.toThrow(new TypeError('runs must be an array of results, got null'));
    await expect(reportHtml([], ['numBlocks'])).rejects.toThrow(new RangeError('a report needs at least one result'));
    await expect(reportHtml([{ hitRate: 1 }] as never, ['numBlocks'])).rejects.toThrow(/^runs\[0\] must be a result with its config, got /);
    await expect(reportHtml([run], 'numBlocks' as never)).rejects.toThrow(/^varied must be an array of option names, got "numBlocks"$/);
    await expect(reportHtml([run], ['nope' as never])).rejects.toThrow(/^varied\[0\] must be one of numBlocks, blockSize, .*, got "nope"$/);
    await expect(fleetReportHtml([run] as never, ['router', 'nope' as never])).rejects.toThrow(/^varied\[1\] must be one of numBlocks, .*engines, router, got "nope"$/);
    // A good call still draws.
    expect(await reportSvg([run], [])).toMatch(/^<svg/);
  });

  it('writes no file when refusing', async () => {
    const file = join(dir, 'x.html');
    await expect(writeReport(file, [run], ['nope' as never])).rejects.toThrow(RangeError);
    await expect(writeFleetReport(file, null as never, [])).rejects.toThrow(TypeError);
    await expect(writeReport(5 as never, [run], [])).rejects.toThrow(new TypeError('file must be a path, got 5'));
    expect(existsSync(file)).toBe(false);
  });
});

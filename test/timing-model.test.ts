// The timing models (docs/timing.md): the default polynomial and the
// profiled table on hand-computed batches, the table's interpolation and
// extension, monotonicity, and the loaders' refusals naming line and field.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readTimingFile } from '../bindings/node/timing-file.js';
import { DEFAULT_TIMING, emptyStepBatch, parseTimingSpec, timingModel, type StepBatch } from '../bindings/timing/timing-model.js';
import { parseTimingTable } from '../bindings/timing/timing-table.js';

const batch = (b: Partial<StepBatch>): StepBatch => ({ ...emptyStepBatch(), ...b });

describe('the default polynomial', () => {
  const m = timingModel();
  it('prices a step by its documented coefficients', () => {
    expect(m.name).toBe('polynomial');
    expect(m.stepMs(batch({}))).toBe(0); // nothing computed: no step
    // 5 ms base + 1000 x 0.06 + 1000^2 x 2e-6 = 67 ms; cached tokens cost nothing.
    expect(m.stepMs(batch({ prefillTokens: 1000, cachedTokens: 5000, prefillSeqs: 1 }))).toBeCloseTo(67, 9);
    // 32 decodes of 2,000 tokens of context: 5 + 32 x 0.05 + 64,000 x 2e-5 = 7.88 ms.
    expect(m.stepMs(batch({ decodeSeqs: 32, decodeContextTokens: 64_000 }))).toBeCloseTo(7.88, 9);
    // 10 host blocks of 2 MiB at 25 GB/s: 0.8389 ms on top of the base.
    expect(m.stepMs(batch({ hostLoadedBlocks: 10 }))).toBeCloseTo(5 + (10 * 2 * 1024 * 1024) / 25e6, 9);
  });

  it('never gets cheaper as a batch computes more', () => {
    const b = fc.record({ prefillTokens: fc.nat(20_000), cachedTokens: fc.nat(20_000), prefillSeqs: fc.nat(64), decodeSeqs: fc.nat(512), decodeContextTokens: fc.nat(1_000_000), hostLoadedBlocks: fc.nat(1000) }).map((x) => ({ ...emptyStepBatch(), ...x }));
    const field = fc.constantFrom('prefillTokens', 'decodeSeqs', 'decodeContextTokens', 'hostLoadedBlocks' as const);
    fc.assert(fc.property(b, field, fc.integer({ min: 1, max: 1000 }), (x, f, more) => m.stepMs({ ...x, [f]: x[f] + more }) >= m.stepMs(x)));
  });

  it('takes coefficients of its own, the rest from the defaults, and names a bad one', () => {
    const fast = timingModel({ kind: 'polynomial', baseMs: 1, prefillMsPerToken: 0.01 });
    expect(fast.stepMs(batch({ prefillTokens: 100 }))).toBeCloseTo(1 + 1 + 0.02, 9);
    expect(parseTimingSpec({ kind: 'polynomial', baseMs: 2 })).toEqual({ ...DEFAULT_TIMING, baseMs: 2 });
    expect(() => timingModel({ kind: 'polynomial', baseMs: -1 } as never)).toThrow(/timing.baseMs must be a finite number >= 0, got -1/);
    expect(() => timingModel({ kind: 'polynomial', hostGBps: 0 } as never)).toThrow(/timing.hostGBps must be a finite number > 0/);
    expect(() => timingModel({ kind: 'polynomial', base: 1 } as never)).toThrow(/unknown option "base"/);
    expect(() => timingModel({ kind: 'cubic' } as never)).toThrow(/timing.kind must be "polynomial" or "table", got "cubic"/);
    const own = { name: 'mine', stepMs: () => 3 };
    expect(timingModel(own)).toBe(own);
  });
});

describe('a profiled table', () => {
  const m = timingModel({ kind: 'table', prefill: [[100, 10], [200, 30]], decode: [[1, 8], [64, 16]], decodeMsPerContextToken: 0.001 });
  it('interpolates between points, from the origin, and along the last segment past the end', () => {
    expect(m.stepMs(batch({ prefillTokens: 150 }))).toBeCloseTo(20, 9);
    expect(m.stepMs(batch({ prefillTokens: 50 }))).toBeCloseTo(5, 9);
    expect(m.stepMs(batch({ prefillTokens: 300 }))).toBeCloseTo(50, 9);
    // A decode step of 32: 8 + (16 - 8) x 31 / 63; plus 1,000 context tokens at 0.001.
    expect(m.stepMs(batch({ decodeSeqs: 32, decodeContextTokens: 1000 }))).toBeCloseTo(8 + (8 * 31) / 63 + 1, 9);
    expect(m.stepMs(batch({ prefillTokens: 100, decodeSeqs: 1 }))).toBeCloseTo(18, 9);
    expect(m.stepMs(batch({}))).toBe(0);
  });

  it('reads JSON and CSV alike, and names the line or field it refuses', () => {
    const json = parseTimingTable('{"prefill": [[100, 10], [200, 30]], "decode": [[1, 8], [64, 16]]}', 'json');
    const csv = parseTimingTable('phase,x,ms\nprefill,200,30\nprefill,100,10\n# measured on one GPU\ndecode,1,8\ndecode,64,16\n', 'csv');
    expect(csv).toEqual(json);
    expect(json.kind).toBe('table');
    expect(() => parseTimingTable('tokens,ms\n', 'csv')).toThrow(/line 1: the header must be "phase,x,ms"/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,100,10\nwarmup,1,2\n', 'csv')).toThrow(/line 3: phase must be prefill or decode, got "warmup"/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,100,ten\ndecode,1,1', 'csv')).toThrow(/line 2: ms must be a number, got "ten"/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,100,10\n', 'csv')).toThrow(/timing table.decode must be a non-empty array/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,100,10\nprefill,100,12\ndecode,1,1', 'csv')).toThrow(/prefill\[1\]\[0\] must be larger than the point before \(100\)/);
    expect(() => parseTimingTable('{"prefill": [[100, -1]], "decode": [[1, 1]]}', 'json')).toThrow(/timing table.prefill\[0\]\[1\] must be a finite number >= 0, got -1/);
    expect(() => parseTimingTable('{"prefill": ', 'json')).toThrow(/timing table: not JSON/);
    expect(() => parseTimingTable('[]', 'json')).toThrow(/must be a JSON object/);
    expect(() => parseTimingTable('x', 'yaml' as never)).toThrow(/format must be "json" or "csv"/);
  });

  it('comes from a .json or .csv file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-timing-'));
    try {
      writeFileSync(join(dir, 'gpu.csv'), 'phase,x,ms\nprefill,100,10\ndecode,1,8\n');
      expect(readTimingFile(join(dir, 'gpu.csv'))).toMatchObject({ kind: 'table', prefill: [[100, 10]], decode: [[1, 8]] });
      writeFileSync(join(dir, 'bad.csv'), 'phase,x,ms\nprefill,0,10\ndecode,1,8\n');
      expect(() => readTimingFile(join(dir, 'bad.csv'))).toThrow(/bad\.csv: timing table.prefill\[0\]\[0\] must be a finite number > 0, got 0/);
      expect(() => readTimingFile(join(dir, 'gpu.txt'))).toThrow(/must end in .json or .csv/);
      expect(() => readTimingFile(join(dir, 'none.json'))).toThrow(/none\.json/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});

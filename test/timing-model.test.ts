// The timing models (docs/timing.md): the default polynomial and the
// profiled table on hand-computed batches, per chunk; the table's
// interpolation and extension, monotonicity, names with a content hash, and
// the loaders' refusals naming line and field.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readTimingFile } from '../bindings/node/timing-file.js';
import { fleetSync } from '../bindings/fleet/fleet.js';
import { addChunk, addDecode, DEFAULT_TIMING, emptyStepBatch, parseTimingSpec, timingModel, type StepBatch } from '../bindings/timing/timing-model.js';
import { parseTimingTable } from '../bindings/timing/timing-table.js';

/** A batch of prefill chunks [tokens, history] and decodes of the given contexts, plus host loads. */
function batch(chunks: ReadonlyArray<readonly [number, number]> = [], decodes: readonly number[] = [], hostLoadedBlocks = 0): StepBatch {
  const b = emptyStepBatch();
  for (const [t, h] of chunks) addChunk(b, t, h);
  for (const k of decodes) addDecode(b, k);
  b.hostLoadedBlocks = hostLoadedBlocks;
  return b;
}

describe('the default polynomial', () => {
  const m = timingModel();
  it('prices a step by its documented coefficients, attention per chunk', () => {
    expect(m.name).toBe('polynomial');
    expect(m.stepMs(batch())).toBe(0); // nothing computed: no step
    // One chunk of 1,000 after 5,000 cached tokens: 5 + 1000 x 0.06 + 2e-6 x 1000 x (1000 + 2 x 5000) = 87 ms.
    expect(m.stepMs(batch([[1000, 5000]]))).toBeCloseTo(87, 9);
    // 32 decodes of 2,000 tokens of context: 5 + 32 x 0.05 + 64,000 x 2e-5 = 7.88 ms.
    expect(m.stepMs(batch([], Array.from({ length: 32 }, () => 2000)))).toBeCloseTo(7.88, 9);
    // 10 host blocks of 2 MiB at 25 GB/s: 0.8389 ms on top of the base.
    expect(m.stepMs(batch([], [], 10))).toBeCloseTo(5 + (10 * 2 * 1024 * 1024) / 25e6, 9);
  });

  it('charges ten prompts in one step what ten steps of one cost, less nine fixed costs', () => {
    // One 12k prompt: 5 + 720 + 288 = 1,013 ms; ten in one step: 5 + 7,200 + 2,880 = 10,085 ms (the step's total squared gave 36,005).
    const one = m.stepMs(batch([[12_000, 0]]));
    const ten = m.stepMs(batch(Array.from({ length: 10 }, () => [12_000, 0] as const)));
    expect(one).toBeCloseTo(1013, 9);
    expect(ten).toBeCloseTo(10_085, 9);
    expect(10 * one - ten).toBeCloseTo(9 * DEFAULT_TIMING.baseMs, 9);
  });

  it('charges a prompt the same attention whether computed in one chunk or several', () => {
    const whole = m.stepMs(batch([[12_000, 0]]));
    const chunked = m.stepMs(batch([[8192, 0]])) + m.stepMs(batch([[3808, 8192]]));
    expect(chunked - whole).toBeCloseTo(DEFAULT_TIMING.baseMs, 9);
  });

  it('never gets cheaper as a batch computes more', () => {
    const chunk = fc.tuple(fc.integer({ min: 1, max: 8000 }), fc.nat(50_000));
    const shape = fc.record({ chunks: fc.array(chunk, { maxLength: 8 }), decodes: fc.array(fc.integer({ min: 1, max: 100_000 }), { maxLength: 64 }), host: fc.nat(100) });
    const more = fc.constantFrom('chunk', 'longer', 'history', 'decode', 'context', 'host' as const);
    fc.assert(
      fc.property(shape, more, fc.integer({ min: 1, max: 1000 }), (s, what, n) => {
        const before = m.stepMs(batch(s.chunks, s.decodes, s.host));
        const chunks = s.chunks.map((c) => [...c] as [number, number]);
        const decodes = [...s.decodes];
        let host = s.host;
        if (what === 'chunk' || chunks.length === 0) chunks.push([n, 0]);
        else if (what === 'longer') chunks[0]![0] += n;
        else if (what === 'history') chunks[0]![1] += n;
        else if (what === 'decode') decodes.push(n);
        else if (what === 'context' && decodes.length > 0) decodes[0]! += n;
        else host += n;
        return m.stepMs(batch(chunks, decodes, host)) >= before;
      }),
    );
  });

  it('takes coefficients of its own, the rest from the defaults, names them by their hash, and names a bad one', () => {
    const fast = timingModel({ kind: 'polynomial', baseMs: 1, prefillMsPerToken: 0.01 });
    expect(fast.stepMs(batch([[100, 0]]))).toBeCloseTo(1 + 1 + 0.02, 9);
    expect(fast.name).toMatch(/^polynomial sha256:[0-9a-f]{12}$/);
    expect(timingModel({ kind: 'polynomial', baseMs: 1, prefillMsPerToken: 0.01 }).name).toBe(fast.name);
    expect(timingModel({ kind: 'polynomial', baseMs: 2 }).name).not.toBe(fast.name);
    expect(timingModel({ kind: 'polynomial', baseMs: 5 }).name).toBe('polynomial'); // the defaults, said again
    expect(parseTimingSpec({ kind: 'polynomial', baseMs: 2 })).toEqual({ ...DEFAULT_TIMING, baseMs: 2 });
    expect(() => timingModel({ kind: 'polynomial', baseMs: -1 } as never)).toThrow(/timing.baseMs must be a finite number >= 0, got -1/);
    expect(() => timingModel({ kind: 'polynomial', hostGBps: 0 } as never)).toThrow(/timing.hostGBps must be a finite number > 0/);
    expect(() => timingModel({ kind: 'polynomial', base: 1 } as never)).toThrow(/unknown option "base"/);
    expect(() => timingModel({ kind: 'cubic' } as never)).toThrow(/timing.kind must be "polynomial", "table" or "profile", got "cubic"/);
    const own = { name: 'mine', stepMs: () => 3 };
    expect(timingModel(own)).toBe(own);
  });

  it('is what true names, as fleet()\'s timing: true does; other non-objects are refused', () => {
    const t = timingModel(true);
    expect(t.name).toBe('polynomial');
    const b = batch([[1000, 5000]], [2000, 300]);
    expect(t.stepMs(b)).toBe(m.stepMs(b));
    expect(fleetSync({ requests: 20, engines: 1, timing: true }).config.timing).toBe(t.name);
    expect(() => timingModel(false as never)).toThrow(/timing must be an object, got false/);
    expect(() => timingModel(null as never)).toThrow(/timing must be an object, got null/);
  });

  it('refuses a batch whose lists disagree with its counts', () => {
    expect(() => m.stepMs({ ...emptyStepBatch(), prefillTokens: 1000, prefillSeqs: 1 })).toThrow(/prefillSeqs is 1 but chunkTokens, chunkContextTokens and chunkRanks have 0, 0 and 0 entries/);
    expect(() => m.stepMs({ ...emptyStepBatch(), decodeSeqs: 2, decodeContextTokens: 10 })).toThrow(/decodeSeqs is 2 but decodeContexts and decodeRanks have 0 and 0 entries/);
  });
});

describe('a profiled table', () => {
  const m = timingModel({ kind: 'table', prefill: [[100, 10], [200, 30]], decode: [[1, 8], [64, 16]], decodeMsPerContextToken: 0.001 });
  it('interpolates between points, from the origin, and along the last segment past the end', () => {
    expect(m.stepMs(batch([[150, 0]]))).toBeCloseTo(20, 9);
    expect(m.stepMs(batch([[50, 0]]))).toBeCloseTo(5, 9);
    expect(m.stepMs(batch([[300, 0]]))).toBeCloseTo(50, 9);
    // A decode step of 32: 8 + (16 - 8) x 31 / 63; plus 32 x 40 context tokens at 0.001.
    expect(m.stepMs(batch([], Array.from({ length: 32 }, () => 40)))).toBeCloseTo(8 + (8 * 31) / 63 + 1.28, 9);
    expect(m.stepMs(batch([[100, 0]], [1]))).toBeCloseTo(18.001, 9);
    expect(m.stepMs(batch())).toBe(0);
  });

  it('charges several prompts the smaller of the curve at their total and the curve summed over them', () => {
    // Convex past 100 tokens: two of 150 cost 2 x 20 = 40 ms, not the curve at 300 (50 ms).
    expect(m.stepMs(batch([[150, 0], [150, 0]]))).toBeCloseTo(40, 9);
    // With a fixed cost, three prompts of 100 cost the curve at 300 (one fixed cost), not three times the curve at 100.
    const fixed = timingModel({ kind: 'table', prefill: [[1, 5], [1000, 55]], decode: [[1, 1]] });
    expect(fixed.stepMs(batch([[100, 0], [100, 0], [100, 0]]))).toBeCloseTo(5 + (299 * 50) / 999, 9);
  });

  it('is named by its points, and by its file', () => {
    expect(m.name).toMatch(/^table sha256:[0-9a-f]{12}$/);
    expect(timingModel({ kind: 'table', prefill: [[100, 10], [200, 31]], decode: [[1, 8], [64, 16]], decodeMsPerContextToken: 0.001 }).name).not.toBe(m.name);
    expect(timingModel({ kind: 'table', name: 'h100.csv', prefill: [[100, 10], [200, 30]], decode: [[1, 8], [64, 16]], decodeMsPerContextToken: 0.001 }).name).toBe(m.name.replace('table ', 'table h100.csv '));
  });

  it('reads JSON and CSV alike, and names the line or field it refuses', () => {
    const json = parseTimingTable('{"prefill": [[100, 10], [200, 30]], "decode": [[1, 8], [64, 16]]}', 'json');
    const csv = parseTimingTable('phase,x,ms\nprefill,200,30\nprefill,100,10\n# measured on one GPU\ndecode,1,8\ndecode,64,16\n', 'csv');
    expect(csv).toEqual(json);
    expect(json.kind).toBe('table');
    // A byte-order mark is accepted in both forms.
    expect(parseTimingTable('\ufeff{"prefill": [[100, 10], [200, 30]], "decode": [[1, 8], [64, 16]]}', 'json')).toEqual(json);
    expect(parseTimingTable('\ufeffphase,x,ms\nprefill,100,10\nprefill,200,30\ndecode,1,8\ndecode,64,16\n', 'csv')).toEqual(json);
    expect(() => parseTimingTable('tokens,ms\n', 'csv')).toThrow(/line 1: the header must be "phase,x,ms"/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,100,10\nwarmup,1,2\n', 'csv')).toThrow(/line 3: phase must be prefill or decode, got "warmup"/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,100,ten\ndecode,1,1', 'csv')).toThrow(/line 2: ms must be a number, got "ten"/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,100,10\n', 'csv')).toThrow(/timing table.decode must be a non-empty array/);
    // The line of the file, whatever the order of the points.
    expect(() => parseTimingTable('phase,x,ms\nprefill,300,10\n\nprefill,100,10\nprefill,300,12\ndecode,1,1', 'csv')).toThrow(/line 5: prefill x 300 is given twice \(line 2\)/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,300,10\ndecode,0.5,1', 'csv')).toThrow(/line 3: x must be at least 1, got 0\.5/);
    expect(() => parseTimingTable('phase,x,ms\nprefill,300,10\ndecode,2,-1', 'csv')).toThrow(/line 3: ms must be at least 0, got -1/);
    expect(() => parseTimingTable('{"prefill": [[0.5, 1]], "decode": [[1, 1]]}', 'json')).toThrow(/timing table.prefill\[0\]\[0\] must be at least 1 \(tokens or sequences\), got 0\.5/);
    expect(() => parseTimingTable('{"prefill": [[100, -1]], "decode": [[1, 1]]}', 'json')).toThrow(/timing table.prefill\[0\]\[1\] must be a finite number >= 0, got -1/);
    expect(() => parseTimingTable('{"prefill": ', 'json')).toThrow(/timing table: not JSON/);
    expect(() => parseTimingTable('[]', 'json')).toThrow(/must be a JSON object/);
    expect(() => parseTimingTable('x', 'yaml' as never)).toThrow(/format must be "json" or "csv"/);
  });

  it('comes from a .json or .csv file, named by it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-timing-'));
    try {
      writeFileSync(join(dir, 'gpu.csv'), 'phase,x,ms\nprefill,100,10\ndecode,1,8\n');
      expect(readTimingFile(join(dir, 'gpu.csv'))).toMatchObject({ kind: 'table', name: 'gpu.csv', prefill: [[100, 10]], decode: [[1, 8]] });
      expect(timingModel(readTimingFile(join(dir, 'gpu.csv'))).name).toMatch(/^table gpu\.csv sha256:[0-9a-f]{12}$/);
      writeFileSync(join(dir, 'bad.csv'), 'phase,x,ms\nprefill,0,10\ndecode,1,8\n');
      expect(() => readTimingFile(join(dir, 'bad.csv'))).toThrow(/bad\.csv: timing table line 2: x must be at least 1, got 0/);
      expect(() => readTimingFile(join(dir, 'gpu.txt'))).toThrow(/must end in .json or .csv/);
      expect(() => readTimingFile(join(dir, 'none.json'))).toThrow(/none\.json/);
    } finally {
      rmSync(dir, { recursive: true });
    }
  });
});

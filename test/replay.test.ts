// The replay kernel (docs/replay-kernel.md): the Wasm pool and the reference model must
// give the identical result object (all but timings), on the built-in
// workload and on the public Mooncake conversation trace.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { plainCore } from '../bindings/core/plain-core.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { MAX_HASH_ID, nextOutputToken, outputToken, promptTokens, promptTokensJs, type ReplayResult } from '../bindings/replay/kernel.js';
import { runReplay } from '../bindings/replay/stepper.js';
import { replaySync, type CompositeReplayRun, type HostTierReplayRun, type LinearStateReplayRun, type ReplayRun } from '../bindings/replay/replay.js';
import { parseTrace, type TraceRequest } from '../bindings/replay/trace.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import { ModelReplayTarget } from '../model/replay-target.js';

import { TRACE_PATH as TRACE, haveTrace } from './support/externals.js';
import { capture } from './support/capture.js';
import { figures } from './support/replay-figures.js';


function both(trace: TraceRequest[], o: { numBlocks: number; blockSize?: number; maxRunning?: number; publishAfterPrefill?: boolean; limit?: number; dpSize?: number }) {
  const blockSize = o.blockSize ?? 16;
  const core = replaySync({ trace, numBlocks: o.numBlocks, blockSize, maxRunning: o.maxRunning, publishAfterPrefill: o.publishAfterPrefill, limit: o.limit, dpSize: o.dpSize });
  const model = runReplay(new ModelReplayTarget(new ModelBlockManagerPool({ numBlocks: o.numBlocks, blockSize, dpSize: o.dpSize })), trace, {
    blockSize,
    maxRunning: o.maxRunning ?? 32,
    publishAfterPrefill: o.publishAfterPrefill ?? false,
    limit: o.limit,
  });
  return { core, model };
}

describe('replay: core vs reference model', () => {
  const workload = generateWorkload({ requests: 400, seed: 7 });

  it('agrees on the built-in workload with heavy eviction', () => {
    const { core, model } = both(workload, { numBlocks: 3000 });
    expect(core.evictedBlocks).toBeGreaterThan(1000);
    expect(core.matchedBlocks).toBeGreaterThan(1000);
    expect(figures(core)).toEqual(figures(model));
    expect(core.freeBlocksAtEnd + core.cachedBlocksAtEnd).toBe(2999);
  });

  it('agrees with publishing after prefill, when running sequences hold cached blocks', () => {
    const { core, model } = both(workload, { numBlocks: 2500, publishAfterPrefill: true, maxRunning: 8 });
    expect(figures(core)).toEqual(figures(model));
  });

  it('agrees when requests are rejected and decodes truncated', () => {
    const { core, model } = both(workload.slice(0, 120), { numBlocks: 600, maxRunning: 4, blockSize: 8 });
    expect(core.rejected + core.truncated).toBeGreaterThan(0);
    expect(figures(core)).toEqual(figures(model));
  });

  it('agrees with several dp ranks (a new request goes to the rank with the most free blocks)', () => {
    const { core, model } = both(workload, { numBlocks: 1200, dpSize: 3, maxRunning: 12 });
    expect(core.evictedBlocks).toBeGreaterThan(1000);
    expect(figures(core)).toEqual(figures(model));
    expect(core.freeBlocksAtEnd + core.cachedBlocksAtEnd).toBe(3 * 1199);
  });

  it.skipIf(!haveTrace)('agrees on the first 2,000 requests of the Mooncake conversation trace', async () => {
    const trace = await readTraceFile(TRACE, 2000);
    const { core, model } = both(trace, { numBlocks: 65536 });
    expect(core.requests).toBe(2000);
    expect(figures(core)).toEqual(figures(model));
  });

  it.skipIf(!haveTrace)('agrees on the trace with a small cache and publishing after prefill', async () => {
    const trace = await readTraceFile(TRACE, 300);
    const { core, model } = both(trace, { numBlocks: 16384, publishAfterPrefill: true });
    expect(figures(core)).toEqual(figures(model));
  });
});

describe('replay: tokens (docs/replay-kernel.md)', () => {
  it('prompt token p is hash_ids[p / 512] * 512 + p % 512, for every length class of the last chunk', () => {
    for (const L of [0, 1, 7, 8, 9, 511, 512, 513, 514, 515, 516, 1024, 1100, 1535, 1536]) {
      const hashIds = Int32Array.of(7, 3, 1_000_000, 0);
      const req: TraceRequest = { timestamp: 0, inputLength: L, outputLength: 0, hashIds };
      // The core's SIMD fill (promptTokens uses it once the core is loaded) and the plain JS one.
      plainCore();
      for (const fill of [promptTokens, promptTokensJs]) {
        const t = fill(req, new Int32Array(L + 5).fill(-9));
        for (let p = 0; p < L; p++) expect(t[p], `${fill.name} L=${L} p=${p}`).toBe(hashIds[Math.floor(p / 512)]! * 512 + (p % 512));
        for (let p = L; p < L + 5; p++) expect(t[p]).toBe(-9); // nothing past the prompt is written
      }
    }
  });

  it('promptTokens rejects a request short of hash ids, a bad length or a short buffer, writing nothing', () => {
    plainCore();
    for (const fill of [promptTokens, promptTokensJs]) {
      const t = new Int32Array(2000).fill(-9);
      const req = (inputLength: number, ids: number[]): TraceRequest => ({ inputLength, outputLength: 0, hashIds: Int32Array.from(ids) });
      expect(() => fill(req(1025, [1, 2]), t)).toThrow(new RangeError('req.hashIds has 2 ids but inputLength 1025 needs 3'));
      expect(() => fill(req(-1, []), t)).toThrow(/req.inputLength must be in \[0, 268435456\], got -1/);
      expect(() => fill(req(1.5, [1]), t)).toThrow(/req.inputLength must be an integer, got 1.5/);
      expect(() => fill(req(600, [1, 2]), new Int32Array(599))).toThrow(/out must be an Int32Array of length >= req.inputLength 600, got length 599/);
      expect(() => fill(req(600, [1, 2]), [] as unknown as Int32Array)).toThrow(/t must be an Int32Array .* got an array of length 0/);
      // A bad hash id is named by its index (only the ids the prompt uses are read).
      const ids = (v: unknown): TraceRequest => ({ inputLength: 1100, outputLength: 0, hashIds: [4, v, 6, 'unused'] as unknown as Int32Array });
      expect(() => fill(ids(-1), t)).toThrow(new RangeError(`req.hashIds[1] must be in [0, ${MAX_HASH_ID}], got -1`));
      expect(() => fill(ids(MAX_HASH_ID + 1), t)).toThrow(new RangeError(`req.hashIds[1] must be in [0, ${MAX_HASH_ID}], got ${MAX_HASH_ID + 1}`));
      expect(() => fill(ids(2.5), t)).toThrow(new RangeError('req.hashIds[1] must be an integer, got 2.5'));
      expect(() => fill(ids('5'), t)).toThrow(new TypeError('req.hashIds[1] must be a number, got "5"'));
      expect(t.every((x) => x === -9)).toBe(true);
      expect(fill(ids(MAX_HASH_ID), t)[600]).toBe(MAX_HASH_ID * 512 + 88);
    }
  });

  it('output token i of request r is 2^30 + ((r * 65536 + i) mod 2^30)', () => {
    expect(outputToken(0, 0)).toBe(1073741824);
    expect(outputToken(3, 5)).toBe(1073741824 + 3 * 65536 + 5);
    expect(outputToken(16384, 7)).toBe(1073741824 + 7); // 16384 * 65536 = 2^30 wraps to 0
  });

  it('nextOutputToken steps exactly as outputToken does, across the wrap at 2^31 - 1', () => {
    for (const r of [0, 1, 16383, 16384, 40000]) {
      // Request 16383 wraps at i = 65536 (r * 65536 + i reaches 2^30).
      let t = outputToken(r, 65530);
      for (let i = 65530; i < 65545; i++, t = nextOutputToken(t)) expect(t, `r=${r} i=${i}`).toBe(outputToken(r, i));
    }
  });
});

describe('replay: trace input', () => {
  it('reports malformed lines with their number', () => {
    expect(() => parseTrace('{"input_length": 4, "output_length": 1, "hash_ids": [1]}\n{"input_length": 4}')).toThrow(
      /trace line 2: "output_length" must be a non-negative integer, got undefined/,
    );
    expect(() => parseTrace('nope')).toThrow(/trace line 1: not valid JSON/);
    expect(() => parseTrace('{"input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}')).toThrow(
      /"hash_ids" has 2 ids but input_length 1025 needs 3/,
    );
    expect(() => parseTrace('{"input_length": 4, "output_length": 1, "hash_ids": [-1]}')).toThrow(/"hash_ids"\[0\] must be an integer/);
  });

  it('reads a trace file streaming, skipping blank lines', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-'));
    const f = join(dir, 't.jsonl');
    writeFileSync(f, '{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [3, 4]}\n\n{"timestamp": 1, "input_length": 10, "output_length": 0, "hash_ids": [3]}\n');
    const t = await readTraceFile(f);
    expect(t.length).toBe(2);
    expect([...t[0]!.hashIds]).toEqual([3, 4]);
    const r = replaySync({ trace: t, numBlocks: 64 });
    expect(r.promptBlocks).toBe(Math.floor(600 / 16) + 0);
    expect(r.matchedBlocks).toBe(0); // request 1 has 10 tokens: no full block to match
  });
});

describe('kvpool replay (CLI)', () => {
  it('--json prints the result object alone', async () => {
    const r = await capture(() => main(['replay', '--json', '--requests', '50', '--num-blocks', '4096']));
    expect(r.code).toBe(0);
    const obj = JSON.parse(r.out);
    expect(obj.requests).toBe(50);
    expect(figures(obj)).toEqual(figures(replaySync({ requests: 50, numBlocks: 4096 })));
  });

  it('prints a table by default', async () => {
    const r = await capture(() => main(['replay', '--requests', '20']));
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/built-in workload \(seed 1024\), 20 requests, plain/);
    expect(r.out).toMatch(/hit rate\s+\d+\.\d\d %/);
    expect(r.out).toMatch(/block size 16 · blocks per rank 65536 · dp size 1 · max running 32 · seed 1024/);
  });

  it('rejects unknown flags and bad values with exit code 1', async () => {
    expect((await capture(() => main(['replay', '--bogus']))).err).toMatch(/unknown option '--bogus'/);
    const neg = await capture(() => main(['replay', '--num-blocks', '-5']));
    expect(neg.code).toBe(1);
    expect(neg.err).toMatch(/--num-blocks must be >= 2, got -5/);
    const frac = await capture(() => main(['replay', '--block-size', '1.5']));
    expect(frac.err).toMatch(/--block-size must be an integer, got "1.5"/);
  });

  it('names a missing trace file and a malformed line', async () => {
    const missing = await capture(() => main(['replay', '/nonexistent/trace.jsonl']));
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/cannot read trace "\/nonexistent\/trace.jsonl": no such file/);
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-'));
    const f = join(dir, 'bad.jsonl');
    writeFileSync(f, '{"input_length": 4, "output_length": 1, "hash_ids": [1]}\n{"input_length": "x"}\n');
    const bad = await capture(() => main(['replay', f]));
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/trace line 2: "input_length" must be a non-negative integer, got "x"/);
  });
});

describe('a trace given as requests', () => {
  const ok = { inputLength: 10, outputLength: 2, hashIds: [1] };
  const cases: Array<[unknown[], RegExp]> = [
    [[{ foo: 1 }], /^trace\[0\]\.inputLength must be a number, got undefined$/],
    [[ok, null], /^trace\[1\] must be a trace request \(\{ inputLength, outputLength, hashIds \}\), got null$/],
    [[{ inputLength: -5, outputLength: 2, hashIds: [] }], /^trace\[0\]\.inputLength must be in \[0, 268435456\], got -5$/],
    [[ok, { ...ok, outputLength: -1 }], /^trace\[1\]\.outputLength must be in \[0, 268435446\], got -1$/],
    [[{ ...ok, outputLength: 'x' }], /^trace\[0\]\.outputLength must be a number, got "x"$/],
    [[ok, ok, { ...ok, hashIds: ['a'] }], /^trace\[2\]\.hashIds\[0\] must be a number, got "a"$/],
    [[{ ...ok, inputLength: 1000 }], /^trace\[0\]\.hashIds has 1 ids but inputLength 1000 needs 2$/],
  ];

  it('refuses a bad request in every mode, naming it by its index', () => {
    for (const mode of [{}, { slidingWindow: 64 }, { hostBlocks: 64 }, { linearStateSlots: 8 }, { eviction: 'priority' as const }]) {
      for (const [trace, message] of cases) expect(() => replaySync({ trace: trace as TraceRequest[], ...mode }), JSON.stringify(mode)).toThrow(message);
    }
  });
});

describe('replay modes combined', () => {
  const trace = generateWorkload({ requests: 200, seed: 5 });
  const device = (r: ReplayRun) => {
    const { linearState: _l, hostTier: _h, subManagers: _s, ...rest } = figures(r) as Record<string, unknown>;
    return rest;
  };

  it('refuses what has no meaning, naming the reason, before anything is built', () => {
    expect(() => replaySync({ requests: 5, slidingWindow: 64, hostBlocks: 64 })).toThrow(
      /options.hostBlocks cannot be combined with options.slidingWindow: a host tier keeps prefix-cache blocks, and a composite pool has none/,
    );
    expect(() => replaySync({ requests: 5, storeBlocks: 64 })).toThrow(/options.storeBlocks needs options.hostBlocks/);
    expect(() => replaySync({ requests: 5, hostBlocks: 64, storeBlocks: 0 })).toThrow(/options.storeBlocks must be >= 1, got 0/);
    expect(replaySync({ requests: 5 }).config.storeBlocks).toBeNull();
  });

  it('linear state with a host tier: the device side is that of linear state alone, host hits are cut to checkpoints', () => {
    const alone = replaySync({ trace, numBlocks: 1200, linearStateSlots: 40 }) as LinearStateReplayRun;
    const both = replaySync({ trace, numBlocks: 1200, linearStateSlots: 40, hostBlocks: 4000 }) as HostTierReplayRun;
    expect(both.mode).toBe('host-tier');
    expect(device(both)).toEqual(device(alone));
    expect(both.linearState!.checkpointsSaved).toBeGreaterThan(0);
    // Host hits beyond the last checkpoint are given back too, so at least as many blocks are trimmed.
    expect(both.linearState!.trimmedBlocks).toBeGreaterThanOrEqual(alone.linearState.trimmedBlocks);
    expect(both.hostTier.blocksOffloaded).toBeGreaterThan(0);
  });

  it('linear state on a composite pool: checkpoints are saved, never restored (no prefix cache, no hits)', () => {
    const alone = replaySync({ trace, numBlocks: 1200, slidingWindow: 256 }) as CompositeReplayRun;
    const both = replaySync({ trace, numBlocks: 1200, slidingWindow: 256, linearStateSlots: 40 }) as CompositeReplayRun;
    expect(both.mode).toBe('composite');
    expect(device(both)).toEqual(device(alone));
    expect(both.subManagers).toEqual(alone.subManagers);
    expect(both.linearState!.checkpointsSaved).toBeGreaterThan(0);
    expect(both.linearState!.checkpointHits).toBe(0);
    expect('linearState' in alone).toBe(false);
  });
});

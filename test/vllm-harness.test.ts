// Identity with vLLM's own Scheduler and KVCacheManager: every run the
// harness recorded (test/fixtures/vllm/) replayed with kvpool's vLLM
// scheduler gives the same figures and the same per-step lines, byte for
// byte, on the Wasm pool (every run) and on the reference model's pool
// (model/vllm/; the quicker runs, all of them in CI).

import { describe, expect, it } from 'vitest';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { parseTrace, type TraceRequest } from '../bindings/index.js';
import { stepLine } from '../bindings/vllm/engine.js';
import { runVllmReplay } from '../bindings/vllm/replay-loop.js';
import { TRACE_PATH } from './support/externals.js';
import { HARNESS_FIGURES, harnessRuns, harnessSteps, smallTrace, type HarnessRun } from './support/vllm-fixtures.js';
import { ModelVllmKv } from './support/vllm-model-kv.js';
import { VllmKvCacheManager } from '../bindings/vllm/kv-cache-manager.js';
import type { VllmKvCache } from '../bindings/vllm/kv-cache.js';

export async function harnessTrace(h: HarnessRun): Promise<TraceRequest[]> {
  if (h.trace !== 'mooncake-conversation') return parseTrace(smallTrace(h.trace));
  return readTraceFile(TRACE_PATH, h.config.limit ?? Infinity);
}

/** The harness's figures of a run, as recorded. */
export function recorded(h: HarnessRun): Record<string, unknown> {
  return Object.fromEntries(HARNESS_FIGURES.map((k) => [k, h[k]]));
}

/**
 * The model is slow (SHA-1 keys, maps): outside CI it replays the runs that
 * take it a second or two, which still reach preemption, rejection,
 * truncation, chunked prefill, the threshold, reserve-full-isl and dp
 * ranks; CI (KVPOOL_FULL_REPLAY=1) replays every run. The Wasm pool replays
 * every run always (test/vllm-replay.test.ts).
 */
const QUICK = new Set(['t1', 'o0', 'edge40_n40_w3_t40', 'edge40_n400_w8', 'b16_n512_w8', 'b16_n300_w4_t256', 'b64_n1500', 'reserve_n700_w8_t1024', 'dp3_n1024_w8', 'sched500_n1024']);
const full = process.env['KVPOOL_FULL_REPLAY'] === '1';

interface Pools {
  kvs: Array<VllmKvCache & { check(): void }>;
  checksum?: () => number;
  dispose(): void;
}

function modelPools(h: HarnessRun): Pools {
  const shared = { h: 0 };
  const kvs = Array.from({ length: h.config.dpSize ?? 1 }, () => new ModelVllmKv(h.config.numBlocks, h.config.blockSize, shared));
  return { kvs, checksum: () => shared.h, dispose: () => {} };
}

function wasmPools(h: HarnessRun): Pools {
  const dp = h.config.dpSize ?? 1;
  const shared = { h: 0 };
  const kvs = Array.from({ length: dp }, (_, dpRank) => new VllmKvCacheManager({ numBlocks: h.config.numBlocks, blockSize: h.config.blockSize, dpRank, ...(dp > 1 && { sharedChecksum: shared }) }));
  return { kvs, ...(dp > 1 && { checksum: () => shared.h }), dispose: () => kvs.forEach((k) => k.dispose()) };
}

/** Replays a recorded run on `pools`, auditing them every `auditEvery` steps; its figures (hit rate rounded as the harness does) and step lines. */
async function replayRun(h: HarnessRun, pools: Pools, auditEvery: number): Promise<{ figures: Record<string, unknown>; allocateCalls: number; lines: string }> {
  const c = h.config;
  const trace = await harnessTrace(h);
  let lines = '';
  let step = 0;
  try {
    const r = runVllmReplay(trace, c.limit ?? undefined, pools.kvs, {
      maxNumSeqs: c.maxRunning, maxNumBatchedTokens: c.maxNumBatchedTokens, longPrefillTokenThreshold: c.longPrefillTokenThreshold, reserveFullIsl: c.reserveFullIsl === true,
    }, {
      onStep: (s) => {
        lines += stepLine(s);
        if (++step % auditEvery === 0) for (const kv of pools.kvs) kv.check();
      },
      ...(pools.checksum && { idChecksum: pools.checksum }),
    });
    for (const kv of pools.kvs) kv.check();
    const hitRate = r.promptBlocks === 0 ? 0 : Math.round((r.matchedBlocks / r.promptBlocks) * 1e6) / 1e6;
    return { figures: Object.fromEntries(HARNESS_FIGURES.map((k) => [k, k === 'hitRate' ? hitRate : r[k]])), allocateCalls: r.allocateCalls, lines };
  } finally {
    pools.dispose();
  }
}

const describeRun = (h: HarnessRun) => {
  const c = h.config;
  return `${h.name}: ${h.requests} requests, B ${c.blockSize}, ${c.numBlocks} blocks x ${c.dpSize ?? 1} ranks, ${c.maxRunning} seqs, budget ${c.maxNumBatchedTokens}, threshold ${c.longPrefillTokenThreshold}, reserve ${c.reserveFullIsl ? 'on' : 'off'}`;
};

describe('the vLLM scheduler on the Wasm pool, against vLLM\'s own runs', () => {
  for (const h of harnessRuns()) {
    it(describeRun(h), async () => {
      const r = await replayRun(h, wasmPools(h), 4999);
      expect(r.figures).toEqual(recorded(h));
      if (h.allocateCalls !== undefined) expect(r.allocateCalls).toBe(h.allocateCalls);
      expect(r.lines === harnessSteps(h.name)).toBe(true);
    }, 60_000);
  }
});

describe(`the vLLM scheduler on the reference model, against vLLM's own runs (${full ? 'all' : 'the quicker'})`, () => {
  for (const h of harnessRuns().filter((r) => full || QUICK.has(r.name))) {
    it(describeRun(h), async () => {
      // The model's own audit now and then (every step would take minutes on the larger runs).
      const r = await replayRun(h, modelPools(h), 997);
      expect(r.figures).toEqual(recorded(h));
      if (h.allocateCalls !== undefined) expect(r.allocateCalls).toBe(h.allocateCalls);
      expect(r.lines === harnessSteps(h.name)).toBe(true);
    }, 120_000);
  }
});

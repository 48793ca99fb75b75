// Identity with vLLM's own Scheduler and KVCacheManager: every run the
// harness recorded (test/fixtures/vllm/) replayed with kvpool's vLLM
// scheduler gives the same figures and the same per-step lines, byte for
// byte. The scheduler runs here on the reference model's pool
// (model/vllm/); test/vllm-replay.test.ts runs the library's replay on the
// Wasm pool against the same records.

import { describe, expect, it } from 'vitest';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { parseTrace, type TraceRequest } from '../bindings/index.js';
import { stepLine } from '../bindings/vllm/engine.js';
import { runVllmReplay } from '../bindings/vllm/replay-loop.js';
import { TRACE_PATH } from './support/externals.js';
import { HARNESS_FIGURES, harnessRuns, harnessSteps, smallTrace, type HarnessRun } from './support/vllm-fixtures.js';
import { ModelVllmKv } from './support/vllm-model-kv.js';

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
const QUICK = new Set(['t1', 'o0', 'b16_n512_w8', 'b16_n300_w4_t256', 'b64_n1500', 'reserve_n700_w8_t1024', 'dp3_n1024_w8', 'sched500_n1024']);
const full = process.env['KVPOOL_FULL_REPLAY'] === '1';

describe(`the vLLM scheduler on the reference model, against vLLM's own runs (${full ? 'all' : 'the quicker'})`, () => {
  for (const h of harnessRuns().filter((r) => full || QUICK.has(r.name))) {
    const c = h.config;
    it(`${h.name}: ${h.requests} requests, B ${c.blockSize}, ${c.numBlocks} blocks x ${c.dpSize ?? 1} ranks, ${c.maxRunning} seqs, budget ${c.maxNumBatchedTokens}, threshold ${c.longPrefillTokenThreshold}, reserve ${c.reserveFullIsl ? 'on' : 'off'}`, async () => {
      const trace = await harnessTrace(h);
      const shared = { h: 0 };
      const kvs = Array.from({ length: c.dpSize ?? 1 }, () => new ModelVllmKv(c.numBlocks, c.blockSize, shared));
      let lines = '';
      let step = 0;
      const r = runVllmReplay(trace, c.limit ?? undefined, kvs, {
        maxNumSeqs: c.maxRunning, maxNumBatchedTokens: c.maxNumBatchedTokens, longPrefillTokenThreshold: c.longPrefillTokenThreshold, reserveFullIsl: c.reserveFullIsl === true,
      }, {
        onStep: (s) => {
          lines += stepLine(s);
          // The model's own audit now and then (every step would take minutes on the larger runs).
          if (++step % 997 === 0) for (const kv of kvs) kv.check();
        },
        idChecksum: () => shared.h,
      });
      for (const kv of kvs) kv.check();
      const hitRate = r.promptBlocks === 0 ? 0 : Math.round((r.matchedBlocks / r.promptBlocks) * 1e6) / 1e6;
      expect(Object.fromEntries(HARNESS_FIGURES.map((k) => [k, k === 'hitRate' ? hitRate : r[k]]))).toEqual(recorded(h));
      if (h.allocateCalls !== undefined) expect(r.allocateCalls).toBe(h.allocateCalls);
      expect(lines === harnessSteps(h.name)).toBe(true);
    }, 120_000);
  }
});

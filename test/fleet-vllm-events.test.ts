// KV events of the vLLM engine through the fleet's event path and the
// replay command (docs/events.md, docs/fleet.md): a vLLM fleet's router
// index, fed every engine's batches in vLLM's order, holds exactly each
// engine's cache after every step -- its keys, and its answer to every
// prefix query equal to the engine's own lookup -- because it counts the
// copies vLLM announces of a key (an index that does not loses keys vLLM
// still caches); precise-prefix routing on a vLLM fleet finds the hits; and
// `kvpool replay --engine vllm --events FILE` writes the stream that
// rebuilds the caches.

import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { main } from '../bindings/cli/main.js';
import { decodeVllmEventBatches } from '../bindings/events/vllm-decode.js';
import { KVEventIndex } from '../bindings/events/kv-event-index.js';
import { Fleet, fleetSync } from '../bindings/fleet/fleet.js';
import { PrecisePrefixRouter, engineInstance } from '../bindings/fleet/precise-prefix.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { outputToken, promptTokens } from '../bindings/replay/kernel.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import type { VllmKvCacheManager } from '../bindings/vllm/kv-cache-manager.js';
import { replayVllmSync } from '../bindings/vllm/replay.js';
import { VllmRequest } from '../bindings/vllm/request.js';
import { capture } from './support/capture.js';
import { TRACE_PATH } from './support/externals.js';

const trace = await readTraceFile(TRACE_PATH, 1000);

/** Request r's tokens, prompt and every output it gives. */
function allTokens(t: TraceRequest, r: number): Int32Array {
  const p = promptTokens(t);
  const O = Math.max(t.outputLength, 1);
  const out = new Int32Array(p.length + O);
  out.set(p);
  for (let i = 0; i < O; i++) out[p.length + i] = outputToken(r, i);
  return out;
}

/** The blocks of request r's tokens (prompt and outputs) rank `kv` finds cached, as vLLM's lookup counts them. */
function engineHits(kv: VllmKvCacheManager, t: TraceRequest, r: number): number {
  const probe = new VllmRequest(r, t);
  probe.numOutputs = probe.maxOutputs; // look up the outputs' blocks too
  try {
    return kv.computedBlocks(probe);
  } finally {
    kv.release(probe);
  }
}

/** Checks `index` against every engine's caches: each rank's keys (distinct: copies count once) and every probe's hits. */
function expectFollows(index: KVEventIndex, f: Fleet, engines: number, probes: ReadonlyArray<[TraceRequest, number]>, B: number): void {
  const info = index.sourcesInfo();
  for (let e = 0; e < engines; e++) {
    const kvs = f.vllmCaches(e);
    for (const kv of kvs) {
      const held = info.find((s) => s.instance === engineInstance(e) && s.dpRank === kv.dpRank)?.blocks ?? 0;
      expect(held, `engine ${e} rank ${kv.dpRank}: keys held`).toBe(kv.figures().cachedKeysAtEnd);
    }
    for (const [t, r] of probes) {
      const tokens = allTokens(t, r);
      const cap = Math.floor((tokens.length - 1) / B);
      const matches = index.match(tokens);
      for (const kv of kvs) {
        const m = matches.find((x) => x.instance === engineInstance(e) && x.dpRank === kv.dpRank)?.blocks ?? 0;
        expect(Math.min(m, cap), `engine ${e} rank ${kv.dpRank}, request ${r}`).toBe(engineHits(kv, t, r));
      }
    }
  }
}

function req(L: number, O: number, ids: number[], timestamp: number): TraceRequest {
  return { timestamp, inputLength: L, outputLength: O, hashIds: Int32Array.from(ids) };
}

describe("a vLLM fleet's router index", () => {
  it('follows every engine\'s cache exactly after every step, counting the copies of a key; an index that does not loses keys vLLM still caches', () => {
    let diverged = 0;
    let copies = 0;
    fc.assert(
      fc.property(
        fc.array(fc.record({ gap: fc.integer({ min: 0, max: 60 }), blocks: fc.integer({ min: 1, max: 12 }), extra: fc.constantFrom(0, 0, 1, 3), O: fc.integer({ min: 0, max: 12 }), id: fc.integer({ min: 1, max: 3 }) }), { minLength: 2, maxLength: 14 }),
        fc.record({
          engines: fc.integer({ min: 1, max: 2 }),
          dpSize: fc.integer({ min: 1, max: 2 }),
          numBlocks: fc.integer({ min: 6, max: 40 }),
          budget: fc.constantFrom(4, 9, 64),
          maxRunning: fc.integer({ min: 1, max: 4 }),
        }),
        (reqs, c) => {
          const B = 4;
          let ts = 0;
          // Block-aligned prompts (extra 0) sharing their ids: vLLM computes their last block again, a copy of its key.
          const t = reqs.map((q) => req(q.blocks * B + q.extra, q.O, [q.id], (ts += q.gap)));
          const o: FleetOptions = {
            trace: t, engine: 'vllm', engines: c.engines, dpSize: c.dpSize, numBlocks: c.numBlocks, blockSize: B, maxNumBatchedTokens: c.budget, maxRunning: c.maxRunning,
            router: 'precise-prefix', stepMs: 10,
          };
          const plain = new KVEventIndex({ blockSize: B });
          const f = new Fleet(o, undefined, (e, batches) => {
            for (const b of batches) plain.applyBatch(engineInstance(e), b);
          });
          try {
            const index = (f.router as PrecisePrefixRouter).index;
            expect(index.countCopies).toBe(true);
            const probes = t.map((q, r) => [q, r] as [TraceRequest, number]);
            while (f.step()) {
              expectFollows(index, f, c.engines, probes, B);
              if (plain.stats().blocks !== index.stats().blocks) diverged++;
            }
            copies += index.stats().blocks < plain.stats().blocks ? 0 : 1;
            for (let e = 0; e < c.engines; e++) for (const kv of f.vllmCaches(e)) kv.check();
          } finally {
            f.dispose();
          }
        },
      ),
      { numRuns: 120 },
    );
    // The runs made copies of keys and evicted some: an index keeping one entry per hash fell behind the caches.
    expect(diverged).toBeGreaterThan(0);
    expect(copies).toBeGreaterThan(0);
  });

  it('on the Mooncake trace, routed by precise prefix: holds each engine\'s keys at the end, and finds the hits round-robin does not', () => {
    const o: FleetOptions = { trace: trace.slice(0, 600), engine: 'vllm', engines: 3, numBlocks: 32768, stepMs: 50 };
    const f = new Fleet({ ...o, router: 'precise-prefix' });
    let precise;
    try {
      precise = f.run();
      expect(precise.evictedBlocks).toBeGreaterThan(10_000);
      const index = (f.router as PrecisePrefixRouter).index;
      for (let e = 0; e < 3; e++) {
        const kv = f.vllmCaches(e)[0]!;
        expect(index.blocks(engineInstance(e)).length).toBe(kv.figures().cachedKeysAtEnd);
        expect(kv.figures().cachedKeysAtEnd).toBeGreaterThan(1000);
      }
    } finally {
      f.dispose();
    }
    const rr = fleetSync({ ...o, router: 'round-robin' });
    expect(precise.promptBlocks).toBe(rr.promptBlocks);
    expect(precise.matchedBlocks).toBeGreaterThan(rr.matchedBlocks * 1.2);
  });

  it('on the whole first 1,000 requests, timed, 4 engines: precise-prefix beats round-robin and least-loaded on hit rate', () => {
    const o: FleetOptions = { trace, engine: 'vllm', engines: 4, numBlocks: 32768, timing: true };
    const [rr, ll, precise] = (['round-robin', 'least-loaded', 'precise-prefix'] as const).map((router) => fleetSync({ ...o, router }));
    expect(precise!.matchedBlocks).toBeGreaterThan(rr!.matchedBlocks * 1.2);
    expect(precise!.matchedBlocks).toBeGreaterThan(ll!.matchedBlocks * 1.2);
    expect(precise!.latency!.cachedTokens).toBeGreaterThan(rr!.latency!.cachedTokens);
  });
});

describe('kvpool replay --engine vllm --events', () => {
  it('writes every step\'s batches, one per dp rank, in vLLM\'s order: they rebuild each rank\'s cache, and the figures are the replay\'s', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvpool-vllm-events-'));
    const file = join(dir, 'events.msgpack');
    const args = ['--limit', '300', '--engine', 'vllm', '--num-blocks', '3000', '--dp-size', '2', '--max-num-batched-tokens', '2048', '--json', '--no-progress'];
    const r = await capture(() => main(['replay', 'mooncake-conversation', ...args, '--events', file]));
    expect(r.code).toBe(0);
    const run = JSON.parse(r.out);
    const expected = replayVllmSync({ engine: 'vllm', trace: trace.slice(0, 300), numBlocks: 3000, dpSize: 2, maxNumBatchedTokens: 2048 });
    for (const k of ['evictedBlocks', 'allocatedBlocks', 'idChecksum', 'matchedBlocks', 'preemptions', 'steps', 'cachedKeysAtEnd'] as const) expect(run[k], k).toBe(expected[k]);
    const batches = [...decodeVllmEventBatches(readFileSync(file))];
    expect(new Set(batches.map((b) => b.dataParallelRank))).toEqual(new Set([0, 1]));
    // Stamped with the step (from 1), steps in order.
    const ts = batches.map((b) => b.ts);
    expect(ts.every((x, i) => i === 0 || x >= ts[i - 1]!)).toBe(true);
    expect(ts[ts.length - 1]).toBeLessThanOrEqual(expected.steps);
    let removed = 0;
    for (const b of batches) for (const e of b.events) if (e.type === 'BlockRemoved') removed += e.blockHashes.length;
    expect(removed).toBe(expected.evictedBlocks);
    expect(batches.some((b) => b.events.some((e) => e.type === 'AllBlocksCleared'))).toBe(false);
    const index = new KVEventIndex({ blockSize: 16, countCopies: true });
    for (const b of batches) index.applyBatch('kvpool', b);
    for (const rank of expected.ranks) expect(index.blocks('kvpool', rank.dpRank).length).toBe(rank.cachedKeysAtEnd);
  });

  it('replay({ engine: "vllm", onEvents }) hands each step\'s events over and changes no figure', () => {
    const o = { engine: 'vllm' as const, trace: trace.slice(0, 150), numBlocks: 1500, maxNumBatchedTokens: 1024 };
    let stored = 0;
    let removed = 0;
    let last = 0;
    const withEvents = replayVllmSync({
      ...o,
      onEvents: (events, step) => {
        expect(step).toBeGreaterThan(last);
        last = step;
        for (const e of events) if (e.type === 'stored') stored++;
        else removed++;
      },
    });
    const without = replayVllmSync(o);
    const strip = ({ seconds: _s, allocateCallsPerSecond: _a, ...r }: typeof without) => r;
    expect(strip(withEvents)).toEqual(strip(without));
    expect(removed).toBe(without.evictedBlocks);
    expect(stored - removed).toBe(without.cachedBlocksAtEnd);
  });
});

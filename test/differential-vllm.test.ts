// Differential property test of vLLM's block pool: random operation
// sequences on the Wasm pool (VllmKvCacheManager over assembly/vllm-pool.ts)
// and on the reference model (model/vllm/) agree step by step -- hits,
// whether an allocation fits, every request's block table, the free
// queue's length, evictions, the id checksum, what is cached -- with
// check() on both after every step. The requests share prefixes (a few
// 512-token contents, blocks of 4 tokens on pools of 3 to 40 blocks), so
// that hits, duplicates, evictions, failed allocations and
// fullSequenceMustFit all happen. A hostile neighbour pool in the same
// memory takes refused calls in between; the figures of the pool under
// test must not notice.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { TraceRequest } from '../bindings/index.js';
import { VllmKvCacheManager } from '../bindings/vllm/kv-cache-manager.js';
import { VllmRequest } from '../bindings/vllm/request.js';
import { stepLine } from '../bindings/vllm/engine.js';
import type { VllmKvCache } from '../bindings/vllm/kv-cache.js';
import { runVllmReplay } from '../bindings/vllm/replay-loop.js';
import { ModelVllmKv } from './support/vllm-model-kv.js';
import { countSteps } from './support/steps.js';
import { soak } from './support/soak.js';

const B = 4;

type Op =
  | { kind: 'add'; content: number; length: number; outputs: number }
  | { kind: 'admit'; pick: number; chunk: number; mustFit: boolean }
  | { kind: 'grow'; pick: number; chunk: number }
  | { kind: 'preempt'; pick: number }
  | { kind: 'finish'; pick: number }
  | { kind: 'hostile'; which: number; value: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  // Block-aligned prompts of a few lengths often: the same prompt again is cached again (a duplicate), a longer one looks the duplicates up.
  {
    weight: 3,
    arbitrary: fc.record({
      kind: fc.constant('add' as const), content: fc.nat({ max: 3 }), length: fc.oneof(fc.constantFrom(4, 8, 12), fc.integer({ min: 1, max: 40 })), outputs: fc.nat({ max: 9 }),
    }),
  },
  { weight: 5, arbitrary: fc.record({ kind: fc.constant('admit' as const), pick: fc.nat(), chunk: fc.integer({ min: 1, max: 48 }), mustFit: fc.boolean() }) },
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('grow' as const), pick: fc.nat(), chunk: fc.integer({ min: 1, max: 12 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('preempt' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('hostile' as const), which: fc.nat({ max: 7 }), value: fc.integer() }) },
);

/** One request on both sides: the same trace line, one VllmRequest each (each side keeps its own state on it). */
interface Twin {
  w: VllmRequest;
  m: VllmRequest;
  running: boolean;
}

/** What the scheduler does after a step that computed `n` tokens of `r`: it advances, and samples when it caught up. */
function advance(r: VllmRequest, n: number): void {
  r.numComputed += n;
  if (r.numComputed === r.numTokens && r.numOutputs < r.maxOutputs - 1) r.numOutputs++;
}

function figures(kv: VllmKvCacheManager | ModelVllmKv) {
  const { allocateCalls: _calls, ...f } = kv.figures();
  return { ...f, free: kv.numFreeBlocks() };
}

function run(numBlocks: number, ops: Op[]): void {
  const wasm = new VllmKvCacheManager({ numBlocks, blockSize: B });
  const model = new ModelVllmKv(numBlocks, B);
  const neighbour = new VllmKvCacheManager({ numBlocks: 8, blockSize: B });
  const stranger = new VllmRequest(999, { inputLength: 8, outputLength: 1, hashIds: Int32Array.of(9) });
  neighbour.computedBlocks(stranger);
  neighbour.allocateSlots(stranger, 8, 0, false);
  const twins: Twin[] = [];
  let next = 0;
  try {
    for (const op of ops) {
      const waiting = twins.filter((t) => !t.running);
      const running = twins.filter((t) => t.running);
      switch (op.kind) {
        case 'add': {
          const trace: TraceRequest = { inputLength: op.length, outputLength: op.outputs, hashIds: Int32Array.of(op.content) };
          twins.push({ w: new VllmRequest(next, trace), m: new VllmRequest(next, trace), running: false });
          next++;
          break;
        }
        case 'admit': {
          if (waiting.length === 0) break;
          const t = waiting[op.pick % waiting.length]!;
          const hw = wasm.computedBlocks(t.w);
          expect(model.computedBlocks(t.m)).toBe(hw);
          const n = Math.min(op.chunk, t.w.numTokens - hw * B);
          const ok = wasm.allocateSlots(t.w, n, hw, op.mustFit);
          expect(model.allocateSlots(t.m, n, hw, op.mustFit)).toBe(ok);
          if (ok) {
            t.running = true;
            for (const r of [t.w, t.m]) {
              r.numComputed = hw * B;
              advance(r, n);
            }
          }
          break;
        }
        case 'grow': {
          if (running.length === 0) break;
          const t = running[op.pick % running.length]!;
          const n = Math.min(op.chunk, t.w.numTokens - t.w.numComputed);
          if (n === 0) break;
          const ok = wasm.allocateSlots(t.w, n, 0, false);
          expect(model.allocateSlots(t.m, n, 0, false)).toBe(ok);
          if (ok) for (const r of [t.w, t.m]) advance(r, n);
          break;
        }
        case 'preempt': {
          if (running.length === 0) break;
          const t = running[op.pick % running.length]!;
          wasm.free(t.w);
          model.free(t.m);
          t.running = false;
          t.w.numComputed = t.m.numComputed = 0;
          break;
        }
        case 'finish': {
          if (twins.length === 0) break;
          const t = twins[op.pick % twins.length]!;
          wasm.release(t.w);
          model.release(t.m);
          twins.splice(twins.indexOf(t), 1);
          break;
        }
        case 'hostile':
          hostile(neighbour, stranger, wasm, twins, op);
          break;
      }
      countSteps();
      for (const t of twins) expect([...wasm.blocksOf(t.w)]).toEqual(model.blocksOf(t.m));
      expect(figures(wasm)).toEqual(figures(model));
      wasm.check();
      model.check();
      neighbour.check();
    }
  } finally {
    wasm.dispose();
    neighbour.dispose();
  }
}

/** A refused call on the neighbour pool, or one that names the pool under test wrongly: each throws and changes nothing. */
function hostile(neighbour: VllmKvCacheManager, stranger: VllmRequest, wasm: VllmKvCacheManager, twins: Twin[], op: Extract<Op, { kind: 'hostile' }>): void {
  const before = figures(neighbour);
  const held = [...neighbour.blocksOf(stranger)];
  const pool = neighbour.pool;
  const scratch = pool.rt.alloc(64);
  const at = scratch >>> 2;
  const small = Math.abs(op.value % 1000);
  const put = (ids: number[]) => {
    const i32 = pool.rt.views().i32;
    ids.forEach((id, i) => (i32[at + i] = id));
  };
  try {
    switch (op.which) {
      case 0: // a hit out of range, the null block, below zero, twice
        put([pool.numBlocks + small, held[0]!]);
        expect(() => pool.allocate(scratch, 4, 0, 2, 3, 0, scratch, 0, 0)).toThrow(/not a block of this pool/);
        put([0, held[0]!]);
        expect(() => pool.allocate(scratch, 4, 0, 2, 3, 0, scratch, 0, 0)).toThrow(/null block/);
        put([-1 - small, held[0]!]);
        expect(() => pool.allocate(scratch, 4, 0, 2, 3, 0, scratch, 0, 0)).toThrow(/not a block of this pool/);
        put([held[0]!, held[0]!]);
        expect(() => pool.allocate(scratch, 4, 0, 2, 3, 0, scratch, 0, 0)).toThrow(/twice/);
        break;
      case 1: // freeing a block more times than it is held
        put([held[0]!, held[0]!, held[1]!]);
        expect(() => pool.free(scratch, 3)).toThrow(/no reference to drop/);
        break;
      case 2: // freeing the null block, or a block of no pool
        put([held[0]!, op.value & 1 ? 0 : pool.numBlocks + small]);
        expect(() => pool.free(scratch, 2)).toThrow(RangeError);
        break;
      case 3: // counts past the table
        expect(() => pool.allocate(scratch, 2, 0, 3, 1, 0, scratch, 0, 0)).toThrow(/past what the block table holds/);
        expect(() => pool.allocate(scratch, 2, 1, 0, 2 ** 31 - 1, 0, scratch, 0, 0)).toThrow(/past what the block table holds/);
        expect(() => pool.allocate(scratch, 2, 1, 0, 1, 0, scratch, 0, 3)).toThrow(/past what the block table holds/);
        break;
      case 4: // caching a block that has a key already (the stranger's first block is cached)
        put([held[0]!]);
        expect(() => pool.allocate(scratch, 4, 1, 0, 1, 0, scratch, 0, 1)).toThrow(/cached already/);
        break;
      case 5: // a request another manager serves
        expect(() => wasm.allocateSlots(stranger, 1, 0, false)).toThrow(/another KV-cache manager/);
        expect(() => wasm.computedBlocks(stranger)).toThrow(/another KV-cache manager/);
        break;
      case 6: // hits its last lookup did not find
        if (twins.length > 0 && !twins[0]!.running) expect(() => wasm.allocateSlots(twins[0]!.w, 1, 1 + (small & 3) + 40, false)).toThrow(RangeError);
        break;
      case 7: // more tokens than the request has
        expect(() => neighbour.allocateSlots(stranger, 2 ** 30 + small, 0, false)).toThrow(RangeError);
        break;
    }
  } finally {
    pool.rt.release(scratch);
  }
  expect(figures(neighbour)).toEqual(before);
  expect([...neighbour.blocksOf(stranger)]).toEqual(held);
}

describe('vLLM block pool: Wasm core against the model', () => {
  it('agrees on random operation sequences, check() after every step, a hostile neighbour beside it', () => {
    fc.assert(
      fc.property(fc.integer({ min: 3, max: 40 }), fc.array(opArb, { minLength: 20, maxLength: 300 }), (numBlocks, ops) => run(numBlocks, ops)),
      { numRuns: soak(120) },
    );
  });

  it('reaches hits, duplicates, evictions, refusals and fullSequenceMustFit refusals', () => {
    // The same mix, counting what happened on the model side: a generator that stopped reaching these would make the property hollow.
    const seen = { hits: 0, duplicates: 0, tripleDuplicates: 0, evictions: 0, refused: 0, mustFitOnly: 0 };
    fc.assert(
      fc.property(fc.integer({ min: 3, max: 40 }), fc.array(opArb, { minLength: 100, maxLength: 300 }), (numBlocks, ops) => {
        const model = new ModelVllmKv(numBlocks, B);
        const reqs: Array<{ r: VllmRequest; running: boolean }> = [];
        let made = 0;
        for (const op of ops) {
          if (op.kind === 'add') reqs.push({ r: new VllmRequest(made++, { inputLength: op.length, outputLength: op.outputs, hashIds: Int32Array.of(op.content) }), running: false });
          if (op.kind === 'admit') {
            const w = reqs.filter((x) => !x.running);
            if (w.length === 0) continue;
            const t = w[op.pick % w.length]!;
            const h = model.computedBlocks(t.r);
            if (h > 0) seen.hits++;
            const n = Math.min(op.chunk, t.r.numTokens - h * B);
            let ok = model.allocateSlots(t.r, n, h, op.mustFit);
            if (!ok) {
              seen.refused++;
              if (op.mustFit) {
                model.computedBlocks(t.r);
                ok = model.allocateSlots(t.r, n, h, false);
                if (ok) seen.mustFitOnly++;
              }
            }
            if (ok) {
              t.running = true;
              t.r.numComputed = h * B;
              advance(t.r, n);
            }
          }
          if (op.kind === 'grow') {
            const g = reqs.filter((x) => x.running && x.r.numComputed < x.r.numTokens);
            if (g.length > 0) {
              const t = g[op.pick % g.length]!;
              const n = Math.min(op.chunk, t.r.numTokens - t.r.numComputed);
              if (model.allocateSlots(t.r, n, 0, false)) advance(t.r, n);
            }
          }
          if (op.kind === 'finish' && reqs.length > 0) model.release(reqs.splice(op.pick % reqs.length, 1)[0]!.r);
        }
        seen.evictions += model.pool.evicted;
        for (const blocks of model.pool.cached.values()) {
          if (blocks.length > 1) seen.duplicates++;
          if (blocks.length > 2) seen.tripleDuplicates++;
        }
      }),
      { numRuns: 60, seed: 44 },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });
});

describe('vLLM engine: the same replay on the Wasm pool and on the model', () => {
  const traceArb = fc.array(
    fc.record({ content: fc.nat({ max: 4 }), inputLength: fc.integer({ min: 1, max: 300 }), outputLength: fc.nat({ max: 30 }) }),
    { minLength: 1, maxLength: 40 },
  );
  const configArb = fc.record({
    blockSize: fc.constantFrom(4, 8, 16),
    numBlocks: fc.integer({ min: 4, max: 200 }),
    dpSize: fc.integer({ min: 1, max: 3 }),
    maxNumSeqs: fc.integer({ min: 1, max: 8 }),
    maxNumBatchedTokens: fc.oneof(fc.constant(0x7fffffff), fc.integer({ min: 1, max: 512 })),
    longPrefillTokenThreshold: fc.oneof(fc.constant(0), fc.integer({ min: 1, max: 64 })),
    reserveFullIsl: fc.boolean(),
  });

  it('gives the same figures and the same per-step lines on random traces and configurations', () => {
    fc.assert(
      fc.property(traceArb, configArb, (lines, c) => {
        // Prompts of one content share their first tokens; a second hash id makes longer ones differ after 512 tokens.
        const trace: TraceRequest[] = lines.map((l) => ({ inputLength: l.inputLength, outputLength: l.outputLength, hashIds: Int32Array.of(l.content, 10 + l.content) }));
        const config = { maxNumSeqs: c.maxNumSeqs, maxNumBatchedTokens: c.maxNumBatchedTokens, longPrefillTokenThreshold: c.longPrefillTokenThreshold, reserveFullIsl: c.reserveFullIsl };
        const run = (kvs: Array<VllmKvCache & { check(): void }>, checksum: () => number) => {
          let steps = '';
          const r = runVllmReplay(trace, undefined, kvs, config, {
            onStep: (s) => {
              // A run that does not end fails here rather than filling memory.
              if (s.step > 100_000) throw new Error(`no end after ${s.step} steps`);
              steps += stepLine(s);
              for (const kv of kvs) kv.check();
            },
            idChecksum: checksum,
          });
          const { seconds: _s, ranks, ...figures } = r;
          return { figures, ranks: ranks.map(({ idChecksum: _c, ...k }) => k), steps };
        };
        const ws = { h: 0 };
        const wasm = Array.from({ length: c.dpSize }, (_, dpRank) => new VllmKvCacheManager({ numBlocks: c.numBlocks, blockSize: c.blockSize, dpRank, sharedChecksum: ws }));
        const ms = { h: 0 };
        const model = Array.from({ length: c.dpSize }, () => new ModelVllmKv(c.numBlocks, c.blockSize, ms));
        try {
          const a = run(wasm, () => ws.h);
          const b = run(model, () => ms.h);
          countSteps(a.figures.steps);
          expect(a).toEqual(b);
          // Every request ends: finished, rejected or truncated.
          expect(a.figures.finished + a.figures.rejected + a.figures.truncated).toBe(trace.length);
        } finally {
          wasm.forEach((k) => k.dispose());
        }
      }),
      { numRuns: soak(60) },
    );
  });
});

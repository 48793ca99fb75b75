// The stepping replay (the inspector's loop) against runReplay and the
// reference model: stepping to the end gives runReplay's result exactly, and
// at every step the Wasm pool and the model agree on each block's state
// (CoreManager.blockStates), the running sequences and the step's figures,
// with pool.check() after each step.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { BlockState } from '../bindings/managers/block-state.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { type ReplayParams, type ReplayResult } from '../bindings/replay/kernel.js';
import { runReplay } from '../bindings/replay/stepper.js';
import { PoolReplayTarget } from '../bindings/replay/replay.js';
import { ReplayStepper } from '../bindings/replay/stepper.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import { modelReplay } from '../model/replay.js';
import { ModelReplayTarget } from '../model/replay-target.js';
import { fewer } from './support/soak.js';

function withoutTimings(r: ReplayResult) {
  const { seconds: _s, allocateCallsPerSecond: _a, ...rest } = r;
  return rest;
}

describe('ReplayStepper', () => {
  const cases: Array<[string, { numBlocks: number; blockSize: number; dpSize: number }, ReplayParams]> = [
    ['roomy', { numBlocks: 4096, blockSize: 16, dpSize: 1 }, { blockSize: 16, maxRunning: 32, publishAfterPrefill: false }],
    ['heavy eviction, publish after prefill', { numBlocks: 300, blockSize: 16, dpSize: 1 }, { blockSize: 16, maxRunning: 8, publishAfterPrefill: true }],
    ['two ranks, rejections', { numBlocks: 60, blockSize: 32, dpSize: 2 }, { blockSize: 32, maxRunning: 4, publishAfterPrefill: false, limit: 150 }],
  ];
  const trace = generateWorkload({ requests: 200, seed: 11 });
  for (const [name, o, params] of cases) {
    it(`gives runReplay's result, and the model loop's, when stepped to the end (${name})`, () => {
      const a = new BlockManagerPool(o);
      const b = new BlockManagerPool(o);
      try {
        const expected = runReplay(new PoolReplayTarget(a), trace, params);
        const st = new ReplayStepper(new PoolReplayTarget(b), trace, params);
        let steps = 0;
        while (st.step()) steps++;
        expect(steps).toBe(st.total + 1);
        expect(st.finished).toBe(true);
        expect(st.step()).toBeNull();
        expect(withoutTimings(st.result())).toEqual(withoutTimings(expected));
        // The model's own loop (model/replay.ts) shares no code with either.
        expect(withoutTimings(st.result())).toEqual(modelReplay(trace, { ...o, ...params }));
        expect(b.numFreeBlocks()).toEqual(a.numFreeBlocks());
        expect([...b.managers[0]!.lruOrder()]).toEqual([...a.managers[0]!.lruOrder()]);
      } finally {
        a.dispose();
        b.dispose();
      }
    });
  }

  it('reports each step: admitted request, reuse, new blocks, finished sequences', () => {
    const o = { blockSize: 16, maxRunning: 2, publishAfterPrefill: false };
    const pool = new BlockManagerPool({ numBlocks: 4096, blockSize: 16 });
    try {
      // Three requests whose prompts start with the same 512-token chunk.
      const req = (ids: number[], input: number, output: number) => ({ inputLength: input, outputLength: output, hashIds: Int32Array.from(ids) });
      const t = [req([5, 6], 600, 10), req([5, 7], 520, 10), req([5], 100, 3)];
      const st = new ReplayStepper(new PoolReplayTarget(pool), t, o);
      // 600 prompt + 10 output tokens: ceil(610 / 16) = 39 blocks, nothing cached yet.
      expect(st.step()).toEqual({ request: 0, placed: true, matchedBlocks: 0, newBlocks: 39, truncated: false, outputs: 10, finished: 0 });
      expect(st.runningRequests()).toEqual([0]);
      // Request 0 still runs and nothing was published: no reuse either.
      expect(st.step()).toEqual({ request: 1, placed: true, matchedBlocks: 0, newBlocks: 34, truncated: false, outputs: 10, finished: 0 });
      // maxRunning 2: request 0 finishes first and its full blocks get cached;
      // request 2's 100-token prompt is request 0's first 100 tokens: 6 full blocks reused.
      expect(st.step()).toEqual({ request: 2, placed: true, matchedBlocks: 6, newBlocks: 1, truncated: false, outputs: 3, finished: 1 });
      expect(st.runningRequests()).toEqual([1, 2]);
      expect(st.running().map((s) => s.numBlocks)).toEqual([34, 7]);
      expect(st.step()).toEqual({ request: -1, placed: false, matchedBlocks: 0, newBlocks: 0, truncated: false, outputs: 0, finished: 2 });
      expect(st.running()).toEqual([]);
      expect(pool.numUsedBlocks()).toEqual([0]);
    } finally {
      pool.dispose();
    }
  });

  it('says how many outputs a truncated request decoded, and which sequence it admitted last', () => {
    // 3 usable blocks of 16 tokens: a 16-token prompt takes one, its outputs 1-32 two more; output 32 needs a fourth.
    const pool = new BlockManagerPool({ numBlocks: 4, blockSize: 16 });
    try {
      const req = (id: number, input: number, output: number) => ({ inputLength: input, outputLength: output, hashIds: Int32Array.of(id) });
      const st = new ReplayStepper(new PoolReplayTarget(pool), [req(1, 16, 40), req(2, 16, 5)], { blockSize: 16, maxRunning: 4, publishAfterPrefill: false });
      expect(st.newest()).toBeUndefined();
      // Decode step i appends output i and needs ceil((16 + i + 1) / 16) blocks: steps 0-31 fit in 3, step 32 does not.
      expect(st.step()).toMatchObject({ request: 0, placed: true, truncated: true, outputs: 32 });
      expect(st.newest()).toBe(st.running()[0]);
      // The next request finishes the first to make room, and decodes all 5 of its outputs.
      expect(st.step()).toMatchObject({ request: 1, placed: true, truncated: false, outputs: 5, finished: 1 });
      expect(st.newest()!.numTokens).toBe(16 + 5);
    } finally {
      pool.dispose();
    }
  });

  it('rejects bad arguments before touching the pool', () => {
    const pool = new BlockManagerPool({ numBlocks: 64, blockSize: 16 });
    try {
      const t = new PoolReplayTarget(pool);
      const ok = { blockSize: 16, maxRunning: 4, publishAfterPrefill: false };
      const w = generateWorkload({ requests: 3 });
      expect(() => new ReplayStepper(t, w, { ...ok, maxRunning: 0 })).toThrow(new RangeError('params.maxRunning must be >= 1, got 0'));
      expect(() => new ReplayStepper(t, w, { ...ok, blockSize: 1.5 })).toThrow(new RangeError('params.blockSize must be an integer, got 1.5'));
      expect(() => new ReplayStepper(t, w, { ...ok, publishAfterPrefill: 1 as unknown as boolean })).toThrow(
        new TypeError('params.publishAfterPrefill must be a boolean, got 1'),
      );
      expect(() => new ReplayStepper(t, w, { ...ok, limit: -1 })).toThrow(new RangeError('params.limit must be >= 0, got -1'));
      expect(() => new ReplayStepper(t, w, { ...ok, maxRuning: 3 } as ReplayParams)).toThrow(TypeError);
      expect(() => new ReplayStepper(t, 'trace' as unknown as [], ok)).toThrow(new TypeError('requests must be an array of trace requests, got "trace"'));
      // Blocks and hits are counted in params' block size: the pool's must match.
      expect(() => new ReplayStepper(t, w, { ...ok, blockSize: 8 })).toThrow(new RangeError("params.blockSize = 8 differs from the target's pool's block size, 16"));
      expect(() => runReplay(t, w, { ...ok, blockSize: 8 })).toThrow(RangeError);
      expect(pool.numFreeBlocks()).toEqual([63]);
      pool.check();
      const st = new ReplayStepper(t, w, { ...ok, limit: 2 });
      expect(st.total).toBe(2);
    } finally {
      pool.dispose();
    }
  });

  it('decodeRoom: the tokens a sequence takes with allocate() changing nothing', () => {
    const pool = new BlockManagerPool({ numBlocks: 64, blockSize: 16 });
    const other = new BlockManagerPool({ numBlocks: 64, blockSize: 16 });
    try {
      const s = new Sequence(Array.from({ length: 20 }, (_, i) => i));
      expect(pool.decodeRoom(s)).toBe(0); // not placed yet
      expect(pool.allocate(s)).toBe(true);
      expect(s.numBlocks).toBe(2);
      expect(pool.decodeRoom(s)).toBe(12); // 32 - 20
      expect(other.decodeRoom(s)).toBe(0); // another pool's sequence
      const table = [...s.blockTable];
      const free = pool.numFreeBlocks();
      for (let i = 0; i < 12; i++) {
        s.appendToken(100 + i);
        s.kvCachedTokens = s.numTokens - 1;
        expect(pool.allocate(s, s.numTokens)).toBe(true);
        expect(pool.decodeRoom(s)).toBe(11 - i);
      }
      expect([...s.blockTable]).toEqual(table);
      expect(pool.numFreeBlocks()).toEqual(free);
      s.appendToken(200);
      expect(pool.allocate(s, s.numTokens)).toBe(true);
      expect(s.numBlocks).toBe(3);
      expect(pool.decodeRoom(s)).toBe(15);
      pool.deallocate(s);
      expect(pool.decodeRoom(s)).toBe(0);
      pool.dispose();
      expect(pool.decodeRoom(new Sequence([1]))).toBe(0);
    } finally {
      pool.dispose();
      other.dispose();
    }
  });

  it('decodeRoom of a composite pool: exactly the steps before one that takes or slides out a block', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 70 }),
        fc.subarray([1, 2, 3], { minLength: 1 }),
        fc.integer({ min: 1, max: 60 }),
        (blockSize, window, ratios, prompt) => {
          const pool = new BlockManagerPool({
            numBlocks: 400,
            blockSize,
            managerTypes: [1, ...ratios.map(() => 0 as const)],
            compressRatios: [0, ...ratios],
            slidingWindowSize: window,
          });
          try {
            const m = pool.compositeManager(0)!;
            // What a step changes: ids handed out or slid out, per sub-manager.
            const marks = () => JSON.stringify(m.subManagerStats().map((x) => [x.blocksAllocated, x.blocksReleasedOutOfWindow]));
            const s = new Sequence(Array.from({ length: prompt }, (_, i) => i));
            expect(pool.decodeRoom(s)).toBe(0); // not placed yet
            expect(pool.allocate(s)).toBe(true);
            s.kvCachedTokens = prompt;
            const step = () => {
              s.appendToken(7);
              s.kvCachedTokens = s.numTokens - 1;
              expect(pool.allocate(s, s.numTokens)).toBe(true);
            };
            for (let round = 0; round < 12; round++) {
              const room = pool.decodeRoom(s);
              const before = marks();
              for (let j = 0; j < room; j++) {
                step();
                expect(marks()).toBe(before);
              }
              step(); // the first step past the room changes something
              expect(marks()).not.toBe(before);
              pool.check();
            }
            pool.deallocate(s);
            expect(pool.decodeRoom(s)).toBe(0);
          } finally {
            pool.dispose();
          }
        },
      ),
      { numRuns: fewer(200) },
    );
  });

  it('gives the same result, tokens and blocks when every decode step is made (no decodeRoom, no decodeSteps)', () => {
    const trace = generateWorkload({ requests: 120, seed: 5, concurrentChats: 4 });
    for (const params of [
      { blockSize: 16, maxRunning: 6, publishAfterPrefill: true },
      { blockSize: 64, maxRunning: 3, publishAfterPrefill: false },
    ]) {
      const a = new BlockManagerPool({ numBlocks: 200, blockSize: params.blockSize });
      const b = new BlockManagerPool({ numBlocks: 200, blockSize: params.blockSize });
      const c = new BlockManagerPool({ numBlocks: 200, blockSize: params.blockSize });
      try {
        const every = new PoolReplayTarget(b);
        let skipped = 0;
        // The steps that fit counted (decodeRoom), every other call made.
        const counting = Object.assign(Object.create(new PoolReplayTarget(a)) as PoolReplayTarget, {
          decodeRoom(seq: Sequence): number {
            const k = a.decodeRoom(seq);
            skipped += k;
            return k;
          },
        });
        Object.defineProperty(counting, 'decodeSteps', { value: undefined });
        Object.defineProperty(every, 'decodeRoom', { value: undefined });
        Object.defineProperty(every, 'decodeSteps', { value: undefined });
        // The built-in target: the rest of a request's steps in one call (decodeSteps).
        const runs = new PoolReplayTarget(c);
        const x = new ReplayStepper(counting, trace, params);
        const y = new ReplayStepper(every, trace, params);
        const z = new ReplayStepper(runs, trace, params);
        const view = (st: ReplayStepper<Sequence>) => st.running().map((s) => [[...s.tokens], s.kvCachedTokens, [...s.blockTable]]);
        while (true) {
          const sx = x.step();
          const sy = y.step();
          expect(sx).toEqual(sy);
          expect(z.step()).toEqual(sy);
          expect(view(x)).toEqual(view(y));
          expect(view(z)).toEqual(view(y));
          if (sx === null) break;
        }
        expect(skipped).toBeGreaterThan(0);
        expect(withoutTimings(x.result())).toEqual(withoutTimings(y.result()));
        expect(withoutTimings(z.result())).toEqual(withoutTimings(y.result()));
        expect([...a.managers[0]!.lruOrder()]).toEqual([...b.managers[0]!.lruOrder()]);
        expect([...c.managers[0]!.lruOrder()]).toEqual([...b.managers[0]!.lruOrder()]);
      } finally {
        a.dispose();
        b.dispose();
        c.dispose();
      }
    }
  });

  it('agrees with the reference model step by step on random workloads', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 31 - 1 }),
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 8, max: 400 }),
        fc.constantFrom(16, 64, 256),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 6 }),
        fc.boolean(),
        (seed, requests, numBlocks, blockSize, dpSize, maxRunning, publishAfterPrefill) => {
          const trace = generateWorkload({ requests, seed, concurrentChats: 4 });
          const params = { blockSize, maxRunning, publishAfterPrefill };
          const pool = new BlockManagerPool({ numBlocks, blockSize, dpSize });
          const model = new ModelBlockManagerPool({ numBlocks, blockSize, dpSize });
          try {
            const a = new ReplayStepper(new PoolReplayTarget(pool), trace, params);
            const b = new ReplayStepper(new ModelReplayTarget(model), trace, params);
            const states = new Uint8Array(numBlocks);
            while (true) {
              const x = a.step();
              expect(x).toEqual(b.step());
              pool.check();
              for (let r = 0; r < dpSize; r++) {
                expect([...pool.managers[r]!.blockStates(states)]).toEqual(model.managers[r]!.blockStates());
              }
              expect(a.runningRequests()).toEqual(b.runningRequests());
              expect(a.running().map((s) => [...s.blockTable])).toEqual(b.running().map((s) => [...s.blockTable]));
              if (x === null) break;
            }
            const expected = runReplay(new ModelReplayTarget(new ModelBlockManagerPool({ numBlocks, blockSize, dpSize })), trace, params);
            expect(withoutTimings(a.result())).toEqual(withoutTimings(expected));
            expect(withoutTimings(a.result())).toEqual(modelReplay(trace, { numBlocks, dpSize, ...params }));
          } finally {
            pool.dispose();
          }
        },
      ),
      { numRuns: fewer(40) },
    );
  });
});

describe('CoreManager.blockStates', () => {
  it('names free, held, shared, cached-only and padding ids', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    try {
      const tokens = [1, 2, 3, 4, 5];
      const ids = m.allocate(3)!;
      expect([...ids]).toEqual([1, 2, 3]);
      m.cache(tokens, ids); // ids 1 and 2 are full blocks: cached, still held
      m.retain([2]);
      const s = m.blockStates();
      expect([...s]).toEqual([BlockState.Padding, BlockState.Held, BlockState.Shared, BlockState.Held, 0, 0, 0, 0]);
      m.deallocate(ids);
      expect([...m.blockStates()]).toEqual([4, BlockState.Cached, BlockState.Held, BlockState.Free, 0, 0, 0, 0]);
      m.deallocate([2]);
      const out = new Uint8Array(10).fill(9);
      expect(m.blockStates(out)).toBe(out);
      expect([...out]).toEqual([4, 3, 3, 0, 0, 0, 0, 0, 9, 9]);
    } finally {
      m.dispose();
    }
  });

  it('rejects an output array of the wrong type or length, changing nothing', () => {
    const m = new BlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    try {
      m.allocate(2);
      const short = new Uint8Array(7);
      expect(() => m.blockStates(short)).toThrow(new TypeError('out must be a Uint8Array of length >= 8, got one of length 7'));
      expect([...short]).toEqual([0, 0, 0, 0, 0, 0, 0]);
      expect(() => m.blockStates(new Int32Array(8) as unknown as Uint8Array)).toThrow(TypeError);
      m.check();
      expect(m.numFreeBlocks()).toBe(5);
    } finally {
      m.dispose();
    }
  });
});

// The inspector's replay session, without a browser: its block-state counts
// are the pool's figures, hover holders are the running requests that hold
// the block, the samples stay bounded, and a finished session gives replay()'s
// result.

import { describe, expect, it } from 'vitest';
import { BlockState } from '../bindings/managers/block-state.js';
import { replaySync } from '../bindings/replay/replay.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { Samples, Session, type SessionOptions } from '../inspector/src/session.js';

const OPTIONS: SessionOptions = { numBlocks: 512, blockSize: 128, dpSize: 2, maxRunning: 8, requests: 60, seed: 3, publishAfterPrefill: false };

describe('inspector Session', () => {
  it('counts block states as the pool reports them, at every step', () => {
    const s = new Session(OPTIONS);
    try {
      expect([...s.counts[0]!]).toEqual([511, 0, 0, 0, 1]);
      while (s.step(1) === 1) {
        s.refresh();
        s.pool.check();
        for (let r = 0; r < 2; r++) {
          const c = s.counts[r]!;
          expect(c[BlockState.Free]).toBe(s.pool.numFreeBlocks()[r]);
          expect(c[BlockState.Held]! + c[BlockState.Shared]!).toBe(s.pool.numUsedBlocks()[r]);
          expect(c[BlockState.Cached]).toBe(s.pool.stats()[r]!.numEvictableBlocks);
          expect(c[BlockState.Padding]).toBe(1);
        }
      }
      expect(s.finished).toBe(true);
      expect(s.samples.length).toBe(62); // the start, 60 requests, the drain
      expect(s.samples.columns.step[61]).toBe(61);
      expect(s.samples.columns.used[61]).toBe(0);
    } finally {
      s.dispose();
    }
  });

  it('names the running requests holding a block, and the prefix cache', () => {
    const s = new Session(OPTIONS);
    try {
      s.step(35);
      s.refresh();
      const seqs = s.stepper.running();
      const reqs = s.stepper.runningRequests();
      for (let r = 0; r < 2; r++) {
        const st = s.states[r]!;
        for (let id = 1; id < st.length; id++) {
          const expected = reqs.filter((_, i) => seqs[i]!.dpRank === r && [...seqs[i]!.blockTable].includes(id));
          const h = s.holders(r, id);
          expect(h.requests).toEqual(expected);
          const holders = st[id] === BlockState.Held ? 1 : st[id] === BlockState.Shared ? 2 : 0;
          expect(h.requests.length >= holders && (holders < 2 || h.requests.length >= 2)).toBe(true);
          expect(h.prefixCache).toBe(s.pool.managers[r]!.refCount(id) > expected.length);
        }
      }
    } finally {
      s.dispose();
    }
  });

  it('gives replay()\'s result once finished', () => {
    const o = { ...OPTIONS, dpSize: 1, numBlocks: 900, blockSize: 16 };
    const s = new Session(o);
    try {
      s.step(Infinity);
      const { seconds: _a, allocateCallsPerSecond: _b, ...got } = s.stepper.result();
      const { seconds: _c, allocateCallsPerSecond: _d, ...want } = replaySync({
        trace: generateWorkload({ requests: 60, seed: 3 }),
        numBlocks: 900,
        blockSize: 16,
        maxRunning: 8,
        seed: 3,
      });
      expect(got).toEqual(want);
    } finally {
      s.dispose();
    }
  });
});

describe('inspector Samples', () => {
  it('keeps every other row when full and from then on every stride-th offer', () => {
    const s = new Samples(4);
    const row = (v: number) => ({ step: v, free: v, used: 0, cached: 0, hitRate: 0, recentHitRate: 0, evicted: 0 });
    for (let v = 0; v < 9; v++) if (s.offer()) s.add(row(v));
    // 0 1 2 3 | full at 4: halve to 0 2, stride 2 -> offers 4, 6 kept -> 0 2 4 6 | 8: halve to 0 4, add 8.
    expect(s.stride).toBe(4);
    expect([...s.columns.step.subarray(0, s.length)]).toEqual([0, 4, 8]);
  });
});

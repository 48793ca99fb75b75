// The inspector's replay session, without a browser: its block-state counts
// are the pool's figures, hover holders are the running requests that hold
// the block, the samples stay bounded, and a finished session gives replay()'s
// result.

import { describe, expect, it } from 'vitest';
import { BlockState } from '../bindings/managers/block-state.js';
import { replaySync } from '../bindings/replay/replay.js';
import { generateWorkload } from '../bindings/replay/workload.js';
import { DEFAULT_OPTIONS, Samples, Session, type SessionOptions } from '../inspector/src/session.js';
import { figures } from './support/replay-figures.js';

const OPTIONS: SessionOptions = {
  numBlocks: 512, blockSize: 128, dpSize: 2, maxRunning: 8, requests: 60, seed: 3, publishAfterPrefill: false, eviction: 'lru', hostBlocks: 0, slidingWindow: 0,
};

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
      const seqs = s.running();
      const reqs = s.stepper.runningRequests();
      for (let r = 0; r < 2; r++) {
        const st = s.states[r]!;
        for (let id = 1; id < st.length; id++) {
          const expected = reqs.filter((_, i) => seqs[i]!.dpRank === r && Array.from(seqs[i]!.blockTable).includes(id));
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

  it('gives replay()\'s result once finished, in every mode', () => {
    const base = { ...OPTIONS, dpSize: 1, numBlocks: 900, blockSize: 16 };
    const modes: Array<[Partial<SessionOptions>, Parameters<typeof replaySync>[0]]> = [
      [{}, {}],
      [{ eviction: 'lfu', dpSize: 2 }, { eviction: 'lfu', dpSize: 2 }],
      [{ hostBlocks: 4000 }, { hostBlocks: 4000 }],
      [{ slidingWindow: 256 }, { slidingWindow: 256 }],
    ];
    for (const [extra, opts] of modes) {
      const s = new Session({ ...base, ...extra });
      try {
        s.step(Infinity);
        const want = replaySync({ requests: 60, numBlocks: 900, blockSize: 16, maxRunning: 8, seed: 3, ...opts });
        const got = s.result();
        expect({ ...got, seconds: 0, allocateCallsPerSecond: 0 }).toEqual({ ...want, seconds: 0, allocateCallsPerSecond: 0 });
      } finally {
        s.dispose();
      }
    }
  });

  it('starts from the command line\'s defaults: the same workload, the same hit rate as `kvpool replay`', () => {
    const s = new Session(DEFAULT_OPTIONS);
    try {
      s.step(Infinity);
      const cli = replaySync({});
      expect(figures(s.result())).toEqual(figures(cli));
      expect(s.result().config).toEqual(cli.config);
    } finally {
      s.dispose();
    }
  });

  it('shows the host tier as panels of its own, with the holders of its blocks', () => {
    const s = new Session({ ...OPTIONS, dpSize: 1, numBlocks: 300, blockSize: 16, hostBlocks: 2000 });
    try {
      expect(s.panels.map((p) => p.title)).toEqual(['dp rank 0', 'host tier · rank 0']);
      s.step(40);
      s.refresh();
      const host = s.panels[1]!;
      expect(s.counts[1]![BlockState.Free]).toBe(host.manager.numFreeBlocks());
      const held = s.running().flatMap((q) => [...(s.pool as unknown as { hostBlockTable(q: unknown): Int32Array }).hostBlockTable(q)]);
      for (const id of held) expect(s.holders(1, id).requests.length).toBeGreaterThan(0);
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

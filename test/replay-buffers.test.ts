// The replay loop's token plumbing: runs of output tokens appended in one
// call, and the buffers kept between requests.

import { describe, expect, it } from 'vitest';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { OUTPUT_BASE, OUTPUT_LAST, advanceOutputToken, nextOutputToken, outputToken } from '../bindings/replay/kernel.js';
import { appendOutputRun } from '../bindings/replay/output-run.js';
import { PoolReplayTarget } from '../bindings/replay/replay.js';
import { MAX_SEQUENCE_TOKENS } from '../bindings/validate.js';
import { SPARE_BYTES, TokenBuffers } from '../bindings/replay/token-buffers.js';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { replaySync } from '../bindings/replay/replay.js';

describe('appendOutputRun', () => {
  it('appends what nextOutputToken gives, one token at a time, across the wrap and past the buffer', () => {
    for (const first of [outputToken(3, 0), OUTPUT_LAST - 5, OUTPUT_LAST, OUTPUT_BASE]) {
      for (const count of [0, 1, 6, 7, 40]) {
        const a = Sequence.fromBuffer(new Int32Array(12).fill(9), 4);
        const b = new Sequence([9, 9, 9, 9]);
        appendOutputRun(a, first, count);
        let t = first;
        for (let j = 0; j < count; j++, t = nextOutputToken(t)) b.appendToken(t);
        expect([...a.tokens]).toEqual([...b.tokens]);
        expect(a.numTokens).toBe(4 + count);
        expect(advanceOutputToken(first, count)).toBe(t);
      }
    }
  });
});

describe('PoolReplayTarget.appendOutputs', () => {
  it('refuses a bad argument by name and appends nothing', () => {
    const pool = new BlockManagerPool({ numBlocks: 8, blockSize: 4 });
    try {
      const t = new PoolReplayTarget(pool);
      const s = new Sequence([1, 2, 3]);
      const bad: Array<[unknown, unknown, unknown, RegExp]> = [
        [{}, OUTPUT_BASE, 2, /^seq must be a Sequence/],
        [s, 1.5, 2, /^first must be an integer, got 1.5/],
        [s, 2 ** 31, 2, /^first must be in \[-2147483648, 2147483647\], got 2147483648/],
        [s, 'x', 2, /^first must be a number/],
        [s, OUTPUT_BASE, -1, /^count must be in \[0, 268435453\], got -1/],
        [s, OUTPUT_BASE, 0.5, /^count must be an integer/],
        [s, OUTPUT_BASE, MAX_SEQUENCE_TOKENS, /^count must be in \[0, 268435453\], got 268435456/],
      ];
      for (const [seq, first, count, message] of bad) {
        expect(() => t.appendOutputs(seq as Sequence, first as number, count as number)).toThrow(message);
        expect([...s.tokens]).toEqual([1, 2, 3]);
      }
      t.appendOutputs(s, OUTPUT_LAST, 2);
      expect([...s.tokens]).toEqual([1, 2, 3, OUTPUT_LAST, OUTPUT_BASE]);
    } finally {
      pool.dispose();
    }
  });
});

describe('PoolReplayTarget.advanceOutputs', () => {
  it('refuses a bad argument by name and changes nothing; else grows the sequence without writing its buffer', () => {
    const pool = new BlockManagerPool({ numBlocks: 8, blockSize: 4 });
    try {
      const t = new PoolReplayTarget(pool);
      const buffer = new Int32Array(8).fill(-3);
      buffer.set([1, 2, 3]);
      const s = Sequence.fromBuffer(buffer, 3);
      const bad: Array<[unknown, unknown, RegExp]> = [
        [{}, 2, /^seq must be a Sequence/],
        [s, -1, /^count must be in \[0, 268435453\], got -1/],
        [s, 0.5, /^count must be an integer/],
        [s, MAX_SEQUENCE_TOKENS, /^count must be in \[0, 268435453\], got 268435456/],
      ];
      for (const [seq, count, message] of bad) {
        expect(() => t.advanceOutputs(seq as Sequence, count as number)).toThrow(message);
        expect(s.numTokens).toBe(3);
      }
      t.advanceOutputs(s, 4);
      expect(s.numTokens).toBe(7);
      expect(s.state.tokens).toBe(buffer);
      expect([...s.tokens]).toEqual([1, 2, 3, -3, -3, -3, -3]);
      // Past the buffer it grows as appends do (a kept replay's buffer is sized so it never does).
      t.advanceOutputs(s, 5);
      expect(s.numTokens).toBe(12);
      expect([...s.tokens.subarray(0, 3)]).toEqual([1, 2, 3]);
    } finally {
      pool.dispose();
    }
  });
});

describe('TokenBuffers', () => {
  it('hands out the smallest kept buffer that fits, and a new one only when none does', () => {
    const pool = new TokenBuffers(2);
    const small = pool.take(100);
    const large = pool.take(1000);
    expect(small.length).toBeGreaterThanOrEqual(100);
    expect(large.length).toBeGreaterThanOrEqual(1000);
    pool.give(large);
    pool.give(small);
    expect(pool.take(50)).toBe(small); // not the large one, which a larger need may want
    pool.give(small);
    expect(pool.take(500)).toBe(large);
    const fresh = pool.take(5000); // the small one kept does not fit
    expect(fresh).not.toBe(small);
    expect(fresh.length).toBeGreaterThanOrEqual(5000);
    expect(pool.take(1)).toBe(small);
  });

  it('keeps at most as many as the running sequences and eight more, dropping the smallest', () => {
    const pool = new TokenBuffers(2);
    const bufs = Array.from({ length: 13 }, (_, i) => new Int32Array(10 * (i + 1)));
    for (const b of bufs) pool.give(b);
    // 10 kept: the three smallest (10, 20 and 30 tokens) went.
    const got = new Set<Int32Array>();
    for (let i = 0; i < 10; i++) got.add(pool.take(1));
    expect([...got].map((b) => b.length).sort((x, y) => x - y)).toEqual(bufs.slice(3).map((b) => b.length));
    expect(pool.take(1)).not.toBe(bufs[0]);
    expect(bufs.slice(0, 3).some((b) => got.has(b))).toBe(false);
  });

  it('hands the buffers of a loop that ended to the next one, within SPARE_BYTES, largest first', () => {
    const first = new TokenBuffers(4);
    const a = first.take(1000);
    const b = first.take(2000);
    first.give(a);
    first.give(b);
    first.retire();
    expect(first.take(10)).not.toBe(a); // the retired loop keeps none
    const next = new TokenBuffers(4);
    expect(next.take(1500)).toBe(b);
    expect(next.take(10)).toBe(a);
    expect(new TokenBuffers(4).take(10)).not.toBe(a); // each buffer goes to one loop

    // Past the budget the smallest are dropped: three buffers of 40% of it each, two kept.
    const big = new TokenBuffers(4);
    const n = Math.floor((SPARE_BYTES * 0.4) / 4);
    const bufs = [new Int32Array(n), new Int32Array(n + 1), new Int32Array(n + 2)];
    for (const x of bufs) big.give(x);
    big.retire();
    const after = new TokenBuffers(4);
    const got = [after.take(1), after.take(1), after.take(1)];
    expect([got.includes(bufs[0]!), got.includes(bufs[1]!), got.includes(bufs[2]!)]).toEqual([false, true, true]);

    // Two loops retire one after the other: the next loop starts with the largest of both.
    const loopA = new TokenBuffers(1); // keeps 9
    const loopB = new TokenBuffers(1);
    const smalls = Array.from({ length: 9 }, () => loopA.take(100));
    for (const buf of smalls) loopA.give(buf);
    const large = loopB.take(3000);
    loopB.give(large);
    loopA.retire();
    loopB.retire();
    const next8 = new TokenBuffers(0); // takes 8 of the 10 waiting: the large one among them
    expect(next8.take(2000)).toBe(large);
    expect(smalls).toContain(next8.take(10));
  });

  it('replays give the same figures when later ones start on earlier ones\' buffers', async () => {
    const trace = await readTraceFile('mooncake-conversation', { limit: 300 });
    const run = () => {
      const { seconds: _s, allocateCallsPerSecond: _a, ...r } = replaySync({ trace, numBlocks: 4096 });
      return r;
    };
    const once = run();
    expect(once.evictedBlocks).toBeGreaterThan(0);
    expect(run()).toEqual(once);
    expect(run()).toEqual(once);
  });
});

// The replay's prompts held in the core's staging memory: the core writes a
// prompt once, and the pool's stagings of it during the prefill read that
// copy instead of copying the tokens in again -- only while the promise that
// nothing writes them holds.

import { beforeAll, describe, expect, it } from 'vitest';
import { loadCore, plainCore } from '../bindings/core/plain-core.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import type { Sequence } from '../bindings/pool/sequence.js';
import { holdPromptTokens, promptTokens, promptTokensJs, type ReplayTarget } from '../bindings/replay/kernel.js';
import { LinearStateReplayTarget } from '../bindings/replay/linear-state-target.js';
import { PoolReplayTarget } from '../bindings/replay/replay.js';
import { runReplay } from '../bindings/replay/stepper.js';
import type { TraceRequest } from '../bindings/replay/trace.js';
import { targetWithout } from './support/target-without.js';
import { generateWorkload } from '../bindings/replay/workload.js';

beforeAll(async () => {
  await loadCore();
});

const staging = () => plainCore().staging;
const staged = (ptr: number, n: number) => [...plainCore().i32.subarray(ptr >>> 2, (ptr >>> 2) + n)];
const req = (first: number, inputLength: number): TraceRequest => ({
  timestamp: 0, inputLength, outputLength: 4, hashIds: Int32Array.from({ length: Math.ceil(inputLength / 512) }, (_, i) => first + i),
});

describe('Staging.holdPrompt', () => {
  it('stages the held prompt in place, and copies what lies outside it, another array, or after dropPrompt', () => {
    const t = new Int32Array(2000);
    holdPromptTokens(req(7, 1500), t);
    const expected = [...t.subarray(0, 1500)];
    const at = staging().stageTokens(t, 0, 1500);
    expect(staged(at, 1500)).toEqual(expected);
    // Written behind the promise's back, the array differs from the held copy: a staging inside it reads the copy.
    t[100] = -1;
    expect(staging().stageTokens(t, 96, 112)).toBe(at + 96 * 4);
    expect(staged(staging().stageTokens(t, 96, 112), 16)).toEqual(expected.slice(96, 112));
    // Another array is copied, and the hold stays.
    const other = Int32Array.from({ length: 64 }, (_, i) => i);
    expect(staged(staging().stageTokens(other, 0, 64), 64)).toEqual([...other]);
    expect(staging().stageTokens(t, 0, 16)).toBe(at);
    // Past the held tokens the array itself is copied.
    const past = staging().stageTokens(t, 96, 1600);
    expect(staged(past, 1504)).toEqual([...t.subarray(96, 1600)]);
    expect(past).not.toBe(at + 96 * 4);
    staging().dropPrompt();
    expect(staged(staging().stageTokens(t, 96, 112), 16)).toEqual([...t.subarray(96, 112)]);
  });

  it('is never taken by the public promptTokens: its buffer is copied at every staging', () => {
    const t = new Int32Array(1500);
    promptTokens(req(9, 1500), t);
    t[3] = -7;
    expect(staged(staging().stageTokens(t, 0, 16), 16)).toEqual([...t.subarray(0, 16)]);
  });

  it('ends when the same buffer is filled with another prompt, held or not', () => {
    const t = new Int32Array(3000);
    holdPromptTokens(req(3, 2048), t);
    promptTokens(req(40, 2048), t); // a recycled buffer: the next request's prompt, not held
    const b = promptTokensJs(req(40, 2048));
    expect(staged(staging().stageTokens(t, 0, 2048), 2048)).toEqual([...b]);
    holdPromptTokens(req(3, 600), t);
    promptTokens(req(90, 300), t); // short prompts are written in JS
    expect(staged(staging().stageTokens(t, 0, 300), 300)).toEqual([...promptTokensJs(req(90, 300))]);
  });
});

describe('the replay loop and held prompts', () => {
  const trace = generateWorkload({ requests: 150, seed: 3, concurrentChats: 4 });
  const params = { blockSize: 16, maxRunning: 6, publishAfterPrefill: false };

  /** The same target without holdsPrompt: every staging copies. */
  const copying = (t: ReplayTarget<Sequence>) => targetWithout(t, ['holdsPrompt']);

  it('gives the ids, hits and evictions of a replay that copies every prompt', () => {
    // With linear state the prefill also stamps the prompt's hashes: a second staging of the whole prompt.
    for (const enableLinearState of [false, true]) {
      const run = (hold: boolean) => {
        const pool = new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true, enableLinearState, linearStateNumSlots: enableLinearState ? 8 : undefined });
        try {
          const base = new PoolReplayTarget(pool);
          const t: ReplayTarget<Sequence> = enableLinearState ? new LinearStateReplayTarget(base, (s) => s) : base;
          expect(t.holdsPrompt).toBe(true);
          const r = runReplay(hold ? t : copying(t), trace, params);
          pool.check();
          return { ...r, seconds: 0, allocateCallsPerSecond: 0 };
        } finally {
          pool.dispose();
        }
      };
      const held = run(true);
      expect(held.matchedBlocks).toBeGreaterThan(0);
      expect(held.evictedBlocks).toBeGreaterThan(0);
      expect(held).toEqual(run(false));
    }
  });

  it('ends the promise when the target throws during the prefill', () => {
    const pool = new BlockManagerPool({ numBlocks: 600, blockSize: 16, enablePrefixCache: true });
    try {
      const inner = new PoolReplayTarget(pool);
      let buffer: Int32Array = new Int32Array(0);
      const target: ReplayTarget<Sequence> = {
        ...copying(inner),
        holdsPrompt: true,
        newSequence: (b, n) => ((buffer = b), inner.newSequence(b, n)),
        allocate: () => {
          throw new Error('target failed');
        },
      };
      const long = { ...req(5, 1024) };
      expect(() => runReplay(target, [long], params)).toThrow('target failed');
      buffer[0] = 12345;
      expect(staged(staging().stageTokens(buffer, 0, 16), 1)).toEqual([12345]);
    } finally {
      pool.dispose();
    }
  });
});

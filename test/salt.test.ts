// Tenant isolation: a per-sequence cache salt is mixed into block 0's hash
// only. Scenario tests, the unchanged unsalted chain, input checks, and a
// differential property test against the reference model with salts.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hashBlocks } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { saltKey } from '../bindings/pool/salt.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import type { ModelSequence } from '../model/sequence.js';
import { agree } from './support/agree.js';
import { rankEvictionOrder, rankFreeIds } from './support/pool-probe.js';
import { applySequenceOp, type SequenceOp } from './support/sequence-ops.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

const B = 4;
const PROMPT = Array.from({ length: 3 * B + 1 }, (_, i) => 10 + i); // 3 full blocks + 1 token

function run(p: BlockManagerPool, s: Sequence): number {
  expect(p.allocate(s)).toBe(true);
  const shared = s.sharedBlocks;
  s.kvCachedTokens = s.numTokens;
  p.deallocate(s);
  p.check();
  return shared;
}

describe('cache salt', () => {
  it('two tenants with the same prompt: no hit across salts, full hits within one', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    expect(run(p, new Sequence(PROMPT, { cacheSalt: 'tenant-a' }))).toBe(0);
    expect(p.numBlocksInPrefixCache()).toEqual([3]);
    // Another tenant: nothing shared, its own 3 blocks cached next to A's.
    expect(run(p, new Sequence(PROMPT, { cacheSalt: 'tenant-b' }))).toBe(0);
    expect(p.numBlocksInPrefixCache()).toEqual([6]);
    // No salt is a third namespace.
    expect(run(p, new Sequence(PROMPT))).toBe(0);
    expect(p.numBlocksInPrefixCache()).toEqual([9]);
    // Within a tenant: every full block hits.
    expect(run(p, new Sequence(PROMPT, { cacheSalt: 'tenant-a' }))).toBe(3);
    expect(run(p, new Sequence(PROMPT, { cacheSalt: 'tenant-b' }))).toBe(3);
    expect(run(p, new Sequence(PROMPT))).toBe(3);
    expect(p.numBlocksInPrefixCache()).toEqual([9]);
    p.dispose();
  });

  it('tenants share nothing even on later blocks, and the setter works before the first allocation', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    const a = new Sequence(PROMPT);
    a.cacheSalt = 'x';
    expect(a.cacheSalt).toBe('x');
    run(p, a);
    const b = new Sequence(PROMPT, { cacheSalt: 'y' });
    expect(p.allocate(b)).toBe(true);
    const ids = new Set(b.blockTable);
    expect(b.sharedBlocks).toBe(0);
    // B's blocks are fresh ids, none of A's cached blocks.
    expect(p.managers[0]!.lruOrder().some((id) => ids.has(id))).toBe(false);
    expect(() => (b.cacheSalt = 'z')).toThrow(/only be set before the sequence is first allocated/);
    p.deallocate(b);
    p.dispose();
  });

  it('a fork keeps its parent salt; tryAllocate and allocateShared honour it', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    run(p, new Sequence(PROMPT, { cacheSalt: 't' }));
    expect(p.allocateShared(new Sequence(PROMPT, { cacheSalt: 'u' }))).toBe(0);
    const s = new Sequence(PROMPT, { cacheSalt: 't' });
    expect(p.tryAllocate(s)).toBe(true);
    expect(s.sharedBlocks).toBe(3);
    const f = s.fork();
    expect(f.cacheSalt).toBe('t');
    p.deallocate([s, f]);
    const g = new Sequence(PROMPT, { cacheSalt: 't' });
    expect(p.allocateShared(g)).toBe(3);
    p.deallocate(g);
    p.check();
    p.dispose();
  });

  it('no salt (or "") leaves the hash chain exactly as before', () => {
    const p = new BlockManagerPool({ numBlocks: 32, blockSize: B });
    const s = new Sequence(PROMPT, { cacheSalt: '' });
    expect(s.cacheSalt).toBe('');
    run(p, s);
    const t = new Sequence(PROMPT);
    expect(p.allocate(t)).toBe(true);
    const expected = hashBlocks(PROMPT, B, 1024);
    const got = new Uint8Array(48);
    for (let b = 0; b < 3; b++) got.set(p.managers[0]!.blockHash(t.blockAt(b))!, b * 16);
    expect([...got]).toEqual([...expected]);
    p.deallocate(t);
    p.dispose();
  });

  it('a chain continued after an unstamped block recomputes its parent with the salt', () => {
    const salt = saltKey('s', 1024);
    const whole = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    const split = new BlockManagerImpl({ numBlocks: 8, blockSize: B });
    const a = whole.allocate(3)!;
    const b = split.allocate(3)!;
    expect(whole.insertFrom(PROMPT, a, 0, 3, 0, salt)).toBe(3);
    // Blocks 1..2 chained on block 0, which carries no hash yet: the core asks for it from the tokens.
    expect(split.insertFrom(PROMPT, b, 1, 2, b[0]!, salt)).toBe(2);
    for (let i = 1; i < 3; i++) expect([...split.blockHash(b[i]!)!]).toEqual([...whole.blockHash(a[i]!)!]);
    expect([...whole.blockHash(a[0]!)!]).not.toEqual([...hashBlocks(PROMPT, B, 1024).subarray(0, 16)]);
    const hits = new Int32Array(3);
    expect(split.matchInto(PROMPT, 1, 2, b[0]!, hits, 0, salt)).toBe(2);
    expect(split.matchInto(PROMPT, 1, 2, b[0]!, hits, 0, null)).toBe(0);
    whole.dispose();
    split.dispose();
  });

  it('rejects bad salts without changing anything', () => {
    expect(() => new Sequence([1], { cacheSalt: 5 as unknown as string })).toThrow(TypeError);
    expect(() => new Sequence([1], { cacheSalt: 5 as unknown as string })).toThrow(/options.cacheSalt must be a string, got 5/);
    expect(() => new Sequence([1], { salt: 'a' } as never)).toThrow(/unknown option "salt"/);
    expect(() => new Sequence([1], null as never)).toThrow(/options must be an object/);
    expect(() => new Sequence([1], [] as never)).toThrow(new TypeError('options must be an object, got an array of length 0'));
    expect(() => new Sequence([1], { cacheSalt: null as never })).toThrow(new TypeError('options.cacheSalt must be a string, got null'));
    expect(new Sequence([1], { cacheSalt: undefined }).cacheSalt).toBe('');
    const s = new Sequence([1], { cacheSalt: 'a' });
    expect(() => (s.cacheSalt = null as unknown as string)).toThrow(/cacheSalt must be a string, got null/);
    expect(s.cacheSalt).toBe('a');
  });
});

// ---- differential: salted sequences against the model ----

type Op =
  | { kind: 'new'; prompt: number; len: number; salt: number }
  | Exclude<SequenceOp, { kind: 'allocateShared' }>;

const SALTS = ['', 'a', 'b'];
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('new' as const), prompt: fc.nat({ max: 5 }), len: fc.nat({ max: 16 }), salt: fc.nat({ max: 2 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('allocate' as const), pick: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('tryAllocate' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('publish' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('finish' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat() }) },
);

function tokensOf(p: number, len: number): number[] {
  return Array.from({ length: len }, (_, i) => (i < 5 ? (p % 2) * 1000 + i : p * 100 + i));
}

function diff(ops: Op[], numBlocks: number, blockSize: number, dpSize: number): void {
  const opts = { numBlocks, blockSize, dpSize };
  const pool = new BlockManagerPool(opts);
  const model = new ModelBlockManagerPool(opts);
  const seqs: Array<[Sequence, ModelSequence]> = [];
  try {
    for (const op of ops) {
      if (op.kind === 'new') {
        const t = tokensOf(op.prompt, op.len);
        seqs.push([new Sequence(t, { cacheSalt: SALTS[op.salt]! }), model.newSequence(t, SALTS[op.salt]!)]);
        continue;
      }
      if (seqs.length === 0) continue;
      const forked = applySequenceOp(pool, model, seqs[op.pick % seqs.length]!, op, blockSize);
      if (forked) seqs.push(forked);
      pool.check();
      for (const [a, b] of seqs) agree([...a.blockTable, a.sharedBlocks], [...b.blockTable, b.sharedBlocks]);
      for (let r = 0; r < dpSize; r++) {
        agree([rankFreeIds(pool, r), rankEvictionOrder(pool, r)], [model.managers[r]!.free, model.managers[r]!.prefix.lruOrder()]);
      }
    }
    countSteps(ops.length);
  } finally {
    pool.dispose();
  }
}

describe('salted pool vs reference model', () => {
  it('agrees step by step', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { minLength: 20, maxLength: 300, size: 'max' }),
        fc.integer({ min: 3, max: 30 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 1, max: 2 }),
        diff,
      ),
      { numRuns: soak(60) },
    );
  });
});

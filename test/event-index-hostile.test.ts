// KVEventIndex against hostile streams (docs/events.md, limits): each
// refusal the issue reported names its event and field and leaves the index
// exactly as it was; any byte string is either applied whole or refused with
// a typed error; hashes crafted to collide under a fixed table hash spread
// under the index's keyed one; sources coming and going leave nothing
// behind. (Hostile batches interleaved with real engines' streams, checked
// against the engines' caches after every step: test/event-index.test.ts.)

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { KVEventIndex } from '../bindings/events/kv-event-index.js';
import { decodeVllmEventBatch } from '../bindings/events/vllm-decode.js';
import { encodeVllmEventBatches } from '../bindings/events/vllm.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { collidingHashes, fingerprint, payload, refusedCases, storedMap, unkeyedMix } from './support/hostile-batches.js';
import { soak } from './support/soak.js';

const B = 4;

/** An index that follows one real engine holding a few cached prompts. */
function followed(): { idx: KVEventIndex; payloads: Uint8Array[] } {
  const pool = new BlockManagerPool({ numBlocks: 32, blockSize: B });
  pool.recordEvents(true);
  for (const p of [1, 2, 3]) {
    const s = new Sequence(Array.from({ length: 10 }, (_, i) => p * 100 + i));
    expect(pool.allocate(s)).toBe(true);
    s.kvCachedTokens = s.numTokens;
    pool.deallocate(s);
  }
  const payloads = encodeVllmEventBatches(pool.drainEvents(), { ts: 1 }).map((b) => b.payload);
  pool.dispose();
  const idx = new KVEventIndex({ blockSize: B });
  for (const p of payloads) idx.applyBatch('engine', p);
  return { idx, payloads };
}

describe('KVEventIndex refuses what a real engine never sends', () => {
  it.each(refusedCases(B).map((c) => [c.what, c] as const))('%s: a typed error naming the batch, the event and the field; the index unchanged', (_what, c) => {
    const { idx } = followed();
    const before = fingerprint(idx);
    let err: unknown;
    try {
      idx.applyBatch('hostile', c.batch as never);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(c.error);
    const msg = (err as Error).message;
    expect(msg).toMatch(/^KVEventIndex\.applyBatch\("hostile"\)/);
    expect(msg).toMatch(c.names);
    expect(fingerprint(idx)).toBe(before);
    expect(idx.sourcesInfo().some((s) => s.instance === 'hostile')).toBe(false);
  });

  it('applies a batch whose extra keys are deep enough and hold integers of any int64 or uint64', () => {
    const idx = new KVEventIndex({ blockSize: B });
    idx.applyBatch('engine', payload([storedMap([1n], B, { extra_keys: [[[['a', 1n << 63n]], -5n, new Uint8Array([1, 2]), true, null]] })]));
    expect(idx.blocks('engine')[0]!.extraKeys).toEqual([[['a', 1n << 63n]], -5n, new Uint8Array([1, 2]), true, null]);
  });

  it('takes its limits as options and says which one a batch passed', () => {
    expect(() => new KVEventIndex({ limits: { maxBlocks: 3 } as never })).toThrow(/options.limits: unknown option "maxBlocks"/);
    expect(() => new KVEventIndex({ limits: { maxDpRank: -1 } })).toThrow(/options.limits.maxDpRank/);
    const idx = new KVEventIndex({ blockSize: B, limits: { maxBlocksPerSource: 3, maxMediaPerRank: 1, maxDpRank: 2, maxEventsPerBatch: 2 } });
    expect(idx.limits.maxBlocksPerSource).toBe(3);
    expect(idx.limits.maxHashBytes).toBe(64); // a default kept
    idx.applyBatch('e', payload([storedMap([1n, 2n], B)]));
    const before = fingerprint(idx);
    expect(() => idx.applyBatch('e', payload([storedMap([3n, 4n], B)]))).toThrow(/stores 2 blocks on rank 0, medium "GPU", which holds 2: more than limits.maxBlocksPerSource \(3\)/);
    expect(() => idx.applyBatch('e', payload([storedMap([5n], B, { medium: 'CPU' })]))).toThrow(/rank 0 would hold blocks on 2 media, more than limits.maxMediaPerRank \(1\)/);
    expect(() => idx.applyBatch('e', payload([storedMap([5n], B)], 3))).toThrow(/data_parallel_rank must be an integer in \[0, 2\], got 3/);
    expect(() => idx.applyBatch('e', payload([storedMap([5n], B), storedMap([6n], B), storedMap([7n], B)]))).toThrow(/events must be at most 2 events \(limits.maxEventsPerBatch\)/);
    expect(() => idx.applyBatch('x'.repeat(300), payload([]))).toThrow(/instance must be at most 256 characters long/);
    // Events of a kvpool pool take the same limits.
    const stored = { type: 'stored', blockId: 1, dpRank: 0, medium: 'GPU', hash: new Uint8Array(16).fill(9), parentHash: null, tokenIds: Int32Array.of(1, 2, 3, 4), salt: null as string | null, group: { index: 0, kind: 'full_attention' as const, slidingWindow: null } } as const;
    expect(() => idx.apply('e', [{ ...stored, dpRank: 3 }])).toThrow(/events\[0\].dpRank must be at most 2 \(limits.maxDpRank\), got 3/);
    expect(() => idx.apply('e', [{ ...stored, salt: 's'.repeat(257) }])).toThrow(/events\[0\].salt must be at most 256 characters long/);
    expect(() => idx.apply('e', [{ ...stored, medium: 'CPU' }])).toThrow(/rank 0 would hold blocks on 2 media/);
    expect(fingerprint(idx)).toBe(before);
    // A batch is counted as if it removed nothing (docs/events.md): removals make room for the next batch.
    expect(() => idx.applyBatch('e', payload([{ type: 'BlockRemoved', block_hashes: [1n, 2n], medium: 'GPU' }, storedMap([3n, 4n], B)]))).toThrow(/maxBlocksPerSource/);
    idx.applyBatch('e', payload([{ type: 'BlockRemoved', block_hashes: [1n, 2n], medium: 'GPU' }]));
    idx.applyBatch('e', payload([storedMap([3n, 4n, 5n], B)]));
    expect(idx.stats().blocks).toBe(3);
  });
});

describe('KVEventIndex takes any byte string whole or not at all', () => {
  it('random bytes and mutated real batches: applied, or a TypeError/RangeError with the index unchanged', () => {
    const { idx, payloads } = followed();
    let refused = 0;
    let applied = 0;
    const bytesArb = fc.oneof(
      fc.uint8Array({ maxLength: 64 }),
      // A real batch with bytes changed: most still decode, many then fail a check.
      fc.tuple(fc.nat(payloads.length - 1), fc.array(fc.tuple(fc.nat(), fc.nat(255)), { minLength: 1, maxLength: 4 })).map(([p, edits]) => {
        const b = payloads[p]!.slice();
        for (const [at, v] of edits) b[at % b.length] = v;
        return b;
      }),
    );
    fc.assert(
      fc.property(bytesArb, (bytes) => {
        try {
          decodeVllmEventBatch(bytes);
        } catch (e) {
          expect(e).toBeInstanceOf(TypeError);
        }
        const before = fingerprint(idx);
        try {
          idx.applyBatch('fuzz', bytes);
          applied++;
        } catch (e) {
          expect(e instanceof TypeError || e instanceof RangeError, String(e)).toBe(true);
          expect(fingerprint(idx)).toBe(before);
          refused++;
        }
      }),
      { numRuns: soak(400) },
    );
    expect(refused).toBeGreaterThan(0);
    expect(applied).toBeGreaterThan(0);
  });
});

describe('KVEventIndex under a hash flood', () => {
  it('hashes that all shared one home under a fixed table hash spread under the keyed one', () => {
    const hashes = collidingHashes(30_000);
    const homes = new Set(hashes.map((h) => unkeyedMix(Number(h & 0xffff_ffffn), Number(h >> 32n), 0)));
    expect(homes.size).toBe(1); // the crafting works: every one had the same home before
    const idx = new KVEventIndex({ blockSize: B });
    for (let i = 0; i < hashes.length; i += 1000) {
      idx.applyBatch('flood', payload([storedMap(hashes.slice(i, i + 1000), B, { parent_block_hash: i === 0 ? null : hashes[i - 1] })]));
    }
    const st = idx.stats();
    expect(st.blocks).toBe(30_000);
    // At most half full, linear probing from random homes: runs of tens; the fixed hash made one run of 30,000.
    expect(st.longestProbe).toBeLessThan(300);
    for (let i = 0; i < hashes.length; i += 1000) idx.applyBatch('flood', payload([{ type: 'BlockRemoved', block_hashes: hashes.slice(i, i + 1000), medium: 'GPU' }]));
    expect(idx.stats()).toMatchObject({ blocks: 0, keys: 0 });
  });
});

describe('KVEventIndex with sources coming and going', () => {
  it('20,000 engines that join and leave leave no source, rank, key or name behind', () => {
    const idx = new KVEventIndex({ blockSize: B });
    idx.applyBatch('stays', payload([storedMap([7n], B)]));
    for (let i = 0; i < 20_000; i++) {
      const name = `engine-${i}`;
      idx.applyBatch(name, payload([storedMap([BigInt(i + 1), new Uint8Array([i & 255, i >> 8, 3])], B, { medium: i % 2 === 0 ? 'GPU' : 'CPU' })], i % 4));
      if (i >= 2) idx.removeInstance(`engine-${i - 2}`);
    }
    idx.removeInstance('engine-19998');
    idx.removeInstance('engine-19999');
    const st = idx.stats();
    expect(st).toMatchObject({ sources: 1, ranks: 1, blocks: 1, keys: 1, names: 0 });
    // Numbers are reused: what the most sources at once needed (4 here), not one per engine that ever joined.
    expect(st.sourceNumbers).toBeLessThanOrEqual(4);
    expect(st.rankNumbers).toBeLessThanOrEqual(4);
    expect(idx.longestPrefix([100, 101, 102, 103]).get('stays')).toBe(1);
  });
});

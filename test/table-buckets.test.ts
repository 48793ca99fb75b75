// The prefix cache's hash table keeps 15 entries per 64-byte bucket and lets
// a full bucket overflow into the next ones (assembly/table.ts). Random chain
// hashes almost never fill a bucket, so these tests cache blocks under chosen
// hashes that all land in bucket 0, through the insert-by-hash path the host
// tier uses, and let the core's audit (which recounts every bucket's
// overflow count) check the table after each step.

import { describe, expect, it } from 'vitest';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';

/** Block ids the manager hands out (padding excluded). */
const NUM_BLOCKS = 128; // 256 table lanes: 16 buckets

/**
 * A 16-byte key whose fingerprint (low word xor high word of its first 8
 * bytes) has its low 4 bits clear, so its home is bucket 0 of 16. `k` makes it unique.
 */
function bucketZeroKey(k: number): Uint8Array {
  const h = new Uint8Array(16);
  const v = new DataView(h.buffer);
  v.setUint32(0, (k << 8) >>> 0, true); // low word; high word 0
  v.setUint32(8, k, true);
  v.setUint32(12, 0x9e3779b9, true);
  return h;
}

function keys(from: number, n: number): Uint8Array {
  const out = new Uint8Array(n * 16);
  for (let i = 0; i < n; i++) out.set(bucketZeroKey(from + i), i * 16);
  return out;
}

function setup() {
  const m = new BlockManagerImpl({ numBlocks: NUM_BLOCKS, blockSize: 4 });
  return m;
}

describe('hash table buckets that overflow', () => {
  it('caches 40 keys of one home bucket (three buckets deep) and finds every one again', () => {
    const m = setup();
    const ids = m.allocate(40)!;
    expect(m.insertHashesFrom(ids, 0, 40, keys(1, 40), 0)).toBe(40);
    m.check();
    expect(m.numBlocksInPrefixCache()).toBe(40);
    // The same keys on other blocks: every key is found (the cached block
    // stays), so none of the new blocks is cached.
    const dup = m.allocate(20)!;
    expect(m.insertHashesFrom(dup, 0, 20, keys(21, 20), 0)).toBe(0);
    for (const id of dup) expect(m.isCachedId(id)).toBe(false);
    m.check();
    // A key of the same bucket not cached yet is a miss, found past the overflow.
    expect(m.insertHashesFrom(dup, 0, 1, keys(1000, 1), 0)).toBe(1);
    expect(m.isCachedId(dup[0]!)).toBe(true);
    m.check();
  });

  it('keeps finding overflowed keys after the entries before them are evicted', () => {
    const m = setup();
    const ids = m.allocate(45)!;
    expect(m.insertHashesFrom(ids, 0, 45, keys(1, 45), 0)).toBe(45);
    m.deallocate(ids); // evictable now; LRU order: the last inserted is the oldest
    m.check();
    expect(m.evict(20)).toBe(20);
    m.check();
    expect(m.numBlocksInPrefixCache()).toBe(25);
    expect(m.numFreeBlocks()).toBeGreaterThanOrEqual(45); // the next allocation evicts nothing
    // Each key is cached iff its block survived: re-inserting all 45 keys
    // makes exactly the 20 evicted ones new.
    const again = m.allocate(45)!;
    expect(m.insertHashesFrom(again, 0, 45, keys(1, 45), 0)).toBe(20);
    m.check();
    m.deallocate(again);
    // Emptying the cache brings every overflow count back to zero (the audit recounts them).
    expect(m.resetPrefixCache()).toBe(45);
    m.check();
    expect(m.numBlocksInPrefixCache()).toBe(0);
  });

  it('fills the whole cache with keys of one bucket and empties it again', () => {
    const m = setup();
    const ids = m.allocate(NUM_BLOCKS - 1)!;
    expect(m.insertHashesFrom(ids, 0, NUM_BLOCKS - 1, keys(7, NUM_BLOCKS - 1), 0)).toBe(NUM_BLOCKS - 1);
    m.check();
    m.deallocate(ids);
    // Evict one at a time: every removal walks the overflowed buckets and fixes their counts.
    for (let i = 0; i < NUM_BLOCKS - 1; i++) {
      expect(m.evict(1)).toBe(1);
      m.check();
    }
    expect(m.numFreeBlocks()).toBe(NUM_BLOCKS - 1);
  });
});

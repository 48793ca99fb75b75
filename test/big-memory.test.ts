// Past 2 GiB of linear memory. Pointers cross the boundary as i32 and come
// back negative above 2^31; every pointer the bindings keep must be read as
// unsigned, so the whole 4 GiB of a wasm32 memory works, and a request
// beyond it is a clear error that leaves the process usable.

import { totalmem } from 'node:os';
import { describe, expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { sharedCore } from '../bindings/core/shared-core.js';
import { hashBlocks, xxh3_128 } from '../bindings/hash.js';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { ConcurrentBlockManagerImpl } from '../bindings/managers/concurrent-block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { heapInUse } from './support/core-memory.js';
import { external } from './support/externals.js';

const TWO_GIB = 2 ** 31;
/** ~2.17 GiB of arrays (mgr_region_bytes): a manager whose arrays end past 2 GiB, two of which cannot fit. */
const BIG = 34_000_000;

const enough = external('8 GB of memory', totalmem() >= 8 * 2 ** 30, `this machine has ${(totalmem() / 2 ** 30).toFixed(1)} GB`);

/** Token prompts: `n` tokens, distinct per `p`. */
const prompt = (p: number, n: number) => Int32Array.from({ length: n }, (_, i) => p * 1_000_003 + i * 7);

/** Records the regions the instance hands out from now on. */
function trackRegions(rt: { alloc(bytes: number): number }): number[] {
  const seen: number[] = [];
  const alloc = rt.alloc.bind(rt);
  rt.alloc = (bytes: number) => {
    const p = alloc(bytes);
    seen.push(p);
    return p;
  };
  return seen;
}

describe.skipIf(!enough)('linear memory past 2 GiB', () => {
  it('plain build: hashes, events, a fresh pool and a huge failure all behave above 2^31', () => {
    const rt = plainCore();
    // References computed while every region is low.
    const small = prompt(1, 4096);
    const expectSmall = hashBlocks(small, 16);
    const expectX = xxh3_128(new Uint8Array(1000).fill(3));
    expect(hashBlocks([1, 2, 3, 4], 4)).toEqual(hashBlocks(Int32Array.from([1, 2, 3, 4]), 4));

    const big = new BlockManagerImpl({ numBlocks: BIG, blockSize: 16 });
    expect(rt.memory.buffer.byteLength).toBeGreaterThan(TWO_GIB);
    const regions = trackRegions(rt);
    try {
      // Larger inputs than before: the staging areas move above 2 GiB.
      const large = prompt(1, 4096 * 64);
      const hLarge = hashBlocks(large, 16);
      expect(regions.some((p) => p > TWO_GIB)).toBe(true);
      expect(hLarge.subarray(0, expectSmall.length)).toEqual(expectSmall);
      expect(hashBlocks([1, 2, 3, 4], 4)).not.toEqual(new Uint8Array(16));
      expect(xxh3_128(new Uint8Array(1000).fill(3))).toEqual(expectX);
      expect(xxh3_128(new Uint8Array(4 << 20).fill(3)).length).toBe(16);

      // The big manager itself: its arrays lie above 2 GiB.
      const ids = big.allocate(4)!;
      expect([...ids]).toEqual([1, 2, 3, 4]);
      big.recordEvents(true);
      expect(big.cache(prompt(2, 64), ids)).toBe(4);
      const ev = big.drainEvents();
      const h2 = hashBlocks(prompt(2, 64), 16);
      expect(ev.map((e) => (e.type === 'stored' ? [...e.hash] : null))).toEqual([0, 1, 2, 3].map((b) => [...h2.subarray(b * 16, b * 16 + 16)]));
      expect(big.blockHash(4)).toEqual(h2.slice(48, 64));
      big.deallocate(ids);
      expect([...big.allocateShared(prompt(2, 64))]).toEqual([1, 2, 3, 4]);
      big.check();

      // A pool made now lives above 2 GiB and keeps two prompts apart.
      const pool = new BlockManagerPool({ numBlocks: 4096, blockSize: 16, dpSize: 2 });
      pool.recordEvents(true);
      const a = new Sequence(prompt(3, 100));
      const b = new Sequence(prompt(4, 100));
      expect(pool.allocate([a, b])).toBe(true);
      a.kvCachedTokens = 100;
      b.kvCachedTokens = 100;
      pool.deallocate([a, b]);
      const stored = pool.drainEvents().filter((e) => e.type === 'stored');
      expect(stored.length).toBe(12);
      const keys = new Set(stored.map((e) => Buffer.from(e.type === 'stored' ? e.hash : []).toString('hex')));
      expect(keys.size).toBe(12);
      const c = new Sequence(prompt(3, 100));
      expect(pool.allocate(c)).toBe(true);
      expect(c.sharedBlocks).toBe(6);
      pool.deallocate(c);
      pool.check();
      pool.dispose();

      // More than is left: refused, nothing kept, and the memory it grew is free again.
      const inUse = () => heapInUse(rt);
      const before = inUse();
      expect(() => new BlockManagerImpl({ numBlocks: BIG, blockSize: 16 })).toThrow(/Wasm memory exhausted creating a manager of 34000000 blocks \(it needs 2\.\d\d GiB/);
      expect(() => new BlockManagerPool({ numBlocks: 1_000_000, blockSize: 16, dpSize: 110 })).toThrow(/needs 5\.\d\d GiB of Wasm memory/);
      expect(inUse()).toBe(before);
      const after = new BlockManagerPool({ numBlocks: 1000, blockSize: 16 });
      expect(after.allocate(new Sequence(prompt(5, 40)))).toBe(true);
      after.check();
      after.dispose();
    } finally {
      big.dispose();
    }
  });

  it('shared-memory build: a manager past 2 GiB, an attached view and a small neighbour', () => {
    const big = new ConcurrentBlockManagerImpl({ numBlocks: BIG, blockSize: 16 });
    const rt = sharedCore();
    expect(rt.memory.buffer.byteLength).toBeGreaterThan(TWO_GIB);
    const small = new ConcurrentBlockManagerImpl({ numBlocks: 64, blockSize: 16 });
    try {
      const view = ConcurrentBlockManagerImpl.attach(big.share());
      const ids = view.allocate(3)!;
      expect(view.cache(prompt(6, 48), ids)).toBe(3);
      view.deallocate(ids);
      expect([...big.allocateShared(prompt(6, 48))]).toEqual([...ids]);
      small.recordEvents(true);
      const s = small.allocate(2)!;
      small.cache(prompt(7, 32), s);
      const ev = small.drainEvents();
      expect(ev.map((e) => (e.type === 'stored' ? [...e.hash] : null))).toEqual(
        [0, 1].map((b) => [...hashBlocks(prompt(7, 32), 16).subarray(b * 16, b * 16 + 16)]),
      );
      small.check();
      big.check();
      view.dispose();
    } finally {
      small.dispose();
      big.dispose();
    }
  });
});

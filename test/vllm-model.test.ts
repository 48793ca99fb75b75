// The reference model of vLLM's block pool and KVCacheManager
// (model/vllm/), on the scenarios vLLM's own classes were run through
// (docs/engines.md lists the behaviours): each expected queue and id list
// below is what vLLM v1's unmodified KVCacheManager gave on the same calls
// (blocks of 16 tokens, 8 blocks: null block 0 and ids 1..7).

import { describe, expect, it } from 'vitest';
import { ModelVllmBlockPool } from '../model/vllm/block-pool.js';
import { ModelVllmKvCacheManager, type ModelVllmRequestView } from '../model/vllm/kv-cache-manager.js';
import { chainKey } from '../model/chain-key.js';

const B = 16;

/** A request of `tokens`, its keys computed over its full blocks. */
class Req implements ModelVllmRequestView {
  numComputedTokens = 0;
  readonly keys: string[] = [];
  constructor(
    readonly id: number,
    readonly tokens: number[],
  ) {
    let parent: string | null = null;
    for (let b = 0; b + 1 <= Math.floor(tokens.length / B); b++) this.keys.push((parent = chainKey(parent, tokens, b * B, (b + 1) * B)));
  }
  get numTokens(): number {
    return this.tokens.length;
  }
}

const toks = (tag: number, n: number) => Array.from({ length: n }, (_, i) => tag * 1000 + i);
let next = 0;
const req = (tokens: number[]) => new Req(++next, tokens);

/** What the scheduler does for a waiting request: look up, allocate for the rest of it. */
function admit(kv: ModelVllmKvCacheManager, r: Req): { ok: boolean; hit: number } {
  const { blocks, tokens } = kv.getComputedBlocks(r);
  const out = kv.allocateSlots(r, r.numTokens - tokens, tokens, blocks);
  if (out !== null) r.numComputedTokens = r.numTokens;
  kv.check();
  return { ok: out !== null, hit: tokens };
}

const fresh = (n = 8) => {
  const pool = new ModelVllmBlockPool(n);
  return { pool, kv: new ModelVllmKvCacheManager(pool, B) };
};
const queue = (pool: ModelVllmBlockPool) => [...pool.queue];

describe('model of the vLLM block pool', () => {
  it('takes block 0 as the null block, hands out ids from the head in id order, caches full blocks at allocation', () => {
    const { pool, kv } = fresh();
    expect(queue(pool)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const a = req(toks(1, 40));
    admit(kv, a);
    expect(kv.blocksOf(a.id)).toEqual([1, 2, 3]);
    expect([pool.key[1] !== null, pool.key[2] !== null, pool.key[3] !== null]).toEqual([true, true, false]);
    // B, the same prompt while A runs, hits A's two blocks.
    const b = req(toks(1, 40));
    expect(admit(kv, b).hit).toBe(32);
    expect(kv.blocksOf(b.id)).toEqual([1, 2, 4]);
    expect(pool.ref[1]).toBe(2);
    // Freeing appends a request's unreferenced blocks to the tail, last block first.
    kv.free(a.id);
    expect(queue(pool)).toEqual([5, 6, 7, 3]);
    kv.free(b.id);
    expect(queue(pool)).toEqual([5, 6, 7, 3, 4, 2, 1]);
    // Never-used ids first, then freed ones, oldest free first.
    const c = req(toks(2, 60));
    admit(kv, c);
    expect(kv.blocksOf(c.id)).toEqual([5, 6, 7, 3]);
    kv.free(c.id);
    expect(queue(pool)).toEqual([4, 2, 1, 3, 7, 6, 5]);
    // Eviction takes the head, lazily: block 2 loses its key although 3, free and unkeyed, sits behind.
    const evicted = pool.evicted;
    const d = req(toks(3, 20));
    admit(kv, d);
    expect(kv.blocksOf(d.id)).toEqual([4, 2]);
    expect(pool.evicted - evicted).toBe(1);
    expect(pool.key[3]).toBeNull();
    expect(pool.ref[3]).toBe(0);
    kv.check();
  });

  it('a failed allocation changes nothing; the capacity counts hit blocks that sit in the queue', () => {
    const { pool, kv } = fresh();
    const e = req(toks(4, 48));
    admit(kv, e);
    kv.free(e.id);
    const q0 = queue(pool);
    expect(q0).toEqual([4, 5, 6, 7, 3, 2, 1]);
    const f = req([...toks(4, 48), ...toks(5, 200)]);
    expect(admit(kv, f)).toEqual({ ok: false, hit: 48 });
    expect(queue(pool)).toEqual(q0);
    // 3 hits in the queue + 4 new blocks = 7 = the queue's length: it fits.
    const g = req([...toks(4, 48), ...toks(6, 60)]);
    expect(admit(kv, g)).toEqual({ ok: true, hit: 48 });
    expect(kv.blocksOf(g.id)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    kv.free(g.id);
    // The hit prefix is the most recent again, its head last.
    expect(queue(pool).slice(-3)).toEqual([3, 2, 1]);
  });

  it('never looks up the last block of a block-aligned prompt, and caches it again as a duplicate', () => {
    const { pool, kv } = fresh();
    const h1 = req(toks(7, 32));
    admit(kv, h1);
    kv.free(h1.id);
    const h2 = req(toks(7, 32));
    expect(admit(kv, h2).hit).toBe(16);
    expect(kv.blocksOf(h2.id)).toEqual([1, 3]);
    expect(pool.cached.get(h2.keys[1]!)).toEqual([2, 3]);
    // A lookup gives the oldest block of a key; once it is evicted, the next one.
    expect(pool.lookup(h2.keys, 2)).toEqual([1, 2]);
    kv.free(h2.id);
    expect(queue(pool)).toEqual([4, 5, 6, 7, 2, 3, 1]);
    pool.getNewBlocks(5); // 4, 5, 6, 7, then 2: its key leaves the map
    expect(pool.lookup(h2.keys, 2)).toEqual([1, 3]);
    pool.check();
  });

  it('fullSequenceMustFit refuses a first chunk that fits when the whole request would not', () => {
    const { pool, kv } = fresh();
    const big = req(toks(8, 200)); // 13 blocks, 7 in the pool
    expect(kv.allocateSlots(big, 16, 0, [], true)).toBeNull();
    expect(queue(pool)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(kv.allocateSlots(big, 16, 0, [], false)).toEqual([1]);
    kv.check();
  });
});

describe('model audit', () => {
  it('finds a block both referenced and queued, a key the map lost, and references no request holds', () => {
    const { pool, kv } = fresh();
    const a = req(toks(1, 40));
    admit(kv, a);
    pool.ref[5] = 1;
    expect(() => pool.check()).toThrow(/block 5/);
    pool.ref[5] = 0;
    pool.cached.delete(a.keys[0]!);
    expect(() => pool.check()).toThrow(/block 1/);
    pool.cached.set(a.keys[0]!, [1]);
    pool.ref[2]!++;
    expect(() => kv.check()).toThrow(/block 2 has 2 references/);
  });
});

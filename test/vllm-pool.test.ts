// The Wasm vLLM pool and KV-cache manager (bindings/vllm/) on worked
// scenarios, each on the reference model too; refusals, disposal and
// memory exhaustion. Random sequences: test/differential-vllm.test.ts.

import { describe, expect, it } from 'vitest';
import type { TraceRequest } from '../bindings/index.js';
import { VllmBlockPool } from '../bindings/vllm/block-pool.js';
import { VllmKvCacheManager } from '../bindings/vllm/kv-cache-manager.js';
import { VllmRequest } from '../bindings/vllm/request.js';
import { ModelVllmKv } from './support/vllm-model-kv.js';

const B = 4;
const trace = (content: number, inputLength: number, outputLength = 4): TraceRequest => ({ inputLength, outputLength, hashIds: Int32Array.of(content) });

/** Both implementations, each with its own request objects, driven alike. */
function both(numBlocks: number) {
  const wasm = new VllmKvCacheManager({ numBlocks, blockSize: B });
  const model = new ModelVllmKv(numBlocks, B);
  let next = 0;
  return {
    wasm,
    model,
    /** Admits a request for its whole prompt; its blocks (equal on both sides) or null. */
    admit(t: TraceRequest) {
      const r = next++;
      const w = new VllmRequest(r, t);
      const m = new VllmRequest(r, t);
      const h = wasm.computedBlocks(w);
      expect(model.computedBlocks(m)).toBe(h);
      const ok = wasm.allocateSlots(w, t.inputLength - h * B, h, false);
      expect(model.allocateSlots(m, t.inputLength - h * B, h, false)).toBe(ok);
      wasm.check();
      model.check();
      if (!ok) return null;
      w.numComputed = m.numComputed = t.inputLength;
      expect([...wasm.blocksOf(w)]).toEqual(model.blocksOf(m));
      return { w, m, blocks: [...wasm.blocksOf(w)], hit: h };
    },
  };
}

describe('the Wasm vLLM pool on worked scenarios', () => {
  it('a lookup gives the oldest block still cached under a key: after the oldest of three duplicates is evicted, the second oldest', () => {
    const { admit, wasm, model } = both(7); // ids 1..6
    const a = admit(trace(0, 8))!; // K0 on 1, K1 on 2
    expect(a.blocks).toEqual([1, 2]);
    wasm.release(a.w);
    model.release(a.m); // queue 3 4 5 6 2 1
    expect(admit(trace(0, 8))!.blocks).toEqual([1, 3]); // the aligned last block is never looked up: K1 again, on 3
    expect(admit(trace(0, 8))!.blocks).toEqual([1, 4]); // and on 4: K1 on 2, 3, 4
    expect(wasm.figures().cachedKeysAtEnd).toBe(2);
    expect(wasm.figures().cachedBlocksAtEnd).toBe(4);
    const d = admit(trace(1, 12))!;
    expect(d.blocks).toEqual([5, 6, 2]); // pops 5, 6, then 2: K1's oldest evicted
    expect(wasm.figures().evictedBlocks).toBe(1);
    wasm.release(d.w);
    model.release(d.m);
    const e = admit(trace(0, 12))!;
    expect(e.hit).toBe(2);
    expect(e.blocks.slice(0, 2)).toEqual([1, 3]);
  });

  it('a failed allocation changes nothing: no touch, no eviction, the queue as it was', () => {
    const { admit, wasm } = both(6);
    const a = admit(trace(0, 8))!;
    wasm.release(a.w);
    const before = { ...wasm.figures(), free: wasm.numFreeBlocks() };
    expect(admit(trace(0, 40))).toBeNull(); // hits K0, needs 10 blocks
    expect({ ...wasm.figures(), free: wasm.numFreeBlocks(), allocateCalls: before.allocateCalls }).toEqual(before);
  });
});

describe('the Wasm vLLM pool refuses what it cannot do, and says so', () => {
  it('a disposed manager or pool throws on every call; dispose may be called again', () => {
    const kv = new VllmKvCacheManager({ numBlocks: 8, blockSize: B });
    const r = new VllmRequest(0, trace(0, 8));
    kv.computedBlocks(r);
    kv.allocateSlots(r, 8, 0, false);
    kv.dispose();
    kv.dispose();
    expect(() => kv.numFreeBlocks()).toThrow(/disposed/);
    expect(() => kv.figures()).toThrow(/disposed/);
    expect(() => kv.check()).toThrow(/disposed/);
    expect(() => kv.computedBlocks(new VllmRequest(1, trace(0, 8)))).toThrow(/disposed/);
    const pool = new VllmBlockPool(4);
    pool.dispose();
    expect(() => pool.stats()).toThrow(/VllmBlockPool was disposed/);
    expect(() => pool.free(0, 0)).toThrow(/disposed/);
  });

  it('options are checked, each named', () => {
    expect(() => new VllmKvCacheManager({ numBlocks: 1, blockSize: 4 })).toThrow(/options.numBlocks/);
    expect(() => new VllmKvCacheManager({ numBlocks: 8, blockSize: 0 })).toThrow(/options.blockSize/);
    expect(() => new VllmKvCacheManager({ numBlocks: 8, blockSize: 4, seed: -1 })).toThrow(/options.seed/);
    expect(() => new VllmKvCacheManager({ numBlocks: 8, blockSize: 4, colour: 1 } as never)).toThrow(/colour/);
    expect(() => new VllmBlockPool(2.5)).toThrow(/numBlocks/);
  });

  it('a pool larger than memory can hold is a RangeError naming the size, and nothing is left behind', () => {
    const pool = new VllmBlockPool(8);
    expect(() => new VllmBlockPool(2 ** 31 - 1)).toThrow(/Wasm memory exhausted creating a vLLM pool of 2147483647 blocks/);
    pool.check();
    pool.dispose();
  });

  it('check() finds a corrupted pool', () => {
    const kv = new VllmKvCacheManager({ numBlocks: 8, blockSize: B });
    const r = new VllmRequest(0, trace(0, 8));
    kv.computedBlocks(r);
    kv.allocateSlots(r, 8, 0, false);
    kv.check();
    expect(kv.blocksOf(r)[0]).toBe(1);
    // A free the request's table does not know of: block 1 loses the reference request 0 still counts.
    const scratch = kv.pool.rt.alloc(16);
    kv.pool.rt.views().i32[scratch >>> 2] = 1;
    kv.pool.free(scratch, 1); // block 1 loses the reference request 0 still counts
    kv.pool.rt.release(scratch);
    expect(() => kv.check()).toThrow(/references are not the requests holding it|free queue/);
    kv.dispose();
  });
});

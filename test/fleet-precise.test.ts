// The precise router on the Mooncake trace: its index, built only from the
// engines' vLLM event batches, holds exactly what each engine's prefix cache
// holds at the end; and routing by cache content beats round-robin's hit
// rate (the trace's conversations come back for their earlier turns).

import { describe, expect, it } from 'vitest';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { Fleet, fleetSync } from '../bindings/fleet/fleet.js';
import { PrecisePrefixRouter, engineInstance } from '../bindings/fleet/precise-prefix.js';
import { TRACE_PATH } from './support/externals.js';

const trace = await readTraceFile(TRACE_PATH, 1000);

/** The low 64 bits of a kvpool block hash, as the index keeps uint64 hashes. */
function u64(h: Uint8Array): bigint {
  return new DataView(h.buffer, h.byteOffset, 16).getBigUint64(0, true);
}

describe('the precise router on the Mooncake trace', () => {
  it("its index equals every engine's prefix cache at the end", () => {
    const f = new Fleet({ trace: trace.slice(0, 600), engines: 3, router: 'precise-prefix', numBlocks: 8192, stepMs: 50 });
    try {
      const r = f.run();
      expect(r.evictedBlocks).toBeGreaterThan(10_000);
      const index = (f.router as PrecisePrefixRouter).index;
      for (let e = 0; e < 3; e++) {
        const pool = f.pool(e);
        const cached = pool.numBlocksInPrefixCache()[0]!;
        expect(cached).toBeGreaterThan(1000);
        const held = index.blocks(engineInstance(e));
        expect(held.every((b) => b.keyed)).toBe(true);
        // The engine's real cache, named by the pool itself: taking every block evicts
        // each cached one, and each eviction is announced with its hash.
        expect(pool.allocateBlocks((8192 - 1) * 16)).not.toBeNull();
        const removed = pool.drainEvents().flatMap((ev) => (ev.type === 'removed' ? [u64(ev.hash)] : []));
        expect(removed.length).toBe(cached);
        expect(new Set(held.map((b) => b.hash))).toEqual(new Set(removed));
        expect(held.length).toBe(cached);
      }
    } finally {
      f.dispose();
    }
  });

  it('cache-aware routers beat round-robin on hit rate, and round-robin stays balanced', () => {
    const o = { trace, engines: 4, numBlocks: 32768 };
    const rr = fleetSync({ ...o, router: 'round-robin' });
    const approx = fleetSync({ ...o, router: 'approximate-prefix' });
    const precise = fleetSync({ ...o, router: 'precise-prefix' });
    expect(approx.promptBlocks).toBe(rr.promptBlocks);
    expect(precise.promptBlocks).toBe(rr.promptBlocks);
    // Every request's prompt counts once whichever engine serves it: the hit rates compare the same denominator.
    expect(approx.matchedBlocks).toBeGreaterThan(rr.matchedBlocks * 1.2);
    expect(precise.matchedBlocks).toBeGreaterThan(rr.matchedBlocks * 1.2);
    expect(precise.hitRate).toBeGreaterThan(rr.hitRate);
    expect(rr.engines.map((e) => e.requests)).toEqual([250, 250, 250, 250]);
  });
});

// The precise router on the Mooncake trace: its index, built only from the
// engines' vLLM event batches, holds exactly what each engine's prefix cache
// holds at the end; and routing by cache content beats round-robin's hit
// rate (the trace's conversations come back for their earlier turns). An
// in-thread fleet feeds the index the engines' raw records; it holds and
// routes exactly as one fed the encoded batches does.

import { describe, expect, it } from 'vitest';
import { readTraceFile } from '../bindings/node/trace-file.js';
import { Fleet, fleetSync } from '../bindings/fleet/fleet.js';
import { PrecisePrefixRouter, engineInstance } from '../bindings/fleet/precise-prefix.js';
import type { FleetOptions } from '../bindings/fleet/fleet-options.js';
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

/** A precise router the fleet does not recognise as its own: it is sent the encoded batches. */
class BatchFedRouter extends PrecisePrefixRouter {
  override onEvents(e: number, batches: readonly Uint8Array[]): void {
    super.onEvents(e, batches);
  }
}

describe('the precise router fed raw records or batches', () => {
  /** Every source's blocks, as the index lists them (hash, parent, tokens, keyed), and what it counts. */
  const contents = (index: PrecisePrefixRouter['index']) =>
    index.sourcesInfo().map((s) => ({ ...s, blocks: index.blocks(s.instance, s.dpRank, s.medium).map((b) => [b.hash, b.parentHash, [...b.tokenIds], b.keyed]) }));

  for (const [name, extra] of [
    ['plain', {}],
    ['2 dp ranks and a host tier', { dpSize: 2, hostBlocks: 6000 }],
  ] as Array<[string, Partial<FleetOptions>]>) {
    it(`routes and indexes identically (${name}), with and without an event sink`, () => {
      const o: FleetOptions = { trace: trace.slice(0, 400), engines: 3, numBlocks: 4096, stepMs: 50, ...extra };
      const run = (router: PrecisePrefixRouter, sink: boolean) => {
        let batches = 0;
        const f = new Fleet({ ...o, router }, 'trace', sink ? (_e, b) => (batches += b.length) : undefined);
        try {
          const r = f.run();
          return { r: { ...r, engines: r.engines.map((e) => ({ ...e, run: { ...e.run, seconds: 0, allocateCallsPerSecond: 0 } })) }, index: contents(router.index), batches, ignored: router.index.ignoredEvents };
        } finally {
          f.dispose();
        }
      };
      const mk = (R: typeof PrecisePrefixRouter) => new R({ blockSize: 16 });
      const viaBatches = run(mk(BatchFedRouter), false);
      expect(viaBatches.r.evictedBlocks).toBeGreaterThan(1000);
      expect(viaBatches.index.reduce((n, s) => n + s.blocks.length, 0)).toBeGreaterThan(1000);
      if (extra.hostBlocks !== undefined) expect(viaBatches.index.some((s) => s.medium === 'CPU' && s.blocks.length > 0)).toBe(true);
      const viaRecords = run(mk(PrecisePrefixRouter), false);
      expect(viaRecords.r).toEqual(viaBatches.r);
      expect(viaRecords.index).toEqual(viaBatches.index);
      // With a sink the fleet encodes the batches and the index reads the same records first.
      const both = run(mk(PrecisePrefixRouter), true);
      expect(both.batches).toBeGreaterThan(0);
      expect(both.r).toEqual(viaBatches.r);
      expect(both.index).toEqual(viaBatches.index);
    }, 60_000);
  }
});

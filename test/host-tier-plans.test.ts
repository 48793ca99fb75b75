// Transfer plans of the host tier are recorded compactly and their
// BlockTransfer objects made when read (ranks/host-tier-rank.ts). What a
// caller reads must not change what the pool does: a plan completes with
// the hashes recorded when it was made, whatever the caller did to the
// objects it was handed, and reading a plan or not gives the same state.

import { describe, expect, it } from 'vitest';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { blockTokens } from './support/block-tokens.js';

const B = 4;
const prompt = (blocks: number, base: number) => blockTokens(B, blocks, base, 1);
const pool = () => new HierarchyBlockManagerPool({ numBlocks: 8, blockSize: B, hostNumBlocks: 16 });

function finish(p: HierarchyBlockManagerPool, tokens: number[]): void {
  const s = new Sequence(tokens);
  expect(p.allocate(s)).toBe(true);
  s.kvCachedTokens = s.numTokens;
  p.deallocate(s);
}

describe('host-tier plans', () => {
  it('completes an offload with the recorded hashes even when the caller overwrote the ones it read', () => {
    const p = pool();
    const a = prompt(3, 100);
    finish(p, a);
    const plan = p.takeTransfers()[0]!.offload!;
    expect(Object.isFrozen(plan)).toBe(true);
    expect(Object.isFrozen(plan.blocks)).toBe(true);
    const read = plan.blocks.map((b) => [b.src, b.dst]);
    for (const b of plan.blocks) b.hash.fill(0xee);
    p.completeOffload(plan);
    p.check();
    // A completed plan still reads as it did.
    expect(plan.blocks.map((b) => [b.src, b.dst])).toEqual(read);
    // The host cache holds A's keys: after the device forgets A, a prefill of A loads its 3 full blocks from the host.
    expect(p.managers[0]!.evict(100)).toBe(3);
    const s = new Sequence(a);
    expect(p.allocate(s)).toBe(true);
    const [t] = p.takeTransfers();
    expect(t!.loads.map((l) => l.src)).toEqual([1, 2, 3]);
    expect(t!.loads).toBe(t!.loads); // made once
    p.check();
  });

  it('a plan first read after it completed still lists its copies', () => {
    const p = pool();
    finish(p, prompt(2, 300));
    const plan = p.takeTransfers()[0]!.offload!;
    p.completeOffload(plan);
    expect(plan.blocks.map((b) => b.src)).toEqual([1, 2]);
    expect(plan.blocks[0]!.hash.length).toBe(16);
  });

  it('leaves the same state whether plans are read or not', () => {
    const figures = (read: boolean) => {
      const p = pool();
      for (let r = 0; r < 6; r++) {
        finish(p, prompt(2 + (r % 3), 100 * (r % 4)));
        for (const t of p.takeTransfers()) {
          if (read) void t.loads.length, void t.offload?.blocks.length;
          if (t.offload) p.completeOffload(t.offload);
        }
        p.check();
      }
      return { stats: p.stats(), host: p.hostStats(), tiers: p.hierarchyStats() };
    };
    expect(figures(false)).toEqual(figures(true));
  });
});

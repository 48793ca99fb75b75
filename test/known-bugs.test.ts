// Failing tests of real bugs the test suite found, kept out of the default
// run (describe.skip) until they are fixed. Each names the bug and the
// issue that owns its fix; remove the `.skip` with the fix. Run them with
//   npx vitest run test/known-bugs.test.ts --allowOnly
// after changing `describe.skip` to `describe.only` locally.

import { describe, expect, it } from 'vitest';
import { HierarchyBlockManagerPool, Sequence } from '../bindings/index.js';

const B = 4;
const tokens = (n: number, base: number) => Array.from({ length: n }, (_, i) => base + i);

// KNOWN BUG (issue 14, host tier all-or-nothing): BlockManagerPool.tryAllocate,
// on failure, drops the sequence from the pool's live set when it holds no
// device blocks and no single id -- but on the host tier it may still hold
// host blocks (attached by allocateShared). pool.check() then fails with
// "a sequence holds host blocks but no device state", and liveSequences()
// no longer lists a sequence that holds blocks. Found by the hierarchy
// differential (test/differential-hierarchy.test.ts), which now avoids
// tryAllocate on sequences holding host blocks.
describe.skip('KNOWN BUG (issue 14): a failed tryAllocate on the host tier forgets the host blocks the sequence holds', () => {
  it('keeps the sequence live (or gives its host blocks back) and the pool whole', () => {
    const p = new HierarchyBlockManagerPool({ numBlocks: 6, blockSize: B, hostNumBlocks: 16 });
    // A computes 3 full blocks and a token; finishing offloads the 3 blocks to the host.
    const a = new Sequence(tokens(13, 100));
    expect(p.allocate(a)).toBe(true);
    a.kvCachedTokens = 13;
    p.deallocate(a);
    p.completeOffload(p.takeTransfers()[0]!.offload!);
    expect(p.resetPrefixCache()).toEqual([3]); // the device forgets them; the host keeps them
    // Another sequence takes all 5 device blocks.
    const filler = new Sequence(tokens(20, 900));
    expect(p.allocate(filler)).toBe(true);
    // B has A's prompt: its match attaches A's 3 blocks from the host tier.
    const b = new Sequence(tokens(13, 100));
    expect(p.allocateShared(b)).toBe(0);
    expect([...p.hostBlockTable(b)].length).toBe(3);
    // No device block for it: tryAllocate fails...
    expect(p.tryAllocate(b)).toBe(false);
    // ...and the pool must still account for what b holds.
    if (p.hostBlockTable(b).length > 0) expect(p.liveSequences().has(b)).toBe(true);
    expect(() => p.check()).not.toThrow();
    p.deallocate([b, filler]);
    expect(p.hostNumUsedBlocks()).toEqual([0]);
    p.check();
    p.dispose();
  });
});

// The pool's memory precheck: before building anything, a pool adds up the
// core memory of every manager its ranks will have (the KV manager, the
// single ids, a host tier, linear-state slots) and refuses when that cannot
// fit in what is left of the 4 GiB core. Near the limit it must refuse a pool
// that cannot be built, with its own message and nothing kept, and build one
// that can. The test takes all of the core's memory but its top 64 MiB once
// (reserved, hardly touched: fresh pages are never zeroed), then sets what is
// left for each case with one small region.

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_PAGES } from '../bindings/core/abi.js';
import { plainCore } from '../bindings/core/plain-core.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { HierarchyBlockManagerPool } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { heapInUse, takeAllRegions } from './support/core-memory.js';

const LIMIT = MAX_PAGES * 65536;
const rt = plainCore();
const inUse = () => heapInUse(rt);
const left = () => LIMIT - inUse();
const region = (numBlocks: number, prefixOn: boolean) => rt.ex.mgr_region_bytes(numBlocks, prefixOn ? 1 : 0);

const N = 100_000;
const SINGLES = 50_000; // large enough that its arrays count
const base = { numBlocks: N, blockSize: 16, singleBlockCapacity: SINGLES };
const cases = [
  { name: 'plain', make: () => new BlockManagerPool(base), managers: [region(N, true), region(SINGLES, false)] },
  {
    name: 'no prefix cache',
    make: () => new BlockManagerPool({ ...base, enablePrefixCache: false }),
    managers: [region(N, false), region(SINGLES, false)],
  },
  {
    name: 'host tier',
    make: () => new HierarchyBlockManagerPool({ ...base, hostNumBlocks: 2 * N }),
    managers: [region(N, true), region(SINGLES, false), region(2 * N, true)],
  },
  {
    name: 'linear state',
    make: () => new BlockManagerPool({ ...base, enableLinearState: true, linearStateNumSlots: SINGLES }),
    managers: [region(N, true), region(SINGLES, false), region(SINGLES, true)],
  },
];

const filler: number[] = [];
beforeAll(() => {
  // Each pool once while memory is plenty: the staging areas grow to what
  // building and checking them takes, so that later they leave no holes.
  for (const c of cases) {
    const p = c.make();
    p.check();
    p.dispose();
  }
  // Every region there is, the holes those builds left included; then the
  // highest ones given back, so that what is left is one piece at the top.
  filler.push(...takeAllRegions(rt));
  filler.sort((a, b) => b - a);
  while (left() < 64 << 20) rt.release(filler.shift()!);
});
afterAll(() => {
  for (const p of filler) rt.release(p);
});

/** Runs `fn` with exactly `bytes` (to 16 bytes) of the core's 4 GiB left, in one piece. */
function withLeft(bytes: number, fn: () => void): void {
  const r = rt.alloc(left() - bytes - 16);
  expect(r, 'no hole below the top: what is left is one piece').not.toBe(0);
  expect(Math.abs(left() - bytes)).toBeLessThanOrEqual(16);
  try {
    fn();
  } finally {
    rt.release(r);
  }
}

describe('the pool memory precheck near 4 GiB', () => {
  for (const c of cases) {
    const need = c.managers.reduce((a, b) => a + b, 0);

    it(`${c.name}: refuses, before building anything, a pool 64 KiB short of what its managers need`, () => {
      withLeft(need - (64 << 10), () => {
        const before = inUse();
        expect(c.make).toThrow(/^kvpool: a pool of 1 rank\(s\) of 100000 blocks needs [\d.]+ MiB of Wasm memory; a 32-bit core holds at most 4 GiB/);
        expect(inUse()).toBe(before);
      });
    });

    it(`${c.name}: builds the pool with 1 MiB to spare`, () => {
      withLeft(need + (1 << 20), () => {
        const p = c.make();
        p.check();
        p.dispose();
      });
    });
  }
});

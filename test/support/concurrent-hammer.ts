// The operation mix one thread runs against a shared manager in the
// concurrency tests (test/concurrent-manager.test.ts), on the main thread and
// in workers alike. It tallies what it did so the test can add the threads'
// tallies up against the manager's counters, and it checks that no fresh id
// is handed out while another thread holds it exclusively.

import type { ConcurrentBlockManagerImpl } from '../../bindings/managers/concurrent-block-manager-impl.js';
import { mulberry32 as rng } from '../../bindings/replay/prng.js';

export interface Tally {
  allocateCalls: number;
  idsAllocated: number;
  allocFailures: number;
  matchCalls: number;
  blocksQueried: number;
  blocksHit: number;
  blocksInserted: number;
  evictedExplicitly: number;
  /** Fresh ids that another thread still held exclusively when handed out. */
  heldTwice: number;
  /** Times withLock ran its body without this thread owning the lock (lockDepth() not 1). */
  notOwned: number;
  /** Ticks of a clock all threads advance once per operation: this thread's first and last. */
  firstTick: number;
  lastTick: number;
}

/**
 * Shared by the threads of one run: [0] the operation clock, [1] threads
 * arrived at the halfway barrier, [2] how many threads take part.
 */
export type HammerSync = Int32Array;

/** Waits until every thread of the run has done half its operations. */
function halfway(sync: HammerSync): void {
  Atomics.add(sync, 1, 1);
  Atomics.notify(sync, 1);
  while (Atomics.load(sync, 1) < sync[2]!) Atomics.wait(sync, 1, Atomics.load(sync, 1), 100);
}

/** Prompts sharing prefixes across threads: 3 roots, each with 4 branches (p in 0..11, up to 4 blocks). */
export function prompt(p: number, blocks: number, B: number): number[] {
  const root = p % 3;
  const branch = Math.floor(p / 3) % 4;
  const t: number[] = [];
  for (let i = 0; i < blocks * B; i++) t.push(i < 2 * B ? root * 1000 + i : root * 1000 + branch * 100 + i);
  return t;
}

/**
 * Runs `ops` operations. `owners[id]` is the thread tag exclusively holding a
 * fresh id (0: nobody); it is cleared before the id is cached or released.
 * Releases everything it holds at the end.
 */
export function hammer(m: ConcurrentBlockManagerImpl, ops: number, seed: number, owners: Int32Array, tag: number, sync?: HammerSync): Tally {
  const r = rng(seed);
  const B = m.blockSize;
  const tally: Tally = {
    allocateCalls: 0,
    idsAllocated: 0,
    allocFailures: 0,
    matchCalls: 0,
    blocksQueried: 0,
    blocksHit: 0,
    blocksInserted: 0,
    evictedExplicitly: 0,
    heldTwice: 0,
    notOwned: 0,
    firstTick: -1,
    lastTick: -1,
  };
  const held: number[] = []; // one entry per reference this thread owns
  const exclusive = new Set<number>();

  const claim = (ids: ArrayLike<number>) => {
    for (let i = 0; i < ids.length; i++) {
      if (Atomics.compareExchange(owners, ids[i]!, 0, tag) !== 0) tally.heldTwice++;
      exclusive.add(ids[i]!);
    }
  };
  const unclaim = (ids: ArrayLike<number>) => {
    for (let i = 0; i < ids.length; i++) {
      if (exclusive.delete(ids[i]!)) Atomics.store(owners, ids[i]!, 0);
    }
  };
  const alloc = (n: number): Int32Array | null => {
    tally.allocateCalls++;
    const a = m.allocate(n);
    if (a === null) tally.allocFailures++;
    else {
      tally.idsAllocated += n;
      claim(a);
    }
    return a;
  };

  /** allocateShared on a random chain (one other threads cache too), tallied. */
  const match = () => {
    const blocks = 1 + Math.floor(r() * 4);
    const t = prompt(Math.floor(r() * 12), blocks, B);
    const hits = m.allocateShared(t);
    tally.matchCalls++;
    tally.blocksQueried += blocks;
    tally.blocksHit += hits.length;
    return { t, blocks, hits };
  };

  for (let op = 0; op < ops; op++) {
    if (sync) {
      // The threads meet halfway, so every thread's operations overlap every
      // other's in time (by construction, not by luck of the scheduler).
      if (op === ops >> 1) halfway(sync);
      tally.lastTick = Atomics.add(sync, 0, 1);
      if (tally.firstTick < 0) tally.firstTick = tally.lastTick;
    }
    // A probe of the lock alone: taken after waiting, it must be this thread's.
    m.withLock(() => {
      if (m.lockDepth() !== 1) tally.notOwned++;
    });
    const x = r();
    if (x < 0.25) {
      const a = alloc(1 + Math.floor(r() * 3));
      if (a) held.push(...a);
    } else if (x < 0.5) {
      if (held.length === 0) continue;
      const k = 1 + Math.floor(r() * Math.min(4, held.length));
      const ids = held.splice(Math.floor(r() * (held.length - k + 1)), k);
      unclaim(ids);
      m.deallocate(ids);
    } else if (x < 0.7) {
      held.push(...match().hits);
    } else if (x < 0.95) {
      // A sequence, as one locked step: its cached prefix, fresh blocks for
      // the rest, then cache it. A thread that got the lock after waiting
      // for it must own it (its depth is 1, not 0).
      m.withLock(() => {
        if (m.lockDepth() !== 1) tally.notOwned++;
        const { t, blocks, hits: shared } = match();
        const fresh = blocks > shared.length ? alloc(blocks - shared.length) : new Int32Array(0);
        if (fresh === null) {
          m.deallocate(shared);
          return;
        }
        const table = [...shared, ...fresh];
        unclaim(fresh); // once cached, other threads may match these ids
        tally.blocksInserted += m.cache(t, table, shared.length);
        held.push(...table);
      });
    } else {
      tally.evictedExplicitly += m.evict(1 + Math.floor(r() * 2));
    }
  }
  unclaim(held);
  m.deallocate(held);
  return tally;
}

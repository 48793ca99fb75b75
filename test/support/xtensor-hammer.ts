// The operation mix one thread runs against a shared XTensor manager in
// test/xtensor-concurrent.test.ts, on the main thread and in workers alike.
// It tallies what it did so the test can add the threads' tallies up against
// the manager's counters and page events, and it checks that no id is handed
// out while another thread holds it.

import type { ConcurrentXTensorBlockManagerImpl } from '../../bindings/managers/xtensor-concurrent-block-manager-impl.js';
import { mulberry32 as rng } from '../../bindings/replay/prng.js';

export interface XTally {
  allocateCalls: number;
  idsAllocated: number;
  allocFailures: number;
  /** Ids that another thread still held when handed out. */
  heldTwice: number;
  /** Page events this thread took (each event is taken by one thread only). */
  maps: number;
  unmaps: number;
  /** Atomic reserve-then-free pairs and sleep-then-wakeup pairs that ran. */
  reserves: number;
  naps: number;
}

/**
 * Runs `ops` operations. `owners[id]` is the tag of the thread holding `id`
 * (0: nobody); it is cleared before the thread's last reference is dropped.
 * Lets go of everything it holds at the end and takes the events left.
 */
export function hammer(m: ConcurrentXTensorBlockManagerImpl, ops: number, seed: number, owners: Int32Array, tag: number): XTally {
  const r = rng(seed);
  const t: XTally = { allocateCalls: 0, idsAllocated: 0, allocFailures: 0, heldTwice: 0, maps: 0, unmaps: 0, reserves: 0, naps: 0 };
  const held = new Map<number, number>(); // id -> references this thread holds
  const ids: number[] = []; // held ids, for picking
  const takeEvents = () => {
    for (const e of m.takeEvents()) t[e.type === 'map' ? 'maps' : 'unmaps']++;
  };
  const release = (k: number) => {
    const id = ids[k]!;
    const refs = held.get(id)!;
    if (refs === 1) {
      held.delete(id);
      ids[k] = ids[ids.length - 1]!;
      ids.pop();
      Atomics.store(owners, id, 0);
    } else held.set(id, refs - 1);
    m.deallocate([id]);
  };
  for (let i = 0; i < ops; i++) {
    const x = r();
    if (x < 0.4) {
      const n = 1 + Math.floor(r() * 4);
      t.allocateCalls++;
      const got = m.allocate(n);
      if (got === null) t.allocFailures++;
      else {
        t.idsAllocated += n;
        for (const id of got) {
          if (Atomics.compareExchange(owners, id, 0, tag) !== 0) t.heldTwice++;
          held.set(id, 1);
          ids.push(id);
        }
      }
    } else if (x < 0.72) {
      const k = Math.min(ids.length, 1 + Math.floor(r() * 3));
      for (let j = 0; j < k; j++) release(Math.floor(r() * ids.length));
    } else if (x < 0.77) {
      if (ids.length > 0) {
        const id = ids[Math.floor(r() * ids.length)]!;
        m.retain([id]);
        held.set(id, held.get(id)! + 1);
      }
    } else if (x < 0.82) {
      // Reserved ids belong to the manager, not a thread: reserving and
      // freeing them as one locked step keeps other threads from taking them.
      m.withLock(() => {
        if (m.tryToReserve(1 + Math.floor(r() * 3))) {
          t.reserves++;
          m.freeReserved();
        }
      });
    } else if (x < 0.86) {
      // Another thread would fail its allocation on a sleeping manager: only
      // the lock keeps it from seeing this nap.
      m.withLock(() => {
        m.sleep();
        if (!m.sleeping) throw new Error('sleep() did not put the manager to sleep');
        m.wakeup();
        t.naps++;
      });
    } else if (x < 0.9) {
      m.trim();
    } else if (x < 0.97) {
      takeEvents();
    } else {
      m.check();
    }
  }
  while (ids.length > 0) release(ids.length - 1);
  takeEvents();
  return t;
}

export function sumTallies(ts: readonly XTally[]): XTally {
  const s: XTally = { allocateCalls: 0, idsAllocated: 0, allocFailures: 0, heldTwice: 0, maps: 0, unmaps: 0, reserves: 0, naps: 0 };
  for (const t of ts) for (const k of Object.keys(s) as (keyof XTally)[]) s[k] += t[k];
  return s;
}

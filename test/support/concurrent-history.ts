// One thread's part of the concurrency history test
// (test/concurrent-history.test.ts): random operations on a shared
// ConcurrentBlockManagerImpl, each one logged with its arguments, its result
// and a sequence number taken under the manager's lock -- the order the
// operations really happened in. Replaying the merged log serially on the
// model must give every result again. The threads meet at a barrier between
// phases, so the history interleaves them by construction (not by luck of the
// scheduler), and each thread audits the manager (check()) under the lock
// mid-run.

import type { ConcurrentBlockManagerImpl } from '../../bindings/index.js';
import { mulberry32 as rng } from '../../bindings/replay/prng.js';
import { prompt } from './concurrent-hammer.js';

export type HistoryCall =
  | { kind: 'allocate'; n: number }
  | { kind: 'deallocate'; ids: number[] }
  | { kind: 'retain'; ids: number[] }
  | { kind: 'match'; tokens: number[] }
  | { kind: 'cache'; tokens: number[]; ids: number[]; existing: number }
  | { kind: 'evict'; n: number }
  | { kind: 'check' };

/** What an audit saw: the free stack and the eviction order at that point of the history. */
export interface HistorySnapshot {
  free: number[];
  evictionOrder: number[];
}

/** One logged operation: its place in the history, the thread, the call and what it returned. */
export interface HistoryEntry {
  seq: number;
  thread: number;
  call: HistoryCall;
  result: number[] | number | null | HistorySnapshot;
}

export interface HistoryShared {
  /** [0]: the next sequence number; [1]: threads arrived at the barrier; [2]: barrier generation. */
  sync: SharedArrayBuffer;
}

/** Waits until `threads` threads have arrived (a reusable barrier on sync[1], sync[2]). */
function barrier(sync: Int32Array, threads: number): void {
  const gen = Atomics.load(sync, 2);
  if (Atomics.add(sync, 1, 1) === threads - 1) {
    Atomics.store(sync, 1, 0);
    Atomics.add(sync, 2, 1);
    Atomics.notify(sync, 2);
  } else {
    while (Atomics.load(sync, 2) === gen) Atomics.wait(sync, 2, gen, 1000);
  }
}

/**
 * Runs `phases` phases of `opsPerPhase` random operations on `m`, waiting for
 * the `threads` threads at a barrier after each, and returns this thread's
 * log. Lets go of everything it holds at the end (logged too).
 */
export function runHistory(
  m: ConcurrentBlockManagerImpl, shared: HistoryShared, thread: number, threads: number, phases: number, opsPerPhase: number, seed: number,
): HistoryEntry[] {
  const sync = new Int32Array(shared.sync);
  const r = rng(seed);
  const B = m.blockSize;
  const log: HistoryEntry[] = [];
  const held: number[] = []; // one entry per reference this thread holds

  /** The call, run and numbered under the lock: the number is its place in the history. */
  const logged = <T extends Int32Array | number | null | void | HistorySnapshot>(call: HistoryCall, f: () => T): T =>
    m.withLock(() => {
      const seq = Atomics.add(sync, 0, 1);
      const out = f();
      log.push({ seq, thread, call, result: out instanceof Int32Array ? Array.from(out) : out === undefined ? null : out });
      return out;
    });

  barrier(sync, threads); // everyone starts together
  for (let phase = 0; phase < phases; phase++) {
    for (let op = 0; op < opsPerPhase; op++) {
      const x = r();
      if (x < 0.22) {
        const n = 1 + Math.floor(r() * 3);
        const a = logged({ kind: 'allocate', n }, () => m.allocate(n));
        if (a) held.push(...a);
      } else if (x < 0.45) {
        if (held.length === 0) continue;
        const k = 1 + Math.floor(r() * Math.min(4, held.length));
        const ids = held.splice(Math.floor(r() * (held.length - k + 1)), k);
        logged({ kind: 'deallocate', ids }, () => m.deallocate(ids));
      } else if (x < 0.5) {
        if (held.length === 0) continue;
        const ids = [held[Math.floor(r() * held.length)]!];
        logged({ kind: 'retain', ids }, () => m.retain(ids));
        held.push(...ids);
      } else if (x < 0.68) {
        // A lookup on chains other threads cache too.
        const tokens = prompt(Math.floor(r() * 12), 1 + Math.floor(r() * 4), B);
        held.push(...logged({ kind: 'match', tokens }, () => m.allocateShared(tokens)));
      } else if (x < 0.95) {
        // A sequence: its cached prefix, fresh blocks for the rest, then caching
        // -- three calls, which other threads' calls may come between.
        const blocks = 1 + Math.floor(r() * 4);
        const tokens = prompt(Math.floor(r() * 12), blocks, B);
        const sharedIds = Array.from(logged({ kind: 'match', tokens }, () => m.allocateShared(tokens)));
        held.push(...sharedIds);
        const n = blocks - sharedIds.length;
        if (n === 0) continue;
        const fresh = logged({ kind: 'allocate', n }, () => m.allocate(n));
        if (!fresh) continue;
        held.push(...fresh);
        const ids = [...sharedIds, ...fresh];
        logged({ kind: 'cache', tokens, ids, existing: sharedIds.length }, () => m.cache(tokens, ids, sharedIds.length));
      } else if (x < 0.99) {
        const n = 1 + Math.floor(r() * 2);
        logged({ kind: 'evict', n }, () => m.evict(n));
      } else {
        // An audit of the whole manager mid-run, with every other thread held
        // off; what it saw is compared with the model at the same point.
        logged({ kind: 'check' }, () => {
          m.check();
          return { free: Array.from(m.freeIds()), evictionOrder: Array.from(m.lruOrder()) };
        });
      }
    }
    barrier(sync, threads);
  }
  const ids = held.splice(0);
  logged({ kind: 'deallocate', ids }, () => m.deallocate(ids));
  return log;
}

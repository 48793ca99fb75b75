// The operation mix of the throughput benchmark: what a scheduler thread and
// a transfer thread do to a shared manager, in small steps.

import type { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';

export const B = 16;

/** Prompt tokens sharing a 4-block prefix across threads. */
export function prompt(salt: number, i: number): Int32Array {
  const t = new Int32Array(6 * B);
  for (let k = 0; k < t.length; k++) t[k] = k < 4 * B ? k : salt * 100_000 + (i % 64) * 1000 + k;
  return t;
}

/**
 * Runs for `ms` milliseconds and returns the operations done; one operation
 * is a manager call (allocate, allocateShared, cache or deallocate).
 */
export function mix(m: BlockManagerImpl, ms: number, salt: number): number {
  const end = Date.now() + ms;
  let ops = 0;
  for (let i = 0; ; i++) {
    if ((i & 63) === 0 && Date.now() >= end) break;
    const t = prompt(salt, i);
    const shared = m.allocateShared(t);
    const fresh = m.allocate(6 - shared.length);
    ops += 2;
    if (fresh) {
      const table = new Int32Array(6);
      table.set(shared);
      table.set(fresh, shared.length);
      m.cache(t, table, shared.length);
      m.deallocate(table);
      ops += 2;
    } else {
      m.deallocate(shared);
      ops++;
    }
    const a = m.allocate(1);
    if (a) m.deallocate(a);
    ops += a ? 2 : 1;
  }
  return ops;
}

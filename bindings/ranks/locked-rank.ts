// Concurrency as one decorator around any rank (disaggregated prefill/decode,
// a KV-cache store: other threads touch the rank's managers, see
// docs/threads.md). The rank's managers live in shared memory, each with its
// own lock (core-backed managers and XTensor managers alike: anything
// Lockable); this wrapper runs every call of the rank holding all of them,
// taken in a fixed order, so a pool operation is atomic for other threads and
// a lock timeout is thrown before it has changed anything. Every method of
// the inner rank is wrapped here, by construction: a method added to a rank
// later is covered without a line here.

import type { RankManager } from './rank-manager.js';

/** A shared-memory manager with a re-entrant lock (ConcurrentBlockManagerImpl, ConcurrentXTensorBlockManagerImpl). */
export interface Lockable {
  /** Takes one level of the lock; throws, holding nothing, when the manager is gone or the wait times out. */
  lockEnter(): void;
  /** Gives one level back. */
  lockExit(): void;
}

/** Takes the locks of `managers` in order; on a timeout, lets go of those taken and throws. */
function enterAll(managers: readonly Lockable[]): void {
  let i = 0;
  try {
    for (; i < managers.length; i++) managers[i]!.lockEnter();
  } catch (e) {
    while (i > 0) managers[--i]!.lockExit();
    throw e;
  }
}

function exitAll(managers: readonly Lockable[]): void {
  for (let i = managers.length - 1; i >= 0; i--) managers[i]!.lockExit();
}

/** Every method name on `obj`'s prototype chain (below Object.prototype). */
function methodNames(obj: object): string[] {
  const names = new Set<string>();
  for (let p = Object.getPrototypeOf(obj); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const [k, d] of Object.entries(Object.getOwnPropertyDescriptors(p))) {
      if (k !== 'constructor' && typeof d.value === 'function') names.add(k);
    }
  }
  return [...names];
}

/**
 * `inner` with every method run under the locks of `managers` (all the
 * rank's shared-memory managers). Properties read through to `inner`.
 */
export function lockedRank<R extends RankManager>(inner: R, managers: readonly Lockable[]): R {
  const locked = Object.create(inner) as Record<string, unknown>;
  for (const name of methodNames(inner)) {
    // Disposing takes each manager's own lock, one by one (a manager disposed is no lock to hold).
    if (name === 'dispose' || name === 'enter' || name === 'exit') continue;
    const fn = (inner as unknown as Record<string, (...a: unknown[]) => unknown>)[name]!;
    locked[name] = (...args: unknown[]) => {
      enterAll(managers);
      try {
        return fn.apply(inner, args);
      } finally {
        exitAll(managers);
      }
    };
  }
  locked['enter'] = () => enterAll(managers);
  locked['exit'] = () => exitAll(managers);
  return locked as unknown as R;
}

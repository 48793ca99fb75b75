// A re-entrant lock in shared linear memory, for managers used by several
// threads at once. Three int32 words: state (0 free, 1 held, 2 held with
// waiters), owner thread id, and depth (only the owner touches it). Waiting
// uses Atomics.wait, so a blocked thread sleeps instead of spinning; where
// waiting is not allowed (a browser's main thread) it spins, bounded by the
// same timeout.

const STATE = 0;
const OWNER = 1;
const DEPTH = 2;

/** Bytes a lock takes in linear memory. */
export const LOCK_BYTES = 16;

/** How long a waiter sleeps between checks of the deadline. */
const WAIT_SLICE_MS = 50;

let canWait: boolean | null = null;

/** Thrown when the lock is not acquired in time: its holder is stuck or died holding it. */
export class LockTimeoutError extends Error {
  /** The thread id that held the lock when the wait gave up. */
  readonly ownerThreadId: number;

  constructor(owner: number, ms: number) {
    super(
      `kvpool: timed out after ${ms} ms waiting for the manager lock held by thread ${owner}; ` +
        `that thread is stuck or died holding it (a worker terminated inside a manager call), ` +
        `and the manager's state cannot be trusted after that`,
    );
    this.name = 'LockTimeoutError';
    this.ownerThreadId = owner;
  }
}

export class SharedLock {
  private readonly base: number;

  /**
   * `i32` views the shared memory; `ptr` is the lock's byte offset (4-aligned);
   * `self` is this thread's id (> 0).
   */
  constructor(
    private readonly i32: () => Int32Array,
    ptr: number,
    private readonly self: number,
    private readonly timeoutMs: number,
  ) {
    this.base = ptr >>> 2;
  }

  /** Takes the lock, or one more level of it when this thread holds it already. */
  enter(): void {
    const a = this.i32();
    const b = this.base;
    if (Atomics.load(a, b + OWNER) === this.self) {
      a[b + DEPTH]!++;
      return;
    }
    if (Atomics.compareExchange(a, b + STATE, 0, 1) !== 0) this.contend(a, b);
    Atomics.store(a, b + OWNER, this.self);
    a[b + DEPTH] = 1;
  }

  /** Gives one level back; the last one releases the lock and wakes a waiter. */
  exit(): void {
    const a = this.i32();
    const b = this.base;
    if (--a[b + DEPTH]! > 0) return;
    Atomics.store(a, b + OWNER, 0);
    if (Atomics.sub(a, b + STATE, 1) !== 1) {
      Atomics.store(a, b + STATE, 0);
      Atomics.notify(a, b + STATE, 1);
    }
  }

  /** Levels this thread holds (0 when another thread or nobody holds the lock). */
  depth(): number {
    const a = this.i32();
    return Atomics.load(a, this.base + OWNER) === this.self ? a[this.base + DEPTH]! : 0;
  }

  /** The thread id holding the lock, 0 when free. */
  owner(): number {
    return Atomics.load(this.i32(), this.base + OWNER);
  }

  // Drepper's mutex: mark the lock contended (2) and sleep until it is free.
  private contend(a: Int32Array, b: number): void {
    const deadline = Date.now() + this.timeoutMs;
    let c = Atomics.exchange(a, b + STATE, 2);
    while (c !== 0) {
      const left = deadline - Date.now();
      if (left <= 0) throw new LockTimeoutError(Atomics.load(a, b + OWNER), this.timeoutMs);
      if (canWait !== false) {
        try {
          Atomics.wait(a, b + STATE, 2, Math.min(left, WAIT_SLICE_MS));
          canWait = true;
        } catch (e) {
          if (canWait === true) throw e;
          canWait = false; // a browser's main thread: spin instead
        }
      }
      c = Atomics.exchange(a, b + STATE, 2);
    }
  }
}

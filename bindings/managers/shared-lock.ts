// A re-entrant lock in shared linear memory, for managers used by several
// threads at once. It lives in the manager's header slot (HDR_LOCK): two
// int32 words, the lock word (the owner's thread id, 0 when free, plus a bit
// saying someone sleeps on it) and the depth (touched by the owner only).
// The slot outlives the manager, so a thread holding a stale handle can still
// take the lock safely; `enter` then finds the header's generation changed
// and lets go with an error instead of running on someone else's state.
// An uncontended enter/exit is one compare-exchange and one exchange (and a
// load of the generation). Waiting spins briefly, then sleeps in Atomics.wait; where
// waiting is not allowed (a browser's main thread) it keeps spinning, bounded
// by the same timeout.

import { HDR_GEN, HDR_LOCK } from '../core/abi.js';

const WORD = 0;
const DEPTH = 1;
/** Set in the lock word while some thread sleeps on it. */
const CONTENDED = 0x40000000;
const OWNER_MASK = CONTENDED - 1;

/** Tries before a waiter goes to sleep (operations hold the lock for well under a microsecond). */
const SPIN = 64;

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
  private readonly genAt: number;

  /**
   * `i32` views the shared memory; `header` is the manager's header (its
   * slot), `gen` the generation this handle was made for; `self` is this
   * thread's id (1 .. 2^30 - 1).
   */
  constructor(
    private readonly i32: () => Int32Array,
    header: number,
    private readonly gen: number,
    private readonly self: number,
    private readonly timeoutMs: number,
  ) {
    this.base = (header + HDR_LOCK) >>> 2;
    this.genAt = (header + HDR_GEN) >>> 2;
  }

  /**
   * Takes the lock, or one more level of it when this thread holds it
   * already; throws (holding nothing) when the manager was disposed meanwhile.
   */
  enter(): void {
    const a = this.i32();
    const b = this.base;
    const c = Atomics.compareExchange(a, b + WORD, 0, this.self);
    if (c === 0) {
      a[b + DEPTH] = 1;
    } else if ((c & OWNER_MASK) === this.self) {
      a[b + DEPTH]!++;
    } else {
      this.contend(a, b);
      a[b + DEPTH] = 1;
    }
    if (Atomics.load(a, this.genAt) >>> 0 !== this.gen) {
      this.exit();
      throw new Error('kvpool: this shared manager was disposed (by the thread that created it); it cannot be used any more');
    }
  }

  /** Gives one level back; the last one releases the lock and wakes a sleeper. */
  exit(): void {
    const a = this.i32();
    const b = this.base;
    // An exit without its enter would take a level from, or free, another thread's hold.
    if ((Atomics.load(a, b + WORD) & OWNER_MASK) !== this.self) throw new Error('kvpool: the lock was given back by a thread that does not hold it (an exit without its enter)');
    if (--a[b + DEPTH]! > 0) return;
    if ((Atomics.exchange(a, b + WORD, 0) & CONTENDED) !== 0) Atomics.notify(a, b + WORD, 1);
  }

  /** Levels this thread holds (0 when another thread or nobody holds the lock). */
  depth(): number {
    const a = this.i32();
    return (Atomics.load(a, this.base + WORD) & OWNER_MASK) === this.self ? a[this.base + DEPTH]! : 0;
  }

  private contend(a: Int32Array, b: number): void {
    const w = b + WORD;
    for (let i = 0; i < SPIN; i++) {
      if (Atomics.load(a, w) === 0 && Atomics.compareExchange(a, w, 0, this.self) === 0) return;
    }
    // From here on the lock is taken marked contended: other sleepers may be
    // left, and the exit that finds the mark wakes the next one.
    const deadline = Date.now() + this.timeoutMs;
    for (;;) {
      let c = Atomics.load(a, w);
      if (c === 0) {
        c = Atomics.compareExchange(a, w, 0, this.self | CONTENDED);
        if (c === 0) return;
      }
      if ((c & CONTENDED) === 0 && Atomics.compareExchange(a, w, c, c | CONTENDED) !== c) continue;
      const left = deadline - Date.now();
      if (left <= 0) throw new LockTimeoutError(c & OWNER_MASK, this.timeoutMs);
      if (canWait !== false) {
        try {
          Atomics.wait(a, w, c | CONTENDED, Math.min(left, WAIT_SLICE_MS));
          canWait = true;
        } catch (e) {
          if (canWait === true) throw e;
          canWait = false; // a browser's main thread: spin instead
        }
      }
    }
  }
}

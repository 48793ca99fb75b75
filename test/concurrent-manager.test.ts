// ConcurrentBlockManagerImpl over the shared-memory core: several threads on
// one manager, re-entrancy of the lock, a worker dying with the lock held,
// and handing managers over through share()/attach().

import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { BlockManagerImpl } from '../bindings/managers/block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ConcurrentBlockManagerImpl, type SharedManagerDescriptor } from '../bindings/managers/concurrent-block-manager-impl.js';
import { LockTimeoutError } from '../bindings/managers/shared-lock.js';
import { sharedCore, type SharedCoreExports } from '../bindings/core/shared-core.js';
import { hashBlocks } from '../bindings/hash.js';
import { hammer, prompt, type Tally } from './support/concurrent-hammer.js';

const BOOT = new URL('./support/ts-worker.mjs', import.meta.url);
const ENTRY = new URL('./support/concurrent-worker.ts', import.meta.url).href;

function spawn(data: object): Worker {
  return new Worker(BOOT, { workerData: { ...data, entry: ENTRY } });
}

function nextMessage<T>(w: Worker): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMsg = (m: T) => {
      w.off('error', reject);
      resolve(m);
    };
    w.once('message', onMsg);
    w.once('error', reject);
  });
}

describe('ConcurrentBlockManagerImpl across threads', () => {
  it('four workers and the main thread hammer one manager: state stays whole, counters add up', async () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 48, blockSize: 2 });
    const desc = m.share();
    const owners = new SharedArrayBuffer(48 * 4);
    const start = new SharedArrayBuffer(8);
    const OPS = 1500;
    const sync = new SharedArrayBuffer(3 * 4);
    new Int32Array(sync)[2] = 5; // threads meeting halfway: 4 workers and this one
    const workers = [1, 2, 3, 4].map((i) => spawn({ mode: 'hammer', desc, ops: OPS, seed: 1000 + i, tag: i + 1, owners, start, sync }));
    try {
      const ready = await Promise.all(workers.map((w) => nextMessage<{ threadId: number }>(w)));
      const ids = new Set([m.threadId, ...ready.map((r) => r.threadId)]);
      expect(ids.size).toBe(5); // every thread has its own lock identity
      const done = workers.map((w) => nextMessage<{ tally: Tally }>(w));
      const s = new Int32Array(start);
      Atomics.store(s, 0, 1);
      Atomics.notify(s, 0);
      const mine = hammer(m, OPS, 1000, new Int32Array(owners), 1, new Int32Array(sync));
      const tallies = [mine, ...(await Promise.all(done)).map((d) => d.tally)];
      const sum = (k: keyof Tally) => tallies.reduce((a, t) => a + t[k], 0);

      m.check();
      expect(sum('heldTwice')).toBe(0);
      expect(sum('notOwned')).toBe(0);
      // Every thread let go of everything: nothing used, every id free or cached.
      expect(m.numUsedBlocks()).toBe(0);
      expect(m.numFreeBlocks() + m.numBlocksInPrefixCache()).toBe(47);
      const holders = m.holderCounts();
      expect(holders[0]).toBe(1);
      expect([...holders.subarray(1)].every((h) => h === 0)).toBe(true);
      const free = [...m.freeIds()];
      expect(new Set(free).size).toBe(free.length);
      const st = m.stats();
      expect(st.blocksAllocated).toBe(sum('idsAllocated'));
      expect(st.allocationFailures).toBe(sum('allocFailures'));
      expect(st.matchCalls).toBe(sum('matchCalls'));
      expect(st.blocksQueried).toBe(sum('blocksQueried'));
      expect(st.blocksHit).toBe(sum('blocksHit'));
      expect(st.blocksInserted).toBe(sum('blocksInserted'));
      // Evictions: the explicit ones plus those allocations made; every
      // inserted entry is either still cached or was evicted.
      expect(st.blocksEvicted).toBeGreaterThanOrEqual(sum('evictedExplicitly'));
      expect(st.blocksInserted).toBe(st.numBlocksInPrefixCache + st.blocksEvicted);
      // The threads really interleaved: all five ran their operations, and
      // every thread's span of the shared operation clock overlaps every
      // other's (a run where one thread did everything, or where they ran one
      // after another, fails this); and they met on shared chains.
      expect(tallies.every((t) => t.firstTick >= 0 && t.lastTick - t.firstTick >= OPS - 1)).toBe(true);
      expect(Math.max(...tallies.map((t) => t.firstTick))).toBeLessThan(Math.min(...tallies.map((t) => t.lastTick)));
      expect(sum('blocksHit')).toBeGreaterThan(0);
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
      m.dispose();
    }
  });

  it('threads hashing at once for managers of different seeds each key blocks with their own derived secret', async () => {
    // Blocks of 64 tokens take XXH3's long path, which derives a secret from
    // the seed: per-thread state in the shared build. Two managers, two
    // seeds, hammered at the same time; afterwards every cached block must
    // carry exactly the key its tokens have under its manager's seed. (A
    // shared secret fails this every run; a shared hashing scratch would be
    // a race of a few nanoseconds, which this catches only by luck.)
    const B = 64;
    const x = new ConcurrentBlockManagerImpl({ numBlocks: 40, blockSize: B, seed: 5 });
    const y = new ConcurrentBlockManagerImpl({ numBlocks: 40, blockSize: B, seed: 6n << 40n });
    const owners = new SharedArrayBuffer(40 * 4);
    const owners2 = new SharedArrayBuffer(40 * 4);
    const start = new SharedArrayBuffer(8);
    const workers = [
      spawn({ mode: 'hammer', desc: x.share(), ops: 800, seed: 7, tag: 2, owners, start }),
      spawn({ mode: 'hammer', desc: y.share(), ops: 800, seed: 8, tag: 2, owners: owners2, start }),
      spawn({ mode: 'hammer', desc: y.share(), ops: 800, seed: 9, tag: 3, owners: owners2, start }),
    ];
    try {
      await Promise.all(workers.map((w) => nextMessage(w)));
      const done = Promise.all(workers.map((w) => nextMessage<{ tally: Tally }>(w)));
      Atomics.store(new Int32Array(start), 0, 1);
      Atomics.notify(new Int32Array(start), 0);
      const mine = hammer(x, 800, 6, new Int32Array(owners), 1);
      const tallies = [mine, ...(await done).map((d) => d.tally)];
      expect(tallies.reduce((a, t) => a + t.heldTwice, 0)).toBe(0);
      expect(tallies.reduce((a, t) => a + t.notOwned, 0)).toBe(0);
      const e = sharedCore().ex;
      for (const [m, seed] of [[x, 5], [y, 6n << 40n]] as const) {
        m.check();
        const keys = new Set<string>();
        for (let p = 0; p < 12; p++) {
          const h = hashBlocks(prompt(p, 4, B), B, seed);
          for (let b = 0; b < 4; b++) keys.add(Buffer.from(h.subarray(b * 16, b * 16 + 16)).toString('hex'));
        }
        const cached = m.lruOrder();
        expect(cached.length).toBeGreaterThan(0);
        const out = e.alloc(16);
        const v = sharedCore().views();
        for (const id of cached) {
          expect(e.mgr_block_hash(m.ptr, id, out)).toBe(1);
          expect(keys.has(Buffer.from(v.u8.subarray(out, out + 16)).toString('hex'))).toBe(true);
        }
        e.release(out);
      }
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
      x.dispose();
      y.dispose();
    }
  });

  it('a worker that dies holding the lock gives the others a clear error, not a hang', async () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2, lockTimeoutMs: 300 });
    const start = new SharedArrayBuffer(8);
    const w = spawn({ mode: 'die-holding', desc: m.share(), ops: 0, seed: 0, tag: 0, owners: start, start });
    const code = await new Promise<number>((resolve) => w.once('exit', resolve));
    expect(code).toBe(3);
    const owner = Atomics.load(new Int32Array(start), 1);
    expect(owner).toBeGreaterThan(0);
    expect(owner).not.toBe(m.threadId);
    // Another thread holds the lock: this one holds no level of it.
    expect(m.lockDepth()).toBe(0);
    let err: unknown;
    try {
      m.allocate(1);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect((err as LockTimeoutError).ownerThreadId).toBe(owner);
    expect((err as Error).message).toMatch(
      new RegExp(
        `^kvpool: timed out after 300 ms waiting for the manager lock held by thread ${owner}; that thread is stuck or died holding it ` +
          `\\(a worker terminated inside a manager call\\), and the manager's state cannot be trusted after that$`,
      ),
    );
    // Where Atomics.wait is not allowed (a browser's main thread), the waiter
    // spins instead, and gives up the same way.
    const w2 = spawn({ mode: 'no-wait', desc: m.share(), ops: 0, seed: 0, tag: 0, owners: null, start: null });
    try {
      const r = await nextMessage<{ name: string; owner: number; waitCalls: number }>(w2);
      expect(r).toEqual({ name: 'LockTimeoutError', owner, waitCalls: 1 });
    } finally {
      await w2.terminate();
    }
  });
});

describe('ConcurrentBlockManagerImpl handed back and forth', () => {
  it('a manager a worker creates (growing the shared memory) is usable here', async () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const before = m.share().memory.buffer.byteLength;
    const w = spawn({ mode: 'create-big', desc: m.share(), ops: 0, seed: 0, tag: 0, owners: new SharedArrayBuffer(8), start: new SharedArrayBuffer(8) });
    try {
      const { desc, bytes } = await nextMessage<{ desc: SharedManagerDescriptor; bytes: number }>(w);
      expect(bytes).toBeGreaterThan(before); // the worker grew the memory this thread runs on
      const big = ConcurrentBlockManagerImpl.attach(desc); // same memory, a new Memory object after the round trip
      expect(big.numUsedBlocks()).toBe(5);
      const ids = big.allocate(99_990)!;
      expect(ids.length).toBe(99_990);
      expect(big.numFreeBlocks()).toBe(4);
      big.deallocate(ids);
      big.check();
      // The first manager is untouched.
      expect(m.numFreeBlocks()).toBe(7);
      m.check();
    } finally {
      await w.terminate();
      m.dispose();
    }
  });

  it('a thread with no descriptor loads the shared core from its bytes (the browser path) and gets a memory of its own; the plain core offered first is refused and kept nowhere', async () => {
    const bytes = readFileSync(new URL('../build/kvpool-shared.wasm', import.meta.url));
    const plain = readFileSync(new URL('../build/kvpool.wasm', import.meta.url));
    const w = spawn({ mode: 'load-bytes', bytes, plain, desc: null, ops: 0, seed: 0, tag: 0, owners: null, start: null });
    try {
      const r = await nextMessage<{ hits: number[]; free: number; threadId: number; wrongCore: string }>(w);
      expect(r.wrongCore).toBe('TypeError: kvpool: source is not the shared-memory core (build/kvpool-shared.wasm); it is the plain core (build/kvpool.wasm)');
      expect(r).toMatchObject({ hits: [1, 2], free: 3, threadId: 1 }); // first instance over its new memory
      expect((r as { refused?: string }).refused).toMatch(/1 shared-memory manager\(s\) of this thread are still open; dispose them first/);
    } finally {
      await w.terminate();
    }
  });

  it('a worker that is done gives its regions of the shared memory back', async () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const e = sharedCore().ex;
    const inUse = () => (e.heapTop() >>> 0) - e.heapFreeBytes();
    m.deallocate(m.allocate(1)!); // this thread's id staging exists before the count
    const before = inUse();
    const w = spawn({ mode: 'attach-release', desc: m.share(), ops: 0, seed: 0, tag: 0, owners: null, start: null });
    try {
      await nextMessage(w);
      // Its instance's scratch and its staging areas (64 KiB of tokens
      // among them) went back: the bytes in use are what they were.
      expect(inUse()).toBe(before);
      expect(m.numUsedBlocks()).toBe(0);
      expect(m.numBlocksInPrefixCache()).toBe(2);
      m.check();
    } finally {
      await w.terminate();
      m.dispose();
    }
  });

  it('a descriptor of another shared memory is refused in a thread that runs one', () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const d = m.share();
    const other = new WebAssembly.Memory({ initial: d.memory.buffer.byteLength >>> 16, maximum: 16384, shared: true });
    expect(() => ConcurrentBlockManagerImpl.attach({ ...d, memory: other })).toThrow(/already runs managers over another shared memory/);
    m.check();
    m.dispose();
  });
});

describe('ConcurrentBlockManagerImpl on one thread', () => {
  it('a region lock left taken (a thread killed while creating a manager) gives a clear error, not a hang', () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    m.deallocate(m.allocate(2)!); // this thread's id staging area exists from here on
    const e = sharedCore().ex as SharedCoreExports;
    const word = e.heapState() >>> 2;
    const i32 = sharedCore().views().i32;
    expect(Atomics.compareExchange(i32, word, 0, 1)).toBe(0); // as if a dead thread held it
    try {
      expect(() => new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 })).toThrow(
        /gave up waiting for the shared core's region lock .* a thread died in the middle of such a call/,
      );
      // Calls that take no region still work.
      expect(m.allocate(2)).toEqual(Int32Array.from([2, 1]));
    } finally {
      Atomics.store(i32, word, 0);
    }
    const again = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    again.check();
    again.dispose();
    m.check();
    m.dispose();
  });

  it('an allocation that must evict re-enters the lock on the same thread instead of deadlocking', () => {
    const depths: number[] = [];
    class Probe extends ConcurrentBlockManagerImpl {
      override evict(n: number): number {
        return this.withLock(() => {
          depths.push(this.lockDepth());
          return super.evict(n); // takes a third level
        });
      }
    }
    const m = new Probe({ numBlocks: 5, blockSize: 1 });
    const a = m.allocate(4)!;
    expect(m.cache([7, 8, 9, 10], a)).toBe(4);
    m.deallocate(a); // all four cached, unheld: evictable
    expect(m.numFreeBlocks()).toBe(0);
    const b = m.allocate(2); // must evict two entries while allocate holds the lock
    // Eviction takes chain tails first: 4 then 3 go back to the free stack.
    expect(b && [...b]).toEqual([3, 4]);
    expect(depths).toEqual([2]); // evict ran inside allocate's hold: the lock was re-entered
    expect(m.stats().blocksEvicted).toBe(2);
    expect(m.lockDepth()).toBe(0);
    m.check();
    m.dispose();
  });

  it('a new instance over the live memory (a thread starting) leaves every manager as it was', () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 12, blockSize: 64 });
    const t = Array.from({ length: 4 * 64 }, (_, i) => i * 7);
    const a = m.allocate(4)!;
    m.cache(t, a); // hashes on XXH3's long path: the derived secret is in use
    const before = { stats: m.stats(), lru: [...m.lruOrder()], free: [...m.freeIds()], holders: [...m.holderCounts()] };
    const { memory, module } = m.share();
    const other = new WebAssembly.Instance(module, { env: { memory } }); // re-applies its data segments
    expect((other.exports as unknown as SharedCoreExports).nextThreadId()).toBeGreaterThan(m.threadId);
    expect({ stats: m.stats(), lru: [...m.lruOrder()], free: [...m.freeIds()], holders: [...m.holderCounts()] }).toEqual(before);
    expect([...m.allocateShared(t)]).toEqual([...a]); // this thread's hashing is intact too
    m.check();
    m.dispose();
  });

  it('withLock makes a sequence of calls atomic and nests', () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 6, blockSize: 2 });
    const seen = m.withLock(() => {
      const a = m.allocate(2)!;
      const inner = m.withLock(() => m.lockDepth());
      m.deallocate(a);
      return [m.lockDepth(), inner, a.length];
    });
    expect(seen).toEqual([1, 2, 2]);
    expect(m.lockDepth()).toBe(0);
    // A throw inside gives every level back.
    expect(() => m.withLock(() => m.deallocate([0]))).toThrow(RangeError);
    expect(m.lockDepth()).toBe(0);
    // An exit without its enter is refused: it would free a hold of another thread.
    expect(() => m.lockExit()).toThrow(/^kvpool: the lock was given back by a thread that does not hold it/);
    expect(m.lockDepth()).toBe(0);
    expect(m.allocate(1)).not.toBeNull();
    m.check();
    m.dispose();
  });

  it('attach() on the same thread sees the same state; share() is structured-clonable', () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 10, blockSize: 2, seed: 77n });
    const a = m.allocate(3)!;
    m.cache([1, 2, 3, 4, 5, 6], a);
    const desc = structuredClone(m.share());
    const m2 = ConcurrentBlockManagerImpl.attach(desc);
    expect(m2.numFreeBlocks()).toBe(6);
    expect([...m2.allocateShared([1, 2, 3, 4])]).toEqual([a[0], a[1]]);
    expect(m.refCount(a[0]!)).toBe(3);
    m2.dispose(); // an attached manager only detaches
    expect(() => m2.allocate(1)).toThrow(/disposed/);
    expect(m.numUsedBlocks()).toBe(3);
    m.check();
    m.dispose();
  });

  it('behaves like BlockManagerImpl on the same calls', () => {
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 9, blockSize: 2 });
    const p = new BlockManagerImpl({ numBlocks: 9, blockSize: 2 });
    for (const x of [m, p]) {
      const a = x.allocate(3)!;
      x.cache([5, 6, 7, 8, 9, 10, 11], a);
      x.deallocate(a);
      x.allocate(6);
    }
    expect(m.stats()).toEqual(p.stats());
    expect([...m.freeIds()]).toEqual([...p.freeIds()]);
    expect([...m.lruOrder()]).toEqual([...p.lruOrder()]);
    m.dispose();
    p.dispose();
  });

  it('validates options and descriptors before changing anything', () => {
    expect(() => new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2, lockTimeoutMs: 0 })).toThrow(
      /options.lockTimeoutMs must be >= 1, got 0/,
    );
    expect(() => new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2, bogus: 1 } as never)).toThrow(
      new TypeError('options: unknown option "bogus" (known: numBlocks, blockSize, enablePrefixCache, seed, evictionPolicy, lockTimeoutMs)'),
    );
    expect(() => ConcurrentBlockManagerImpl.attach({} as never)).toThrow(TypeError);
    const m = new ConcurrentBlockManagerImpl({ numBlocks: 8, blockSize: 2 });
    const d = m.share();
    expect(() => ConcurrentBlockManagerImpl.attach({ ...d, ptr: 2 ** 31 })).toThrow(/does not name a live manager of this shared memory/);
    expect(() => ConcurrentBlockManagerImpl.attach({ ...d, memory: {} as never })).toThrow(/descriptor.memory must be a WebAssembly.Memory/);
    const before = m.stats();
    expect(() => m.allocate(-1)).toThrow(RangeError);
    expect(() => m.deallocate([99])).toThrow(/ids\[0\] = 99 is out of range/);
    expect(m.stats()).toEqual(before);
    expect(m.lockDepth()).toBe(0);
    m.check();
    m.dispose();
  });
});

describe('BlockManagerPool with enableDisaggPd / enableKvcacheStore', () => {
  it('gives each rank a ConcurrentBlockManagerImpl another thread can attach to', () => {
    for (const flag of ['enableDisaggPd', 'enableKvcacheStore'] as const) {
      const pool = new BlockManagerPool({ numBlocks: 12, blockSize: 2, dpSize: 2, [flag]: true });
      expect(pool.managers.every((m) => m instanceof ConcurrentBlockManagerImpl)).toBe(true);
      const s = new Sequence([1, 2, 3, 4, 5]);
      expect(pool.allocate(s)).toBe(true);
      const r = s.dpRank;
      const view = ConcurrentBlockManagerImpl.attach((pool.managers[r] as ConcurrentBlockManagerImpl).share());
      expect(view.numUsedBlocks()).toBe(3);
      pool.deallocate(s);
      expect(view.numUsedBlocks()).toBe(0);
      expect(view.numFreeBlocks()).toBe(11); // nothing computed yet, so nothing cached
      pool.check();
      pool.dispose();
    }
    const plain = new BlockManagerPool({ numBlocks: 12, blockSize: 2 });
    expect(plain.managers[0]).not.toBeInstanceOf(ConcurrentBlockManagerImpl);
    plain.dispose();
    expect(() => new BlockManagerPool({ numBlocks: 12, blockSize: 2, enableDisaggPd: 1 as never })).toThrow(
      /options.enableDisaggPd must be a boolean, got 1/,
    );
  });
});

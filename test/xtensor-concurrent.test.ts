// ConcurrentXTensorBlockManagerImpl: the XTensor manager whose state is one
// SharedArrayBuffer. Random operations against the reference model (through
// two handles of one state), several threads allocating and freeing at once,
// pools with enableXtensor + enableDisaggPd against plain XTensor pools,
// stale and forged descriptors, use after dispose, a thread dying with the
// lock held, and the bounded page-event ring.

import fc from 'fast-check';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { LockTimeoutError } from '../bindings/managers/shared-lock.js';
import { XTensorBlockManagerImpl, type PageEvent } from '../bindings/managers/xtensor-block-manager-impl.js';
import {
  ConcurrentXTensorBlockManagerImpl, type SharedXTensorDescriptor,
} from '../bindings/managers/xtensor-concurrent-block-manager-impl.js';
import { BlockManagerPool } from '../bindings/pool/block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ModelXTensor } from '../model/xtensor-block-manager-impl.js';
import { hammer, sumTallies, type XTally } from './support/xtensor-hammer.js';

const BOOT = new URL('./support/ts-worker.mjs', import.meta.url);
const ENTRY = new URL('./support/xtensor-worker.ts', import.meta.url).href;

function spawn(data: object): Worker {
  return new Worker(BOOT, { workerData: { ops: 0, seed: 0, tag: 0, owners: new SharedArrayBuffer(4), start: new SharedArrayBuffer(16), ...data, entry: ENTRY } });
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

function release(start: SharedArrayBuffer): void {
  const s = new Int32Array(start);
  Atomics.store(s, 0, 1);
  Atomics.notify(s, 0);
}

function outcome<T>(f: () => T): T | 'threw' {
  try {
    return f();
  } catch {
    return 'threw';
  }
}

// ---- the shared form against the reference model ----

type Op =
  | { kind: 'allocate'; n: number }
  | { kind: 'free'; pick: number; count: number }
  | { kind: 'retain'; pick: number }
  | { kind: 'reserve'; k: number }
  | { kind: 'freeReserved' }
  | { kind: 'trim' }
  | { kind: 'sleep' }
  | { kind: 'wakeup' };

const opArb: fc.Arbitrary<Op & { via: boolean }> = fc
  .tuple(
    fc.oneof(
      { weight: 5, arbitrary: fc.record({ kind: fc.constant('allocate' as const), n: fc.nat({ max: 8 }) }) },
      { weight: 5, arbitrary: fc.record({ kind: fc.constant('free' as const), pick: fc.nat(), count: fc.integer({ min: 1, max: 4 }) }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('retain' as const), pick: fc.nat() }) },
      { weight: 1, arbitrary: fc.record({ kind: fc.constant('reserve' as const), k: fc.nat({ max: 5 }) }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'freeReserved' as const }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'trim' as const }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'sleep' as const }) },
      { weight: 1, arbitrary: fc.constant({ kind: 'wakeup' as const }) },
    ),
    fc.boolean(),
  )
  .map(([op, via]) => ({ ...op, via }));

const configArb = fc
  .record({
    numBlocks: fc.integer({ min: 2, max: 30 }),
    pageSize: fc.integer({ min: 4, max: 20 }),
    blockFrac: fc.double({ min: 0.05, max: 1, noNaN: true }),
    numLayers: fc.integer({ min: 1, max: 2 }),
    physPages: fc.option(fc.integer({ min: 0, max: 10 }), { nil: undefined }),
    min: fc.nat({ max: 3 }),
    extra: fc.nat({ max: 3 }),
  })
  .map((c) => ({
    numBlocks: c.numBlocks,
    blockSize: 4,
    pageSize: c.pageSize,
    blockBytes: Math.max(1, Math.floor(c.pageSize * c.blockFrac)),
    numLayers: c.numLayers,
    ...(c.physPages === undefined ? {} : { numPhysicalPages: (c.physPages + 1) * 2 * c.numLayers }),
    minReservedPages: c.min,
    maxReservedPages: c.min + c.extra,
  }));

/** What the runs exercised, so the test fails if the generator stops reaching these paths. */
const seen = { nulls: 0, maps: 0, unmaps: 0, refusals: 0, viaAttached: 0, reserved: 0 };

function runShared(ops: Array<Op & { via: boolean }>, cfg: typeof configArb extends fc.Arbitrary<infer T> ? T : never): void {
  const x = new ConcurrentXTensorBlockManagerImpl(cfg);
  const y = ConcurrentXTensorBlockManagerImpl.attach(x.share()); // a second handle of the same state, in this thread
  const plain = new XTensorBlockManagerImpl(cfg);
  const m = new ModelXTensor(cfg);
  try {
    expect(outcome(() => x.reservePaddingBlocks())).toEqual(outcome(() => m.reservePaddingBlocks()));
    outcome(() => plain.reservePaddingBlocks());
    const held: number[] = [];
    const compare = () => {
      x.check();
      y.check();
      expect([x.lockDepth(), y.lockDepth()]).toEqual([0, 0]);
      const ev = (Math.random() < 0.5 ? x : y).takeEvents();
      for (const e of ev) seen[e.type === 'map' ? 'maps' : 'unmaps']++;
      expect(ev).toEqual(m.takeEvents());
      expect(plain.takeEvents()).toEqual(ev);
      expect(x.pageStates()).toEqual(m.pageStates());
      expect(y.pageStates()).toEqual(m.pageStates());
      expect([x.numFreeBlocks(), y.numUsedBlocks()]).toEqual([m.numFreeBlocks(), m.numUsedBlocks()]);
      expect(y.stats()).toEqual(plain.stats());
      expect([...x.freeIds()]).toEqual([...plain.freeIds()]);
      expect([...y.holderCounts()]).toEqual([...plain.holderCounts()]);
    };
    compare();
    for (const op of ops) {
      const h = op.via ? y : x;
      if (op.via) seen.viaAttached++;
      switch (op.kind) {
        case 'allocate': {
          const a = outcome(() => h.allocate(op.n));
          expect(a === 'threw' || a === null ? a : [...a]).toEqual(outcome(() => m.allocate(op.n)));
          outcome(() => plain.allocate(op.n));
          if (a === null) seen.nulls++;
          if (a === 'threw') seen.refusals++;
          if (a !== 'threw' && a !== null) held.push(...a);
          break;
        }
        case 'free': {
          const ids = held.splice(op.pick % Math.max(1, held.length), op.count);
          h.deallocate(ids);
          m.deallocate(ids);
          plain.deallocate(ids);
          break;
        }
        case 'retain':
          if (held.length > 0) {
            const id = held[op.pick % held.length]!;
            h.retain([id]);
            m.retain([id]);
            plain.retain([id]);
            held.push(id);
          }
          break;
        case 'reserve': {
          const r = outcome(() => h.tryToReserve(op.k));
          expect(r).toBe(outcome(() => m.tryToReserve(op.k)));
          outcome(() => plain.tryToReserve(op.k));
          if (r === true && op.k > 0) seen.reserved++;
          break;
        }
        default:
          h[op.kind]();
          m[op.kind]();
          plain[op.kind]();
      }
      compare();
    }
    x.deallocate(held);
    m.deallocate(held);
    plain.deallocate(held);
    y.freeReserved();
    m.freeReserved();
    plain.freeReserved();
    compare();
    expect(x.numUsedBlocks()).toBe(1); // the padding block
  } finally {
    y.dispose();
    x.dispose();
  }
}

describe('ConcurrentXTensorBlockManagerImpl vs the reference model', () => {
  it('agrees on random operations made through either of two handles of one state, with check() after each', () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 60, size: 'max' }), configArb, (ops, cfg) => runShared(ops, cfg)),
      { numRuns: 150 },
    );
    for (const [k, v] of Object.entries(seen)) expect(v, k).toBeGreaterThan(0);
  });

  it('validates its options like the plain manager, lockTimeoutMs included', () => {
    const o = { numBlocks: 10, blockSize: 4, pageSize: 10, blockBytes: 3, numLayers: 1 };
    expect(() => new ConcurrentXTensorBlockManagerImpl({ ...o, blockBytes: 11 })).toThrow(/options.blockBytes = 11 is larger than options.pageSize = 10/);
    expect(() => new ConcurrentXTensorBlockManagerImpl({ ...o, lockTimeoutMs: 0 })).toThrow(/options.lockTimeoutMs must be >= 1, got 0/);
    expect(() => new ConcurrentXTensorBlockManagerImpl({ ...o, pages: 3 } as never)).toThrow(/unknown option "pages"/);
    const m = new ConcurrentXTensorBlockManagerImpl({ ...o, lockTimeoutMs: 50 });
    expect(m.lockTimeoutMs).toBe(50);
    expect(m.share().lockTimeoutMs).toBe(50);
    m.dispose();
  });
});

// ---- threads ----

const THREAD_OPTS = {
  numBlocks: 64, blockSize: 2, pageSize: 12, blockBytes: 4, numLayers: 1, // 3 blocks a page, 21 pages
  numPhysicalPages: 2 * 16, minReservedPages: 1, maxReservedPages: 2, maxPendingEvents: 1_000_000,
};

describe('ConcurrentXTensorBlockManagerImpl across threads', () => {
  it('three workers and the main thread allocate and free on one manager: state stays whole, counters and events add up', async () => {
    const m = new ConcurrentXTensorBlockManagerImpl(THREAD_OPTS);
    m.reservePaddingBlocks();
    const desc = m.share();
    const owners = new SharedArrayBuffer(64 * 4);
    const start = new SharedArrayBuffer(16);
    const OPS = 1500;
    const workers = [1, 2, 3].map((i) => spawn({ mode: 'hammer', desc, ops: OPS, seed: 500 + i, tag: i + 1, owners, start }));
    try {
      const ready = await Promise.all(workers.map((w) => nextMessage<{ threadId: number }>(w)));
      expect(new Set([m.threadId, ...ready.map((r) => r.threadId)]).size).toBe(4); // one lock identity per thread
      const done = workers.map((w) => nextMessage<{ tally: XTally }>(w));
      release(start);
      const mine = hammer(m, OPS, 500, new Int32Array(owners), 1);
      const s = sumTallies([mine, ...(await Promise.all(done)).map((d) => d.tally)]);

      m.check();
      expect(s.heldTwice).toBe(0);
      expect(s.allocateCalls).toBeGreaterThan(0);
      expect(s.allocFailures).toBeGreaterThan(0); // the pages ran out at times
      expect(s.naps + s.reserves).toBeGreaterThan(0);
      // Every thread let go of everything: only the padding block is used.
      expect(m.numUsedBlocks()).toBe(1);
      expect([...m.holderCounts()].every((h) => h === 0)).toBe(true);
      const st = m.stats();
      expect(st.blocksAllocated).toBe(s.idsAllocated);
      expect(st.allocationFailures).toBe(s.allocFailures);
      // Each event went to exactly one thread: what was mapped minus what was
      // unmapped is what is mapped now.
      const rest = m.takeEvents();
      const maps = s.maps + rest.filter((e) => e.type === 'map').length;
      const unmaps = s.unmaps + rest.filter((e) => e.type === 'unmap').length;
      const pages = m.pageStates();
      expect(maps - unmaps).toBe(pages.reserved.length + pages.allocated.length);
      expect(s.unmaps).toBeGreaterThan(0);
      expect(m.eventsLost).toBe(0);
    } finally {
      await Promise.all(workers.map((w) => w.terminate()));
      m.dispose();
    }
  });

  it('a worker attaching reads the shape from the state and sees what this thread did', async () => {
    const m = new ConcurrentXTensorBlockManagerImpl({ ...THREAD_OPTS, dpRank: 3, lockTimeoutMs: 700 });
    m.reservePaddingBlocks();
    const mine = [...m.allocate(4)!];
    const pages = m.pageStates();
    const w = spawn({ mode: 'look', desc: m.share() });
    try {
      const r = await nextMessage<{ seen: { threadId: number; shape: number[]; used: number; pages: object }; ids: number[]; disposed: string }>(w);
      expect(r.seen.threadId).not.toBe(m.threadId);
      expect(r.seen.shape).toEqual([64, 2, 12, 4, 1, 3, 700]);
      expect(r.seen.used).toBe(5);
      expect(r.seen.pages).toEqual(pages);
      expect(r.ids).toEqual([5, 6]); // after this thread's 1..4: the last id of page 1, then page 2's first
      expect(r.disposed).toMatch(/this ConcurrentXTensorBlockManagerImpl was disposed/);
      // The worker's handle is gone; the manager is not, and holds its two ids.
      expect([m.refCount(5), m.refCount(6)]).toEqual([1, 1]);
      m.deallocate([...mine, ...r.ids]);
      m.check();
      expect(m.numUsedBlocks()).toBe(1);
    } finally {
      await w.terminate();
      m.dispose();
    }
  });

  it('a worker that dies holding the lock gives the others a LockTimeoutError, and the pool changes nothing', async () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: 4, enableXtensor: true, numLayers: 1, slotSize: 2, pageSize: 12, enableDisaggPd: true, lockTimeoutMs: 300 });
    const m = p.managers[0] as ConcurrentXTensorBlockManagerImpl;
    const start = new SharedArrayBuffer(16);
    const w = spawn({ mode: 'die-holding', desc: m.share(), start });
    expect(await new Promise<number>((res) => w.once('exit', res))).toBe(3);
    const owner = Atomics.load(new Int32Array(start), 1);
    expect(owner).not.toBe(m.threadId);
    let err: unknown;
    try {
      m.numFreeBlocks();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect((err as LockTimeoutError).ownerThreadId).toBe(owner);
    const s = new Sequence([1, 2, 3, 4, 5, 6]);
    expect(() => p.allocate(s)).toThrow(LockTimeoutError);
    expect([s.dpRank, s.singleBlockId, s.numBlocks]).toEqual([-1, -1, 0]);
    expect(p.liveSequences().size).toBe(0);
    expect(m.lockDepth()).toBe(0);
    p.dispose();
  });
});

// ---- pools ----

type PoolOp =
  | { kind: 'new'; len: number }
  | { kind: 'allocate' | 'tryAllocate' | 'allocateShared' | 'publish' | 'finish' | 'finishWithoutCache'; pick: number }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'fork'; pick: number; swap: boolean }
  | { kind: 'adopt'; pick: number; from: number; swap: boolean }
  | { kind: 'raw'; tokens: number };

const poolOpArb: fc.Arbitrary<PoolOp> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('new' as const), len: fc.nat({ max: 24 }) }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constantFrom('allocate' as const, 'finish' as const), pick: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constantFrom('tryAllocate' as const, 'allocateShared' as const, 'publish' as const, 'finishWithoutCache' as const), pick: fc.nat() }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('decode' as const), pick: fc.nat(), steps: fc.integer({ min: 1, max: 5 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('fork' as const), pick: fc.nat(), swap: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('adopt' as const), pick: fc.nat(), from: fc.nat(), swap: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('raw' as const), tokens: fc.nat({ max: 12 }) }) },
);

const poolSeen = { allocFalse: 0, allocTrue: 0, forks: 0, adopts: 0, swaps: 0, raw: 0 };

function samePools(p: BlockManagerPool, q: BlockManagerPool, pairs: Array<[Sequence, Sequence]>): void {
  p.check();
  q.check();
  for (const [a, b] of pairs) {
    expect([[...a.blockTable], a.dpRank, a.singleBlockId, a.numTokens, a.needsSwap]).toEqual([[...b.blockTable], b.dpRank, b.singleBlockId, b.numTokens, b.needsSwap]);
  }
  expect(p.numFreeBlocks()).toEqual(q.numFreeBlocks());
  expect(p.numUsedBlocks()).toEqual(q.numUsedBlocks());
  expect(p.stats()).toEqual(q.stats());
  for (let r = 0; r < p.dpSize; r++) {
    const x = p.managers[r] as ConcurrentXTensorBlockManagerImpl;
    const y = q.managers[r] as XTensorBlockManagerImpl;
    expect(x).toBeInstanceOf(ConcurrentXTensorBlockManagerImpl);
    expect(x.lockDepth()).toBe(0);
    expect(x.pageStates()).toEqual(y.pageStates());
    expect(x.takeEvents()).toEqual(y.takeEvents());
    expect([...x.freeIds()]).toEqual([...y.freeIds()]);
    expect(p.swapTransferInfos(r)).toEqual(q.swapTransferInfos(r));
  }
}

function runPools(ops: PoolOp[], numBlocks: number, dpSize: number, pageSize: number, physPages: number | undefined): void {
  const opts = {
    numBlocks, blockSize: 2, dpSize, enableXtensor: true, numLayers: 1, slotSize: 2, pageSize,
    ...(physPages === undefined ? {} : { numPhysicalPages: 2 * physPages }),
  };
  const p = new BlockManagerPool({ ...opts, enableDisaggPd: true });
  const q = new BlockManagerPool(opts);
  const pairs: Array<[Sequence, Sequence]> = [];
  try {
    samePools(p, q, pairs);
    for (const op of ops) {
      if (op.kind === 'new') {
        const t = Array.from({ length: op.len }, (_, i) => 100 + i);
        pairs.push([new Sequence(t), new Sequence(t)]);
      } else if (op.kind === 'raw') {
        // The reference's raw allocate: the caller owns the blocks, which the
        // pool's audit cannot know about, so they go back within the step.
        const a = p.allocateBlocks(op.tokens);
        const b = q.allocateBlocks(op.tokens);
        expect(a === null ? null : [a.dpRank, [...a.blockIds]]).toEqual(b === null ? null : [b.dpRank, [...b.blockIds]]);
        if (a !== null) {
          expect(p.numUsedBlocks()).toEqual(q.numUsedBlocks());
          poolSeen.raw++;
          p.deallocateBlocks(a.dpRank, a.blockIds);
          q.deallocateBlocks(b!.dpRank, b!.blockIds);
        }
      } else if (pairs.length > 0) {
        const [a, b] = pairs[op.pick % pairs.length]!;
        switch (op.kind) {
          case 'allocate': {
            const r = p.allocate(a);
            expect(r).toBe(q.allocate(b));
            poolSeen[r ? 'allocTrue' : 'allocFalse']++;
            break;
          }
          case 'tryAllocate':
            expect(p.tryAllocate(a)).toBe(q.tryAllocate(b));
            break;
          case 'allocateShared':
            expect(p.allocateShared(a)).toBe(q.allocateShared(b));
            break;
          case 'publish':
            p.cache(a);
            q.cache(b);
            break;
          case 'finish':
            p.deallocate(a);
            q.deallocate(b);
            break;
          case 'finishWithoutCache':
            p.deallocateWithoutCache(a);
            q.deallocateWithoutCache(b);
            break;
          case 'decode':
            for (let i = 0; i < op.steps && a.numBlocks > 0; i++) {
              a.appendToken(7 + i);
              b.appendToken(7 + i);
              a.kvCachedTokens = a.numTokens - 1;
              b.kvCachedTokens = b.numTokens - 1;
              expect(p.allocate(a)).toBe(q.allocate(b));
            }
            break;
          case 'fork': {
            if (a.dpRank < 0) break;
            // A sequence whose adopted beam is not taken yet is not forked: both refuse alike.
            const x = outcome(() => a.fork({ swapLastBlock: op.swap }));
            const y = outcome(() => b.fork({ swapLastBlock: op.swap }));
            expect(x === 'threw').toBe(y === 'threw');
            if (x === 'threw' || y === 'threw') break;
            pairs.push([x, y]);
            poolSeen.forks++;
            if (op.swap) poolSeen.swaps++;
            break;
          }
          case 'adopt': {
            const [c, d] = pairs[op.from % pairs.length]!;
            const r = outcome(() => p.adoptBeam(c, a, { swapLastBlock: op.swap }));
            expect(r).toEqual(outcome(() => q.adoptBeam(d, b, { swapLastBlock: op.swap })));
            if (r !== 'threw') poolSeen.adopts++;
            break;
          }
        }
      }
      samePools(p, q, pairs);
    }
    for (const [a, b] of pairs) {
      p.deallocate(a);
      q.deallocate(b);
    }
    samePools(p, q, []);
    expect(p.numUsedBlocks()).toEqual(new Array(dpSize).fill(1)); // each rank's padding block
  } finally {
    p.dispose();
    q.dispose();
  }
}

describe('BlockManagerPool with enableXtensor + enableDisaggPd', () => {
  it('agrees step by step with the same pool without concurrency, check() after every operation', () => {
    fc.assert(
      fc.property(
        fc.array(poolOpArb, { minLength: 1, maxLength: 50, size: 'max' }),
        fc.integer({ min: 4, max: 40 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 2, max: 12 }),
        fc.option(fc.integer({ min: 1, max: 8 }), { nil: undefined }),
        (ops, numBlocks, dpSize, pageSize, phys) => runPools(ops, numBlocks, dpSize, pageSize, phys),
      ),
      { numRuns: 120 },
    );
    for (const [k, v] of Object.entries(poolSeen)) expect(v, k).toBeGreaterThan(0);
  });

  it('a worker allocating on a rank while this thread runs the pool never gets a block a sequence holds', async () => {
    const p = new BlockManagerPool({ numBlocks: 48, blockSize: 2, enableXtensor: true, numLayers: 1, slotSize: 4, pageSize: 12, enableDisaggPd: true });
    // blockBytes 4: 3 blocks a page.
    const m = p.managers[0] as ConcurrentXTensorBlockManagerImpl;
    const owners = new SharedArrayBuffer(48 * 4);
    const own = new Int32Array(owners);
    const start = new SharedArrayBuffer(16);
    const flags = new Int32Array(start);
    const WORKER = 2;
    const w = spawn({ mode: 'hammer', desc: m.share(), ops: 20_000, seed: 11, tag: WORKER, owners, start });
    const seqs: Sequence[] = [];
    let refusals = 0;
    try {
      await nextMessage(w);
      const done = nextMessage<{ tally: XTally; stepsBefore: number; stepsAfter: number }>(w);
      release(start);
      // Pool steps until the worker is through, and on until the pool has run out of pages at least once: on a
      // busy machine the worker can finish before this thread's sequences grow that far, and whether the pages
      // ran out while it ran is up to the scheduler of the machine (the concurrent steps are checked below).
      for (let i = 0; Atomics.load(flags, 3) === 0 || (refusals === 0 && i < 100_000); i++) {
        const pick = (i * 7919) % 5;
        if ((pick === 0 && seqs.length < 30) || seqs.length === 0) seqs.push(new Sequence(Array.from({ length: 1 + (i % 9) }, (_, j) => j)));
        const s = seqs[(i * 31) % seqs.length]!;
        if (pick <= 2) {
          if (s.numBlocks > 0) s.appendToken(1);
          if (!p.allocate(s)) refusals++;
        } else if (pick === 3) {
          p.deallocate(s);
          seqs.splice(seqs.indexOf(s), 1);
        } else if (s.dpRank >= 0) seqs.push(s.fork());
        Atomics.add(flags, 2, 1);
        // No block a live sequence holds is one the worker holds.
        for (const t of seqs) for (const id of t.blockTable) expect(Atomics.load(own, id)).not.toBe(WORKER);
      }
      const { tally, stepsBefore, stepsAfter } = await done;
      expect(stepsAfter).toBeGreaterThan(stepsBefore); // the pool ran while the worker did
      expect(tally.heldTwice).toBe(0);
      expect(tally.idsAllocated).toBeGreaterThan(0);
      expect(refusals).toBeGreaterThan(0); // the pages ran out at times
      p.check(); // the worker let go of everything: every holder is a live sequence
      for (const s of seqs) p.deallocate(s);
      p.check();
      expect(p.numUsedBlocks()).toEqual([1]);
    } finally {
      await w.terminate();
      p.dispose();
    }
  });

  it('a pool operation holds the rank\'s lock from start to end, not only inside each manager call', () => {
    const p = new BlockManagerPool({ numBlocks: 16, blockSize: 2, enableXtensor: true, numLayers: 1, slotSize: 2, pageSize: 12, enableKvcacheStore: true });
    const m = p.managers[0] as ConcurrentXTensorBlockManagerImpl;
    const depths: number[] = [];
    // Seen from the rank, before the manager's own wrapper takes its level.
    for (const name of ['allocateInto', 'releaseFrom', 'retainFrom'] as const) {
      const f = m[name].bind(m) as (...a: unknown[]) => unknown;
      (m as unknown as Record<string, unknown>)[name] = (...a: unknown[]) => (depths.push(m.lockDepth()), f(...a));
    }
    const s = new Sequence([1, 2, 3, 4, 5]);
    expect(p.allocate(s)).toBe(true);
    const c = s.fork();
    p.deallocate(s);
    p.deallocate(c);
    expect(depths.length).toBeGreaterThanOrEqual(3);
    expect(depths.every((d) => d >= 1)).toBe(true); // (the pool nests: enter() around a locked rank call)
    expect(m.lockDepth()).toBe(0);
    p.check();
    p.dispose();
  });
});

// ---- descriptors and disposal ----

describe('ConcurrentXTensorBlockManagerImpl descriptors', () => {
  const opts = { numBlocks: 10, blockSize: 4, pageSize: 10, blockBytes: 3, numLayers: 1 };

  it('refuses forged and stale descriptors before reading through them', () => {
    const m = new ConcurrentXTensorBlockManagerImpl(opts);
    const d = m.share();
    const STALE = /does not name a live XTensor manager/;
    const copy = (edit: (b: Int32Array, f: Float64Array) => void, bytes = d.buffer.byteLength): SharedXTensorDescriptor => {
      const buffer = new SharedArrayBuffer(bytes);
      new Uint8Array(buffer).set(new Uint8Array(d.buffer).subarray(0, Math.min(bytes, d.buffer.byteLength)));
      edit(new Int32Array(buffer, 0, 32), new Float64Array(buffer, 0, 24));
      return { ...d, buffer };
    };
    // An exact copy is a live state of the same shape: it attaches (it is another manager).
    const twin = ConcurrentXTensorBlockManagerImpl.attach(copy(() => {}));
    twin.dispose();
    const cases: Array<[unknown, RegExp]> = [
      [null, /descriptor must be an object/],
      [{ ...d, kind: 'kvpool.ConcurrentBlockManagerImpl' }, /descriptor must come from ConcurrentXTensorBlockManagerImpl.share\(\)/],
      [{ ...d, extra: 1 }, /descriptor: unknown option "extra"/],
      [{ ...d, buffer: new ArrayBuffer(d.buffer.byteLength) }, /descriptor.buffer must be a SharedArrayBuffer/],
      [{ ...d, memory: new WebAssembly.Memory({ initial: 1 }).buffer }, /descriptor.memory must be a WebAssembly.Memory/],
      [{ ...d, module: {} }, /descriptor.module must be a WebAssembly.Module/],
      [{ ...d, gen: 0 }, /descriptor.gen must be in \[1, 4294967295\], got 0/],
      [{ ...d, gen: (d.gen % 0xfffffffe) + 1 }, STALE],
      [{ ...d, lockTimeoutMs: -1 }, /descriptor.lockTimeoutMs must be >= 1/],
      [{ ...d, buffer: new SharedArrayBuffer(d.buffer.byteLength) }, STALE], // zeroes: no XTensor state
      [{ ...d, buffer: new SharedArrayBuffer(16) }, STALE],
      [copy((b) => (b[0] = 0x4d70766b)), STALE], // another kind's magic
      [copy((b) => (b[4] = 99)), STALE], // another layout version
      [copy((b) => (b[5] = 11)), STALE], // numBlocks edited: the size no longer fits
      [copy((b) => (b[7] = 0)), STALE], // numLayers 0 is no shape
      [copy((_, f) => (f[17] = 20)), STALE], // blockBytes larger than the page
      [copy(() => {}, d.buffer.byteLength + 8), STALE], // a longer buffer than the shape needs
    ];
    for (const [desc, msg] of cases) expect(() => ConcurrentXTensorBlockManagerImpl.attach(desc as SharedXTensorDescriptor), String(msg)).toThrow(msg);
    m.dispose();
    expect(() => ConcurrentXTensorBlockManagerImpl.attach(d)).toThrow(STALE); // the manager is gone
  });

  it('the creator disposing ends every handle: here and in a worker; an attached handle disposing ends only itself', async () => {
    const m = new ConcurrentXTensorBlockManagerImpl(opts);
    m.reservePaddingBlocks();
    const a = ConcurrentXTensorBlockManagerImpl.attach(m.share());
    const b = ConcurrentXTensorBlockManagerImpl.attach(m.share());
    b.dispose();
    expect(b.isDisposed).toBe(true);
    expect(() => b.allocate(1)).toThrow(/this ConcurrentXTensorBlockManagerImpl was disposed/);
    expect(() => b.share()).toThrow(/was disposed/);
    expect([...a.allocate(1)!]).toEqual([1]); // the others go on
    const start = new SharedArrayBuffer(16);
    const w = spawn({ mode: 'after-dispose', desc: m.share(), start });
    try {
      expect(await nextMessage<{ used: number }>(w)).toEqual({ ready: true, used: 2 });
      const d = m.share();
      m.dispose();
      expect(m.isDisposed).toBe(true);
      expect(a.isDisposed).toBe(false); // it has not noticed yet: its next call does
      expect(() => m.numFreeBlocks()).toThrow(/this ConcurrentXTensorBlockManagerImpl was disposed/);
      expect(() => a.numFreeBlocks()).toThrow(/this shared manager was disposed \(by the thread that created it\)/);
      expect(() => a.withLock(() => 1)).toThrow(/was disposed/);
      expect(a.lockDepth()).toBe(0); // the failed calls hold nothing
      expect(() => ConcurrentXTensorBlockManagerImpl.attach(d)).toThrow(/does not name a live XTensor manager/);
      const reply = nextMessage<{ call: string; attach: string }>(w);
      release(start);
      expect(await reply).toEqual({
        call: expect.stringMatching(/this shared manager was disposed \(by the thread that created it\)/),
        attach: expect.stringMatching(/does not name a live XTensor manager/),
      });
      a.dispose();
      m.dispose(); // twice is fine
    } finally {
      await w.terminate();
    }
  });

  it('every public method takes the lock: another thread holding it blocks each one until the timeout', async () => {
    const m = new ConcurrentXTensorBlockManagerImpl({ ...opts, lockTimeoutMs: 40 });
    m.reservePaddingBlocks();
    const start = new SharedArrayBuffer(16);
    const w = spawn({ mode: 'die-holding', desc: m.share(), start });
    expect(await new Promise<number>((res) => w.once('exit', res))).toBe(3);
    const calls: Record<string, () => unknown> = {
      allocate: () => m.allocate(1), deallocate: () => m.deallocate([1]), retain: () => m.retain([1]), tryToReserve: () => m.tryToReserve(1),
      freeReserved: () => m.freeReserved(), trim: () => m.trim(), sleep: () => m.sleep(), wakeup: () => m.wakeup(), sleeping: () => m.sleeping,
      takeEvents: () => m.takeEvents(), eventsLost: () => m.eventsLost, pageStates: () => m.pageStates(), numFreeBlocks: () => m.numFreeBlocks(),
      numUsedBlocks: () => m.numUsedBlocks(), stats: () => m.stats(), check: () => m.check(), freeIds: () => m.freeIds(),
      holderCounts: () => m.holderCounts(), refCount: () => m.refCount(1), blockStates: () => m.blockStates(), pageOf: () => m.pageOf(1),
      blocksPerPage: () => m.blocksPerPage, allocateInto: () => m.allocateInto(1, new Int32Array(1), 0),
      releaseFrom: () => m.releaseFrom(new Int32Array([1]), 0, 1), retainFrom: () => m.retainFrom(new Int32Array([1]), 0, 1),
      kvCacheUtilization: () => m.kvCacheUtilization(), withLock: () => m.withLock(() => 0), lockEnter: () => m.lockEnter(),
    };
    for (const [name, f] of Object.entries(calls)) expect(f, name).toThrow(LockTimeoutError);
    // Disposing does not wait for a dead thread: the manager ends all the same.
    const d = m.share();
    m.dispose();
    expect(() => ConcurrentXTensorBlockManagerImpl.attach(d)).toThrow(/does not name a live XTensor manager/);
  });
});

// ---- the bounded page-event ring ----

describe('XTensor page events', () => {
  it('keep the newest maxPendingEvents; older ones are dropped and counted in eventsLost', () => {
    for (const make of [
      (o: object) => new XTensorBlockManagerImpl(o as never),
      (o: object) => new ConcurrentXTensorBlockManagerImpl(o as never),
    ]) {
      // Pages of 10 bytes holding 3 blocks of 3 bytes (ids 0-2, 4-5, 7-9): no reserve, so every free unmaps.
      const m = make({ numBlocks: 10, blockSize: 4, pageSize: 10, blockBytes: 3, numLayers: 1, minReservedPages: 0, maxReservedPages: 0, maxPendingEvents: 3 });
      m.reservePaddingBlocks(); // map 0
      const a = m.allocate(5)!; // ids 1, 2, then page 1 (4, 5) and page 2 (7): map 1, map 2
      expect(m.eventsLost).toBe(0);
      m.deallocate(a); // unmap 1, unmap 2: five events, three kept
      const map = (page: number): PageEvent => ({ type: 'map', rank: 0, page, offset: page * 10 });
      const unmap = (page: number): PageEvent => ({ ...map(page), type: 'unmap' });
      expect(m.eventsLost).toBe(2);
      expect(m.takeEvents()).toEqual([map(2), unmap(1), unmap(2)]);
      expect(m.takeEvents()).toEqual([]);
      m.check();
      expect(() => make({ numBlocks: 10, blockSize: 4, pageSize: 10, blockBytes: 3, numLayers: 1, maxPendingEvents: 0 })).toThrow(/options.maxPendingEvents must be >= 1, got 0/);
      m.dispose();
    }
  });
});

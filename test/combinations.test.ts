// Every row of the combination table (docs/combinations.md), tested
// differentially: for each supported combination of rank kind, linear
// state, concurrency, host tier, cache salt and eviction policy, random
// scheduler operations run on the library's pool and on the reference
// model's pool of the same configuration (a concurrent pool against the
// model without concurrency), with the same results and the same state --
// every sequence, every rank's free stacks and eviction orders, figures,
// linear-state slots, host tier, composite tables and XTensor pages -- and
// pool.check() after every step. Chain hashes and the model's keys must stay
// one-to-one (checkpoint keys, transfer plans). Every refused row throws at
// construction with the table's reason, changing nothing.

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';
import { sharedCore } from '../bindings/core/shared-core.js';
import type { CoreInstance } from '../bindings/core/core-instance.js';
import type { LinearStateCacheOp, ResolvedLinearStateOps } from '../bindings/linear-state/linear-state-prefix-cache.js';
import type { XTensorBlockManagerImpl } from '../bindings/managers/xtensor-block-manager-impl.js';
import { BlockManagerPool, type RankBlocks } from '../bindings/pool/block-manager-pool.js';
import { HierarchyBlockManagerPool, type OffloadPlan, type PrefetchPlan, type RankTransfers } from '../bindings/pool/hierarchy-block-manager-pool.js';
import { Sequence } from '../bindings/pool/sequence.js';
import { ModelBlockManager } from '../model/block-manager-impl.js';
import { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import { ModelHierarchyPool, type ModelOffloadPlan, type ModelPrefetchPlan, type ModelTransfer } from '../model/hierarchy-block-manager-pool.js';
import type { ModelBatch, ModelOp } from '../model/linear-state-prefix-cache.js';
import type { ModelSequence } from '../model/sequence.js';
import { ModelXTensor } from '../model/xtensor-block-manager-impl.js';
import { agree, agreeState } from './support/agree.js';
import { BAD_CALLS, opArb, warmUp, type Op } from './support/combination-ops.js';
import { REFUSALS, ROWS, poolOptions, rowName, shapeArb, type Row, type Shape } from './support/combination-rows.js';
import { hostRankState, rankEvictionOrder, rankFreeIds, rankSingleFreeIds } from './support/pool-probe.js';
import { sameOutcome, sameRefusal } from './support/same-outcome.js';
import { soak } from './support/soak.js';
import { countSteps } from './support/steps.js';

const SALTS = ['', 'tenant-a', 'tenant-b'];

/** Random runs per row (times the CI soak factor). */
const RUNS_PER_ROW = 16;

/** Units of 3 tokens; unit j of prompt p holds digit j of p in base 3: shared prefixes, and equal content after different ones. */
function promptTokens(p: number, len: number): number[] {
  const t: number[] = [];
  for (let i = 0; i < len; i++) t.push((Math.floor(p / 3 ** Math.floor(i / 3)) % 3) * 1000 + (i % 3));
  return t;
}

/** A sequence and its model twin. */
interface Twin {
  s: Sequence;
  m: ModelSequence;
}

interface OpenBatch {
  rank: number;
  res: ResolvedLinearStateOps;
  mres: ModelBatch;
  twins: Twin[];
  ends: number[];
}

/** What the runs reached, per path, so the test fails if its generators stop reaching one. */
const seen = {
  refusals: new Set<number>(),
  rows: new Set<string>(),
  slotlessOps: 0,
  failedAllocations: 0,
  adoptions: 0,
  swaps: 0,
  evictions: 0,
  rawBlocks: 0,
  checkpointRestores: 0,
  promotions: 0,
  trimmedBlocks: 0,
  saltedCheckpoints: 0,
  hostHits: 0,
  saltedHostHits: 0,
  loads: 0,
  offloads: 0,
  failedOffloads: 0,
  prefetched: 0,
  fetched: 0,
  windowReleases: 0,
  pageFailures: 0,
  priorityEvictions: 0,
};

/** Composite tables as plain arrays; a sequence that holds none has none. */
function norm(t: ArrayLike<number>[]): number[][] {
  return t.every((x) => x.length === 0) ? [] : t.map((x) => Array.from(x));
}

/** One run: a pool of `row`'s configuration and its model, driven step by step. */
class Run {
  readonly pool: BlockManagerPool;
  readonly model: ModelBlockManagerPool;
  readonly hp: HierarchyBlockManagerPool | null;
  readonly hm: ModelHierarchyPool | null;
  readonly B: number;
  readonly seqs: Twin[] = [];
  readonly plans: [OffloadPlan, ModelOffloadPlan][] = [];
  readonly batches: OpenBatch[] = [];
  readonly raws: RankBlocks[] = [];
  /** Sequences whose prefetch from the store may be pending. */
  readonly prefetching: Twin[] = [];
  /** Chain hash (hex) <-> model key, one to one over the whole run. */
  private readonly keyOf = new Map<string, string>();
  private readonly hashOf = new Map<string, string>();

  constructor(
    readonly row: Row,
    sh: Shape,
  ) {
    const o = poolOptions(row, sh);
    this.B = sh.blockSize;
    if (row.host) {
      this.pool = this.hp = new HierarchyBlockManagerPool(o as never);
      this.model = this.hm = new ModelHierarchyPool(o as never);
    } else {
      this.pool = new BlockManagerPool(o);
      this.model = new ModelBlockManagerPool(o as never);
      this.hp = this.hm = null;
    }
    this.model.trackPeaks();
  }

  pick(i: number): Twin {
    return this.seqs[i % this.seqs.length]!;
  }

  /** Both sides return equal values, or throw errors of the same class. */
  same<A, B>(a: () => A, b: () => B): void {
    const r = sameOutcome(a, b);
    if (r.ok && r.value === false) seen.failedAllocations++;
  }

  /** `hash` (the library's) and `key` (the model's) name the same block content, consistently over the run. */
  sameKey(hash: Uint8Array | null | undefined, key: string | null | undefined): void {
    if (hash == null || key == null) {
      agree(hash == null, key == null, 'a hash where the model has no key, or the reverse');
      return;
    }
    const hex = Buffer.from(hash).toString('hex');
    const k = this.keyOf.get(hex);
    const h = this.hashOf.get(key);
    if (k === undefined && h === undefined) {
      this.keyOf.set(hex, key);
      this.hashOf.set(key, hex);
    } else agree([k, h], [key, hex], 'the chain hash and the model key of a block');
  }

  /** The sequence computed what its blocks have room for (a forward ran). */
  compute(t: Twin): void {
    const { s, m } = t;
    if (s.singleBlockId < 0) return;
    const room = this.row.kind === 'composite' ? s.numTokens : Math.min(s.numTokens, s.numBlocks * this.B);
    if (s.kvCachedTokens < room) s.kvCachedTokens = m.kvCachedTokens = room;
  }

  apply(op: Op): void {
    const { pool, model, B } = this;
    switch (op.kind) {
      case 'new': {
        const t = promptTokens(op.prompt, op.len);
        const salt = SALTS[op.salt]!;
        const tw = { s: new Sequence(t, { cacheSalt: salt }), m: model.newSequence(t, salt) };
        this.seqs.push(tw);
        if (op.start) {
          this.same(() => pool.allocate(tw.s), () => model.allocate(tw.m));
          this.compute(tw);
        }
        return;
      }
      case 'resetCache':
        agree(pool.resetPrefixCache(), model.resetPrefixCache());
        return;
      case 'resetTransfers':
        pool.resetTransferInfos();
        model.resetTransferInfos();
        return;
      case 'raw': {
        const a = pool.allocateBlocks(op.tokens);
        const b = model.allocateBlocks(op.tokens);
        agree(a && { dpRank: a.dpRank, ids: [...a.blockIds] }, b && { dpRank: b.dpRank, ids: b.blockIds });
        if (a !== null) {
          this.raws.push(a);
          seen.rawBlocks += a.blockIds.length;
        }
        return;
      }
      case 'unraw': {
        if (this.raws.length === 0) return;
        const [a] = this.raws.splice(op.pick % this.raws.length, 1);
        pool.deallocateBlocks(a!.dpRank, a!.blockIds);
        model.deallocateBlocks(a!.dpRank, [...a!.blockIds]);
        return;
      }
      case 'settle': {
        if (this.batches.length === 0) return;
        this.settle(this.batches.splice(op.pick % this.batches.length, 1)[0]!, op.commit);
        return;
      }
      case 'take':
        this.take();
        return;
      case 'complete': {
        if (this.plans.length === 0) return;
        const [p, m] = this.plans.splice(op.pick % this.plans.length, 1)[0]!;
        this.hp!.completeOffload(p, op.ok);
        this.hm!.completeOffload(m, op.ok);
        if (!op.ok) seen.failedOffloads += p.blocks.length;
        return;
      }
      case 'flush': {
        // The worker does every pending copy at once; then device pressure evicts.
        this.take();
        for (const [p, m] of this.plans.splice(0)) {
          this.hp!.completeOffload(p, op.ok);
          this.hm!.completeOffload(m, op.ok);
          if (!op.ok) seen.failedOffloads += p.blocks.length;
        }
        for (let r = 0; r < pool.dpSize; r++) this.evict(r, op.evict);
        return;
      }
      case 'evict':
        this.evict(op.rank % pool.dpSize, op.n);
        return;
      case 'tick':
        pool.setTime(pool.time + op.dt);
        model.setTime(model.time + op.dt);
        return;
      case 'bad':
        if (this.bad(op.which, op.pick)) seen.refusals.add(op.which);
        return;
      case 'allocateList': {
        if (this.seqs.length === 0) return;
        const list = op.picks.map((i) => this.pick(i));
        this.same(() => pool.allocate(list.map((t) => t.s)), () => model.allocate(list.map((t) => t.m)));
        return;
      }
      case 'batch':
        this.batch(op.picks, op.ends, op.settle);
        return;
    }
    if (this.seqs.length === 0) return;
    switch (op.kind) {
      case 'fetched': {
        // Mostly a sequence whose prefetch is pending (the store reports on it); else any (refused alike).
        const tw = this.prefetching.length > 0 && op.pick % 4 !== 0 ? this.prefetching.splice(op.pick % this.prefetching.length, 1)[0]! : this.pick(op.pick);
        const r = sameOutcome(() => this.hp!.updatePrefetchResult(tw.s, op.counts), () => this.hm!.updatePrefetchResult(tw.m, op.counts));
        if (r.ok) seen.fetched += r.value;
        return;
      }
      case 'adopt': {
        const c = this.pick(op.child);
        const src = this.pick(op.source);
        const o = { swapLastBlock: op.swap };
        if (sameOutcome(() => pool.adoptBeam(c.s, src.s, o), () => model.adoptBeam(c.m, src.m, o)).ok) seen.adoptions++;
        return;
      }
    }
    const tw = this.pick(op.pick);
    const { s, m } = tw;
    switch (op.kind) {
      case 'allocate':
        // The forward may run at once, or later in chunks (linear-state batches advance the count).
        this.same(() => pool.allocate(s), () => model.allocate(m));
        if (op.compute) this.compute(tw);
        return;
      case 'decode':
        // The token at a position is the same in every sequence, or (own) this sequence's own:
        // forks that share a partial last block then write different tokens into it (a race on
        // the block the library cannot see), and each keys its later blocks by its own tokens.
        for (let i = 0; i < op.steps && s.singleBlockId >= 0; i++) {
          const token = 7000 + s.numTokens + (op.own ? 1_000_000 * (1 + this.seqs.indexOf(tw)) : 0);
          s.appendToken(token);
          m.appendToken(token);
          s.kvCachedTokens = m.kvCachedTokens = s.numTokens - 1;
          this.same(() => pool.allocate(s, s.numTokens), () => model.allocate(m, m.numTokens));
        }
        return;
      case 'compute':
        // Any computed count, then a round for every token: a window follows the count.
        s.kvCachedTokens = m.kvCachedTokens = Math.min(op.cached, s.numTokens);
        this.same(() => pool.allocate(s, s.numTokens), () => model.allocate(m, m.numTokens));
        return;
      case 'tryAllocate':
        this.same(() => pool.tryAllocate(s), () => model.tryAllocate(m));
        return;
      case 'allocateShared':
        this.same(() => pool.allocateShared(s), () => model.allocateShared(m));
        return;
      case 'publish':
        if (s.dpRank >= 0) {
          const n = op.upTo === undefined ? undefined : op.upTo % (s.numTokens + 2);
          pool.cache(s, n);
          model.cache(m, n);
        }
        return;
      case 'finish':
        if (op.withoutCache) {
          pool.deallocateWithoutCache(s);
          model.deallocateWithoutCache(m);
        } else {
          pool.deallocate(s);
          model.deallocate(m);
        }
        return;
      case 'fork': {
        if (s.dpRank < 0) return;
        let child: Sequence | Error;
        let mchild: ModelSequence | Error;
        try {
          child = s.fork({ swapLastBlock: op.swap });
        } catch (e) {
          child = e as Error;
        }
        try {
          mchild = model.fork(m, op.swap);
        } catch (e) {
          mchild = e as Error;
        }
        if (child instanceof Error || mchild instanceof Error) agree(child.constructor.name, mchild.constructor.name, `fork: ${String(child)} / ${String(mchild)}`);
        else this.seqs.push({ s: child, m: mchild });
        return;
      }
      case 'checkpoint': {
        // The worker saved the state at a block boundary of this sequence's tokens.
        const k = op.boundary + 1;
        if (s.dpRank < 0 || k * B > s.numTokens) return;
        const c = pool.linearStateCache(s.dpRank);
        const mc = model.linearStateCache(s.dpRank);
        const h = s.prefixHash(k * B);
        const key = model.prefixKeys(m, k)[k - 1]!;
        this.sameKey(h, key);
        if (s.cacheSalt !== '') seen.saltedCheckpoints++;
        const r = c.reserveCheckpoint(h);
        const mr = mc.reserve(key, false);
        agree([r.slot, r.reservation !== null], [mr.slot, mr.pending], 'checkpoint reservation');
        if (r.reservation) agree(c.commit(r.reservation), mc.commit(mr.slot));
        return;
      }
      case 'releaseSlot':
        this.same(() => pool.releaseLinearStateSlot(s), () => model.releaseLinearStateSlot(m));
        return;
      case 'chunk': {
        const n = Math.min(op.tokens, s.numTokens);
        this.same(() => this.hp!.allocateChunked(s, n, op.copy), () => this.hm!.allocateChunked(m, n, op.copy));
        return;
      }
      case 'prefetch': {
        let a: PrefetchPlan | null | Error = null;
        let b: ModelPrefetchPlan | null | Error = null;
        try {
          a = this.hp!.prefetchFromStorage(s);
        } catch (e) {
          a = e as Error;
        }
        try {
          b = this.hm!.prefetchFromStorage(m);
        } catch (e) {
          b = e as Error;
        }
        if (a instanceof Error || b instanceof Error) {
          agree(a?.constructor.name, b?.constructor.name, `prefetch: ${String(a)} / ${String(b)}`);
          return;
        }
        agree(a && { r: a.dpRank, b: a.blocks.map((x) => [x.src, x.dst]) }, b && { r: b.dpRank, b: b.blocks.map((x) => [x.src, x.dst]) }, 'prefetch plan');
        a?.blocks.forEach((x, i) => this.sameKey(x.hash, b!.blocks[i]!.key));
        if (a !== null) this.prefetching.push(tw);
        seen.prefetched += a?.blocks.length ?? 0;
        return;
      }
      case 'retain':
        s.setRetention(op.marks);
        model.setRetention(m, op.marks);
        return;
    }
  }

  private evict(r: number, n: number): void {
    if (this.row.kind !== 'plain') return;
    agree(this.pool.kvManager(r).evict(n), (this.model.kvManager(r) as ModelBlockManager).evict(n), 'device eviction');
  }

  /** Takes the pending transfers of both sides, compares them, and keeps the offload plans in flight. */
  private take(): void {
    const a: RankTransfers[] = this.hp!.takeTransfers();
    const b = this.hm!.takeTransfers();
    const pairs = (l: readonly { src: number; dst: number }[]) => l.map((x) => [x.src, x.dst]);
    agree(a.map((x) => [pairs(x.loads), x.offload && pairs(x.offload.blocks)]), b.map((x) => [pairs(x.loads), x.offload && pairs(x.offload.blocks)]), 'transfers');
    const keys = (x: readonly { hash: Uint8Array }[], y: readonly ModelTransfer[]) => x.forEach((t, i) => this.sameKey(t.hash, y[i]!.key));
    a.forEach((x, r) => {
      keys(x.loads, b[r]!.loads);
      seen.loads += x.loads.length;
      if (x.offload) {
        keys(x.offload.blocks, b[r]!.offload!.blocks);
        this.plans.push([x.offload, b[r]!.offload!]);
        seen.offloads += x.offload.blocks.length;
      }
    });
  }

  /**
   * One batch of linear-state cache ops on one rank: each sequence's op for
   * a forward ending at a block boundary when one is in reach, resolved,
   * then committed (the forwards ran: the computed counts advance), aborted,
   * or left open to settle later.
   */
  private batch(picks: number[], ends: number[], settle: 'commit' | 'abort' | 'later'): void {
    const placed = this.seqs.filter((t) => t.s.dpRank >= 0);
    if (placed.length === 0) return;
    const rank = placed[picks[0]! % placed.length]!.s.dpRank;
    // A sequence whose live slot was given back has no state to run a forward on (refused).
    const twins = [...new Set(picks.map((i) => placed[i % placed.length]!))].filter((t) => t.s.dpRank === rank && t.s.linearStateSlotId >= 0);
    const stepEnds: number[] = [];
    const ops: LinearStateCacheOp[] = [];
    const mops: ModelOp[] = [];
    twins.forEach(({ s, m }, i) => {
      const kvc = s.kvCachedTokens;
      // Half the prefills advance a block at a time (chunked prefill: promotions), the rest anywhere.
      const e = ends[i]! % 2 === 0 && kvc < s.numPromptTokens ? Math.min(s.numTokens, (Math.floor(kvc / this.B) + 1) * this.B) : kvc + (ends[i]! % (s.numTokens - kvc + 1));
      const boundary = Math.floor(e / this.B) * this.B;
      const end = boundary >= kvc && boundary > 0 ? boundary : e;
      stepEnds.push(end);
      const op = this.pool.linearStateCacheOp(s, end);
      const mop = this.model.linearStateCacheOp(m, end);
      agree(op.liveSlot, mop.liveSlot, 'cache op slot');
      this.sameKey(op.restoreHash, mop.restore);
      this.sameKey(op.saveHash, mop.save);
      ops.push(op);
      mops.push(mop);
    });
    const res = this.pool.linearStateCache(rank).resolveCacheOps(ops, twins.map((t) => t.s));
    const mres = this.model.linearStateCache(rank).resolve(mops, twins.map((t) => t.m));
    agree(
      [[...res.restoreSrcSlots], [...res.saveDstSlots], [...res.restorePins, ...res.savePins].map((p) => p.slot), res.reservations.map((r) => r.slot), res.promotions.map((p) => [p.liveSlot, p.replacement])],
      [mres.restoreSrc, mres.saveDst, mres.pins, mres.reservations, mres.promotions.map((p) => [p.live, p.replacement])],
      'resolved cache ops',
    );
    seen.checkpointRestores += res.restorePins.length;
    const b = { rank, res, mres, twins, ends: stepEnds };
    if (settle === 'later') this.batches.push(b);
    else this.settle(b, settle === 'commit');
  }

  private settle(b: OpenBatch, commit: boolean): void {
    const c = this.pool.linearStateCache(b.rank);
    const mc = this.model.linearStateCache(b.rank);
    if (!commit) {
      c.abortCacheOps(b.res);
      mc.abortBatch(b.mres);
      return;
    }
    const applied = c.commitReservations(b.res);
    agree(applied, mc.commitBatch(b.mres), 'promotions applied');
    seen.promotions += applied;
    b.twins.forEach(({ s, m }, i) => {
      if (s.kvCachedTokens < b.ends[i]! && b.ends[i]! <= s.numTokens) s.kvCachedTokens = m.kvCachedTokens = b.ends[i]!;
    });
  }

  /** An invalid call, on both sides: the same error class, and nothing changes. False when the row offers no such mistake. */
  private bad(which: number, pick: number): boolean {
    const { pool, model, hp, hm } = this;
    const tw = this.seqs.length > 0 ? this.pick(pick) : null;
    if (tw === null && which !== 2 && which !== 5 && which !== 6 && which !== 7) return false;
    const { s, m } = tw ?? ({} as Twin);
    switch (which) {
      case 0: sameRefusal(() => pool.allocate(s, -1), () => model.allocate(m, -1)); return true;
      case 1: sameRefusal(() => pool.adoptBeam(s, s), () => model.adoptBeam(m, m)); return true;
      case 2:
        if (this.raws.some((r) => r.dpRank === 0 && r.blockIds.includes(1))) return false;
        sameRefusal(() => pool.deallocateBlocks(0, [1]), () => model.deallocateBlocks(0, [1]));
        return true;
      case 3:
        sameRefusal(() => pool.linearStateCacheOp(s, s.numTokens + 1), () => model.linearStateCacheOp(m, m.numTokens + 1));
        // A placed sequence whose live slot was given back has no state to run a forward on.
        if (this.row.linear && s.dpRank >= 0 && s.linearStateSlotId < 0) {
          sameRefusal(() => pool.linearStateCacheOp(s, s.kvCachedTokens), () => model.linearStateCacheOp(m, m.kvCachedTokens));
          seen.slotlessOps++;
        }
        return true;
      case 4:
        if (this.row.linear) return false;
        sameRefusal(() => pool.releaseLinearStateSlot(s), () => model.releaseLinearStateSlot(m));
        return true;
      case 5: sameRefusal(() => pool.setTime(pool.time - 1), () => model.setTime(model.time - 1)); return true;
      case 6: sameRefusal(() => pool.allocateBlocks(-1), () => model.allocateBlocks(-1)); return true;
      case 7:
        if (hp === null) return false;
        sameRefusal(() => hp.completeOffload({ dpRank: 0, blocks: [] }), () => hm!.completeOffload({ dpRank: 0, blocks: [] }));
        return true;
      case 8:
        if (hp === null) sameRefusal(() => pool.tryAllocate({} as never), () => model.tryAllocate({} as never));
        else sameRefusal(() => hp.updatePrefetchResult(s, []), () => hm!.updatePrefetchResult(m, []));
        return true;
      case 9:
        if (hp === null) sameRefusal(() => pool.cache(s, 1.5), () => model.cache(m, 1.5));
        else sameRefusal(() => hp.allocateChunked(s, 1.5, 1), () => hm!.allocateChunked(m, 1.5, 1));
        return true;
      case 10:
        if (hp === null || this.row.concurrent) sameRefusal(() => (pool.allocate as (a: unknown, n: unknown) => boolean).call(pool, [s], 1), () => model.allocate([m], 1));
        else sameRefusal(() => hp.prefetchFromStorage(s), () => hm!.prefetchFromStorage(m));
        return true;
    }
    return false;
  }

  /** pool.check(), then everything the two sides show must be equal. */
  compare(): void {
    const { pool, model, hp, hm, row } = this;
    pool.check();
    for (const { s, m } of this.seqs) {
      agreeState(
        [s.blockTable, s.sharedBlocks, s.kvCachedTokens, s.dpRank, s.singleBlockId, s.tokens, s.numPromptTokens, s.needsSwap, s.linearStateSlotId, s.linearStateInitialized, s.cacheSalt],
        [m.blockTable, m.sharedBlocks, m.kvCachedTokens, m.dpRank, m.singleBlockId, m.tokens, m.numPromptTokens, m.needsSwap, m.linearSlot, m.linearInit, m.salt],
        'sequence: table, shared, computed, rank, single id, tokens, prompt, swap, linear slot and state, salt',
      );
      if (row.kind === 'composite') agreeState(norm(s.compositeBlockTables), norm(m.tables ?? []), 'composite tables');
      if (hp) agreeState([hp.hostBlockTable(s), hp.hostKvCachedTokens(s)], [hm!.hostBlockTable(m), hm!.hostKvCachedTokens(m)], 'host blocks');
    }
    const live = pool.liveSequences();
    const mlive = model.liveSequences();
    agreeState([live.size, this.seqs.map((t) => live.has(t.s))], [mlive.size, this.seqs.map((t) => mlive.has(t.m))], 'live sequences');
    agreeState(
      [pool.numFreeBlocks(), pool.numUsedBlocks(), pool.numBlocksInPrefixCache(), pool.kvCacheUtilization(), pool.gpuCacheUsage(), pool.time, pool.stats()],
      [model.numFreeBlocks(), model.numUsedBlocks(), model.numBlocksInPrefixCache(), model.kvCacheUtilization(), model.gpuCacheUsage(), model.time, model.stats()],
      'figures',
    );
    for (let r = 0; r < pool.dpSize; r++) {
      const kv = model.kvManager(r);
      agreeState(
        [rankFreeIds(pool, r), rankEvictionOrder(pool, r), rankSingleFreeIds(pool, r), pool.swapTransferInfos(r)],
        [kv instanceof ModelXTensor ? kv.freeIds() : kv.free, kv instanceof ModelXTensor ? [] : kv.prefix.lruOrder(), model.singles[r]!.free, model.swapTransferInfos(r)],
        `rank ${r}: free ids, eviction order, single ids, swaps`,
      );
      if (row.linear) {
        const c = pool.linearStateCache(r);
        const mc = model.linearStateCache(r);
        agreeState([c.slots.freeIds(), c.lruOrder()], [mc.free, mc.lruOrder()], `rank ${r}: linear-state slots`);
      }
      if (row.kind === 'composite') {
        const c = pool.compositeManager(r)!;
        const mc = model.compositeManager(r)!;
        const st = c.subManagerStats();
        agreeState(
          [c.capacityIndex, c.subManagers.map((x) => x.freeIds()), st.map((x) => x.peakUsedBlocks), st.map((x) => x.blocksReleasedOutOfWindow)],
          [mc.capacityIndex, mc.subs.map((x) => x.free), mc.peaks, mc.releasedOut],
          `rank ${r}: sub-managers`,
        );
      }
      if (row.kind === 'xtensor') agreeState((pool.kvManager(r) as XTensorBlockManagerImpl).pageStates(), (kv as ModelXTensor).pageStates(), `rank ${r}: pages`);
      if (hp) agreeState(hostRankState(pool, r), { free: hm!.hosts[r]!.free, evictionOrder: hm!.hosts[r]!.prefix.lruOrder() }, `rank ${r}: host`);
    }
    if (row.linear) agreeState(pool.linearStateStats(), model.linearStateStats(), 'linear-state figures');
    if (hp) {
      agreeState(
        [hp.hostNumFreeBlocks(), hp.hostNumUsedBlocks(), hp.hostNumBlocksInPrefixCache(), hp.hostStats(), hp.hierarchyStats(), hp.hasPendingTransfers(), hp.offloadsInFlight().length],
        [hm!.hostNumFreeBlocks(), hm!.hostNumUsedBlocks(), hm!.hostNumBlocksInPrefixCache(), hm!.hostStats(), hm!.hierarchyStats(), hm!.hasPendingTransfers(), hm!.offloadsInFlight().length],
        'host figures',
      );
    }
  }

  /** Settles everything, finishes every sequence, completes every transfer and gives back raw blocks: both sides hold nothing. */
  finish(): void {
    const { pool, model, hp, hm } = this;
    for (const b of this.batches.splice(0)) this.settle(b, false);
    for (const { s, m } of this.seqs) {
      pool.deallocate(s);
      model.deallocate(m);
    }
    if (hp) {
      this.take();
      for (const [p, m] of this.plans.splice(0)) {
        hp.completeOffload(p, true);
        hm!.completeOffload(m, true);
      }
    }
    for (const a of this.raws.splice(0)) {
      pool.deallocateBlocks(a.dpRank, a.blockIds);
      model.deallocateBlocks(a.dpRank, [...a.blockIds]);
    }
    this.compare();
    expect(pool.numUsedBlocks().every((u) => u === (this.row.kind === 'xtensor' ? 1 : 0))).toBe(true);
    if (hp) expect(hp.hostNumUsedBlocks().every((u) => u === 0)).toBe(true);
    this.tally();
  }

  private tally(): void {
    const { pool, hp, row } = this;
    for (const st of pool.stats()) {
      seen.evictions += st.blocksEvicted;
      if (row.policy === 'priority') seen.priorityEvictions += st.blocksEvicted;
      if (row.kind === 'xtensor') seen.pageFailures += st.allocationFailures;
    }
    for (let r = 0; r < pool.dpSize; r++) {
      seen.swaps += pool.swapTransferInfos(r).length;
      if (row.kind === 'composite') seen.windowReleases += pool.compositeManager(r)!.subManagerStats().reduce((a, x) => a + x.blocksReleasedOutOfWindow, 0);
    }
    if (row.linear) seen.trimmedBlocks += pool.linearStateStats().reduce((a, x) => a + x.trimmedBlocks, 0);
    if (hp) {
      const hits = hp.hierarchyStats().reduce((a, x) => a + x.hostHitBlocks, 0);
      seen.hostHits += hits;
      if (row.salt) seen.saltedHostHits += hits;
    }
  }
}

function runRow(row: Row, sh: Shape, ops: Op[]): void {
  const run = new Run(row, sh);
  try {
    for (const op of ops) {
      run.apply(op);
      run.compare();
    }
    run.finish();
    countSteps(ops.length);
  } finally {
    run.pool.dispose();
  }
}

describe('every supported combination vs the reference model', () => {
  for (const row of ROWS) {
    it(rowName(row), () => {
      fc.assert(
        fc.property(shapeArb(row), fc.array(opArb(row), { minLength: 20, maxLength: 120, size: 'max' }), (sh, ops) => runRow(row, sh, [...warmUp(row), ...ops])),
        { numRuns: soak(RUNS_PER_ROW) },
      );
      seen.rows.add(rowName(row));
    });
  }

  it('reached every path: refusals, failures, beams, evictions, checkpoints, the host tier, the store, windows, pages', () => {
    expect(seen.rows.size).toBe(ROWS.length);
    expect([...seen.refusals].sort((a, b) => a - b)).toEqual(Array.from({ length: BAD_CALLS }, (_, i) => i));
    for (const [k, v] of Object.entries(seen)) if (typeof v === 'number') expect(v, k).toBeGreaterThan(0);
  });
});

/** Memory of a core before and after: a refused pool takes none (the next region comes out where it would have). */
function probe(core: CoreInstance): number {
  const p = core.alloc(64);
  core.release(p);
  return p;
}

describe('every refused combination', () => {
  for (const r of REFUSALS) {
    it(`${r.name}: refused at construction, changing nothing`, () => {
      const o = { numBlocks: 16, blockSize: 4, ...r.options, ...(r.host && { hostNumBlocks: 16 }) };
      const before = [probe(plainCore()), probe(sharedCore())];
      const make = () => (r.host ? new HierarchyBlockManagerPool(o as never) : new BlockManagerPool(o as never));
      expect(make).toThrow(r.reason);
      expect(sameRefusal(make, () => (r.host ? new ModelHierarchyPool(o as never) : new ModelBlockManagerPool(o as never)))).toBe(r.error);
      expect([probe(plainCore()), probe(sharedCore())]).toEqual(before);
    });
  }
});

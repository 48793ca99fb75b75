// The replay kernel (the closed-loop trace replay that pins ids, hits and
// evictions), written a second time, from its rules, over the model pools.
// It shares no code with the library's loop: its own tokens, its own FIFO,
// and an id checksum taken where the rules define it -- every id popped off
// the free stack -- instead of from the block tables. The rules, in short:
// 1. request r's prompt token p is hash_ids[p / 512] * 512 + p % 512, its
//    output token i is 2^30 + ((r * 65536 + i) mod 2^30);
// 2. with `maxRunning` sequences running, finish the oldest (cache its
//    computed full blocks, then release them in order);
// 3. prefill: allocate; on failure finish the oldest and retry, or count the
//    request rejected when nothing runs; record the shared blocks;
// 4. decode: append a token (the computed count is every token but the
//    newest), allocate for all tokens, on failure finish the oldest and
//    retry, or stop decoding (truncated) when nothing runs; with
//    publishAfterPrefill, cache the prompt after the first decode allocation;
// 5. at the end, finish every running sequence, oldest first.
// Modes: an eviction policy ('priority' marks generated tokens with 10),
// linear state (one restore-and-save batch per prefill, on any pool), a
// composite pool (sliding window plus full sub-managers; figures of the
// capacity one), a host tier (every transfer completes at once) with an
// optional KV-cache store behind it.

import type { ModelBlockManager } from './block-manager-impl.js';
import { ModelBlockManagerPool } from './block-manager-pool.js';
import { ModelHierarchyPool } from './hierarchy-block-manager-pool.js';
import type { ModelEvictionPolicy } from './prefix-cache.js';
import { ModelSequence } from './sequence.js';

/** A trace line (Mooncake JSONL): equal hash ids mean equal 512-token chunks. */
export interface ModelTraceRequest {
  inputLength: number;
  outputLength: number;
  hashIds: ArrayLike<number>;
}

export interface ModelReplayOptions {
  blockSize: number;
  numBlocks: number;
  maxRunning: number;
  /** Data-parallel ranks of the plain pool (default 1, as in the rules; ids popped on any rank count). */
  dpSize?: number;
  publishAfterPrefill?: boolean;
  limit?: number;
  evictionPolicy?: ModelEvictionPolicy;
  linearStateSlots?: number;
  /** A composite pool: a window of this many tokens, then full sub-managers of these ratios (default [1]). */
  slidingWindow?: number;
  compressRatios?: number[];
  hostBlocks?: number;
  /** With hostBlocks: a KV-cache store of this many blocks (written by offloads, read by prefetches before each prefill attempt). */
  storeBlocks?: number;
}

export interface ModelReplayResult {
  requests: number;
  rejected: number;
  truncated: number;
  promptBlocks: number;
  matchedBlocks: number;
  hitRate: number;
  evictedBlocks: number;
  allocatedBlocks: number;
  idChecksum: number;
  freeBlocksAtEnd: number;
  cachedBlocksAtEnd: number;
  linearState?: { checkpointHits: number; checkpointsSaved: number; checkpointEvictions: number; trimmedBlocks: number };
  subManagers?: Array<{ kind: string; blockSize: number; numBlocks: number; peakUsedBlocks: number; allocatedBlocks: number; releasedBlocks: number }>;
  hostTier?: {
    hostBlocks: number; deviceHitBlocks: number; hostHitBlocks: number; blocksLoaded: number; blocksOffloaded: number; hostCachedBlocksAtEnd: number;
    store?: { storeBlocks: number; blocksWritten: number; blocksRequested: number; blocksDelivered: number; blocksEvicted: number; blocksAtEnd: number };
  };
}

const CHUNK = 512;
const OUT = 2 ** 30;

export function modelPromptTokens(req: ModelTraceRequest): number[] {
  const t = new Array<number>(req.inputLength);
  for (let p = 0; p < req.inputLength; p++) t[p] = req.hashIds[Math.floor(p / CHUNK)]! * CHUNK + (p % CHUNK);
  return t;
}

export function modelOutputToken(r: number, i: number): number {
  return OUT + ((r * 65536 + i) % OUT);
}

/** The pool operations the loop needs, whatever the mode. */
interface Pool {
  newSequence(tokens: number[], r: number): ModelSequence;
  allocate(s: ModelSequence, numTokens?: number): boolean;
  publish(s: ModelSequence): void;
  finish(s: ModelSequence): void;
  prefilled(s: ModelSequence): void;
  /** The managers whose pops make the id figures. */
  readonly ids: ModelBlockManager[];
  evicted(): number;
  free(): number;
  cached(): number;
  extra(): Partial<ModelReplayResult>;
}

type LinearStateFigures = NonNullable<ModelReplayResult['linearState']>;

/** The linear-state rule of a prefill, on any model pool with linear state, and its figures. */
function linearStateRule(p: ModelBlockManagerPool, B: number) {
  let hits = 0;
  let saved = 0;
  return {
    prefilled(s: ModelSequence): void {
      // One batch: restore at the shared boundary h (h > 0), save at every boundary after it; committed at once.
      const h = s.sharedBlocks;
      const full = Math.floor(s.numTokens / B);
      if (full === 0) return;
      const keys = p.prefixKeys(s, full);
      const ops = [];
      if (h > 0) ops.push({ liveSlot: s.linearSlot, restore: keys[h - 1]! });
      for (let k = h + 1; k <= full; k++) ops.push({ liveSlot: s.linearSlot, save: keys[k - 1]! });
      if (ops.length === 0) return;
      const c = p.linearStateCache(s.dpRank);
      const batch = c.resolve(ops);
      if (h > 0 && batch.restoreSrc[0]! > 0) hits++;
      const before = c.counters.checkpointsCommitted;
      c.commitBatch(batch);
      saved += c.counters.checkpointsCommitted - before;
    },
    figures: (): LinearStateFigures => ({
      checkpointHits: hits,
      checkpointsSaved: saved,
      checkpointEvictions: p.linearStateStats().reduce((a, c) => a + c.checkpointsEvicted, 0),
      trimmedBlocks: p.linearStateStats().reduce((a, c) => a + c.trimmedBlocks, 0),
    }),
  };
}

/** Pool options every mode shares: linear state when asked for. */
function linearOptions(o: ModelReplayOptions) {
  return o.linearStateSlots !== undefined ? { enableLinearState: true, linearStateNumSlots: o.linearStateSlots } : {};
}

/** The priority replay's rule: generated tokens get priority 10, the prompt keeps 35. */
function newSequence(p: ModelBlockManagerPool, o: ModelReplayOptions, tokens: number[]): ModelSequence {
  const s = p.newSequence(tokens);
  if (o.evictionPolicy === 'priority') p.setRetention(s, [{ start: tokens.length, priority: 10 }]);
  return s;
}

function plainPool(o: ModelReplayOptions): Pool {
  const p = new ModelBlockManagerPool({
    numBlocks: o.numBlocks, blockSize: o.blockSize, evictionPolicy: o.evictionPolicy, dpSize: o.dpSize ?? 1, ...linearOptions(o),
  });
  const linear = o.linearStateSlots !== undefined ? linearStateRule(p, o.blockSize) : null;
  return {
    newSequence: (tokens) => newSequence(p, o, tokens),
    allocate: (s, n) => p.allocate(s, n),
    publish: (s) => p.cache(s),
    finish: (s) => p.deallocate(s),
    prefilled: (s) => linear?.prefilled(s),
    ids: p.managers,
    evicted: () => p.managers.reduce((a, m) => a + m.counters.blocksEvicted, 0),
    free: () => p.numFreeBlocks().reduce((a, b) => a + b, 0),
    cached: () => p.numBlocksInPrefixCache().reduce((a, b) => a + b, 0),
    extra: () => (linear ? { linearState: linear.figures() } : {}),
  };
}

function compositePool(o: ModelReplayOptions): Pool {
  const ratios = o.compressRatios ?? [1];
  const p = new ModelBlockManagerPool({
    numBlocks: o.numBlocks, blockSize: o.blockSize, dpSize: o.dpSize ?? 1,
    managerTypes: ['sliding-window', ...ratios.map(() => 'full' as const)], compressRatios: [0, ...ratios],
    slidingWindowSize: o.slidingWindow!, maxSeqsPerBatch: o.maxRunning, ...linearOptions(o),
  });
  const ranks = Array.from({ length: o.dpSize ?? 1 }, (_, r) => p.compositeManager(r)!);
  const m = ranks[0]!;
  const linear = o.linearStateSlots !== undefined ? linearStateRule(p, o.blockSize) : null;
  const sum = (f: (c: typeof m, i: number) => number, i: number) => ranks.reduce((a, c) => a + f(c, i), 0);
  return {
    newSequence: (tokens) => p.newSequence(tokens),
    allocate: (s, n) => p.allocate(s, n),
    publish: () => {}, // no prefix cache
    finish: (s) => p.deallocate(s),
    prefilled: (s) => linear?.prefilled(s),
    ids: ranks.map((c) => c.subs[c.capacityIndex]!),
    evicted: () => 0,
    free: () => ranks.reduce((a, c) => a + c.subs[c.capacityIndex]!.numFreeBlocks(), 0),
    cached: () => 0,
    extra: () => ({
      subManagers: m.specs.map((spec, i) => ({
        kind: spec.kind, blockSize: spec.blockSize, numBlocks: spec.numBlocks,
        peakUsedBlocks: sum((c) => c.peaks[i]!, i),
        allocatedBlocks: sum((c) => c.subs[i]!.counters.blocksAllocated, i),
        releasedBlocks: sum((c) => c.releasedOut[i]!, i),
      })),
      ...(linear && { linearState: linear.figures() }),
    }),
  };
}

/**
 * The KV-cache store of the host-tier replay's rule: at most `capacity` chain
 * keys, least recently used out first. Kept as a stamp per key and a queue of
 * (key, stamp) touches; a queue entry whose stamp is not the key's is stale.
 */
class ModelKvStore {
  readonly stamps = new Map<string, number>();
  private queue: Array<[string, number]> = [];
  private head = 0;
  private clock = 0;
  written = 0;
  requested = 0;
  delivered = 0;
  evicted = 0;
  constructor(readonly capacity: number) {}
  private touch(key: string): void {
    this.stamps.set(key, ++this.clock);
    this.queue.push([key, this.clock]);
  }
  write(key: string): void {
    this.written++;
    if (!this.stamps.has(key) && this.stamps.size === this.capacity) {
      for (;;) {
        const [k, t] = this.queue[this.head++]!;
        if (this.stamps.get(k) !== t) continue;
        this.stamps.delete(k);
        this.evicted++;
        break;
      }
      if (this.head > 4096 && this.head * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.head);
        this.head = 0;
      }
    }
    this.touch(key);
  }
  /** The leading keys it holds, each touched. */
  deliver(keys: string[]): number {
    this.requested += keys.length;
    let n = 0;
    while (n < keys.length && this.stamps.has(keys[n]!)) this.touch(keys[n++]!);
    this.delivered += n;
    return n;
  }
}

function hostTierPool(o: ModelReplayOptions): Pool {
  const p = new ModelHierarchyPool({
    numBlocks: o.numBlocks, blockSize: o.blockSize, evictionPolicy: o.evictionPolicy, dpSize: o.dpSize ?? 1,
    hostNumBlocks: o.hostBlocks!, ...linearOptions(o), ...(o.storeBlocks !== undefined && { enableKvcacheStore: true }),
  });
  const store = o.storeBlocks !== undefined ? new ModelKvStore(o.storeBlocks) : null;
  const linear = o.linearStateSlots !== undefined ? linearStateRule(p, o.blockSize) : null;
  // The worker copies everything planned at once; offloaded blocks are written to the store too.
  const complete = () => {
    for (const t of p.takeTransfers()) {
      if (!t.offload) continue;
      if (store) for (const b of t.offload.blocks) store.write(b.key);
      p.completeOffload(t.offload, true);
    }
  };
  let matched = 0;
  const stat = (k: 'hostHitBlocks' | 'blocksLoaded' | 'blocksOffloaded') => p.hierarchyStats().reduce((a, r) => a + r[k], 0);
  return {
    newSequence: (tokens) => newSequence(p, o, tokens),
    allocate(s, n) {
      if (store && n === undefined) {
        // A prefill attempt: prefetch from the store first; a failed attempt gives back what the prefetch took.
        const plan = p.prefetchFromStorage(s);
        if (plan) p.updatePrefetchResult(s, store.deliver(plan.blocks.map((b) => b.key)));
        const ok = p.allocate(s);
        if (!ok && s.dpRank >= 0) p.deallocate(s);
        complete();
        return ok;
      }
      const ok = p.allocate(s, n);
      complete();
      return ok;
    },
    publish: (s) => p.cache(s),
    finish(s) {
      p.deallocate(s);
      complete();
    },
    prefilled(s) {
      matched += s.sharedBlocks;
      linear?.prefilled(s);
    },
    ids: p.managers,
    evicted: () => p.managers.reduce((a, m) => a + m.counters.blocksEvicted, 0),
    free: () => p.numFreeBlocks().reduce((a, b) => a + b, 0),
    cached: () => p.numBlocksInPrefixCache().reduce((a, b) => a + b, 0),
    extra: () => ({
      hostTier: {
        hostBlocks: o.hostBlocks!, deviceHitBlocks: matched, hostHitBlocks: stat('hostHitBlocks'),
        blocksLoaded: stat('blocksLoaded'), blocksOffloaded: stat('blocksOffloaded'),
        hostCachedBlocksAtEnd: p.hostNumBlocksInPrefixCache().reduce((a, b) => a + b, 0),
        ...(store && {
          store: {
            storeBlocks: store.capacity, blocksWritten: store.written, blocksRequested: store.requested,
            blocksDelivered: store.delivered, blocksEvicted: store.evicted, blocksAtEnd: store.stamps.size,
          },
        }),
      },
      ...(linear && { linearState: linear.figures() }),
    }),
  };
}

/** Replays `trace` on a fresh model pool of the mode `o` names; the result object of the replay (without timings). */
export function modelReplay(trace: readonly ModelTraceRequest[], o: ModelReplayOptions): ModelReplayResult {
  const pool = o.slidingWindow !== undefined ? compositePool(o) : o.hostBlocks !== undefined ? hostTierPool(o) : plainPool(o);
  const B = o.blockSize;
  let allocatedBlocks = 0;
  let idChecksum = 0;
  for (const m of pool.ids) {
    m.onPop = (id) => {
      allocatedBlocks++;
      idChecksum = (Math.imul(idChecksum, 31) + id) >>> 0; // (h * 31 + id) mod 2^32
    };
  }
  const running: ModelSequence[] = [];
  const finishOldest = () => pool.finish(running.shift()!);
  const n = Math.min(trace.length, o.limit ?? Infinity);
  let rejected = 0;
  let truncated = 0;
  let promptBlocks = 0;
  let matchedBlocks = 0;
  requests: for (let r = 0; r < n; r++) {
    const req = trace[r]!;
    const L = req.inputLength;
    const s = pool.newSequence(modelPromptTokens(req), r);
    while (running.length >= o.maxRunning) finishOldest();
    while (!pool.allocate(s)) {
      if (running.length === 0) {
        rejected++;
        continue requests;
      }
      finishOldest();
    }
    promptBlocks += Math.floor(L / B);
    matchedBlocks += s.sharedBlocks;
    pool.prefilled(s);
    s.kvCachedTokens = L;
    for (let i = 0; i < req.outputLength; i++) {
      s.appendToken(modelOutputToken(r, i));
      s.kvCachedTokens = s.numTokens - 1;
      let ok = true;
      while (!pool.allocate(s, s.numTokens)) {
        if (running.length === 0) {
          ok = false;
          break;
        }
        finishOldest();
      }
      if (!ok) {
        truncated++;
        break;
      }
      if (i === 0 && o.publishAfterPrefill) pool.publish(s);
    }
    running.push(s);
  }
  while (running.length > 0) finishOldest();
  return {
    requests: n,
    rejected,
    truncated,
    promptBlocks,
    matchedBlocks,
    hitRate: promptBlocks === 0 ? 0 : Math.round((matchedBlocks / promptBlocks) * 1e6) / 1e6,
    evictedBlocks: pool.evicted(),
    allocatedBlocks,
    idChecksum,
    freeBlocksAtEnd: pool.free(),
    cachedBlocksAtEnd: pool.cached(),
    ...pool.extra(),
  };
}

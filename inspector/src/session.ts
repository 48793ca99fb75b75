// One replay run for the inspector: a BlockManagerPool, the stepping replay
// kernel over it, the block states read in bulk, and the time series the
// plots draw. No DOM here, so it runs (and is tested) in Node as well.

import {
  BlockState,
  generateWorkload,
  ReplayStepper,
  type EvictionPolicy,
  type ReplayRun,
  type ReplaySequence,
  type Sequence,
  type TraceRequest,
} from '../../bindings/index.js';
import { openReplay, parseReplayOptions, replayConfig, type OpenReplay, type ReplayConfig } from '../../bindings/replay/replay.js';
import type { HierarchyBlockManagerPool } from '../../bindings/pool/hierarchy-block-manager-pool.js';
import type { PoolManager } from '../../bindings/managers/pool-manager.js';

/** The replay's options (the names of `kvpool replay`'s flags); 0 turns a mode off. */
export interface SessionOptions {
  numBlocks: number;
  blockSize: number;
  dpSize: number;
  maxRunning: number;
  /** Requests of the built-in workload (ignored with a trace). */
  requests: number;
  seed: number;
  publishAfterPrefill: boolean;
  eviction: EvictionPolicy;
  /** Host-tier blocks per rank (0: none). */
  hostBlocks: number;
  /** Tokens of a sliding window: a composite pool (0: none). */
  slidingWindow: number;
}

/** `kvpool replay`'s defaults, so the same workload shows the same hit rate here and there. */
export const DEFAULT_OPTIONS: SessionOptions = {
  numBlocks: 65536,
  blockSize: 16,
  dpSize: 1,
  maxRunning: 32,
  requests: 2000,
  seed: 1024,
  publishAfterPrefill: false,
  eviction: 'lru',
  hostBlocks: 0,
  slidingWindow: 0,
};

/** One grid of blocks: a rank's device manager (a composite rank's capacity sub-manager) or its host tier. */
export interface Panel {
  title: string;
  rank: number;
  manager: PoolManager;
  /** Which of a sequence's tables holds this panel's ids. */
  table(seq: Sequence): ArrayLike<number>;
}

export const SERIES = ['step', 'free', 'used', 'cached', 'hitRate', 'recentHitRate', 'evicted'] as const;
export type SeriesName = (typeof SERIES)[number];

/**
 * Samples over time, one column per series, bounded: when full, every other
 * row is dropped and from then on only every `stride`-th sample is kept.
 */
export class Samples {
  readonly columns: Record<SeriesName, Float64Array>;
  length = 0;
  stride = 1;
  private offered = 0;
  constructor(readonly capacity = 4096) {
    this.columns = Object.fromEntries(SERIES.map((k) => [k, new Float64Array(capacity)])) as Record<SeriesName, Float64Array>;
  }
  /** Counts a sample offered; true when it is to be kept (then `add` it). */
  offer(): boolean {
    return this.offered++ % this.stride === 0;
  }
  add(row: Record<SeriesName, number>): void {
    if (this.length === this.capacity) {
      for (const k of SERIES) {
        const c = this.columns[k];
        for (let i = 0; i < this.capacity / 2; i++) c[i] = c[2 * i]!;
      }
      this.length = this.capacity / 2;
      this.stride *= 2;
    }
    for (const k of SERIES) this.columns[k][this.length] = row[k];
    this.length++;
  }
}

const RECENT = 50;

/** The options as replay() takes them, checked as replay() checks them: the same messages for a bad value. */
export function checkSessionOptions(o: SessionOptions): ReturnType<typeof parseReplayOptions> {
  return parseReplayOptions({
    numBlocks: o.numBlocks, blockSize: o.blockSize, dpSize: o.dpSize, maxRunning: o.maxRunning, seed: o.seed, requests: o.requests,
    publishAfterPrefill: o.publishAfterPrefill, eviction: o.eviction, hostBlocks: o.hostBlocks,
    ...(o.slidingWindow > 0 && { slidingWindow: o.slidingWindow }),
  });
}

export class Session {
  private readonly open: OpenReplay;
  readonly stepper: ReplayStepper<ReplaySequence>;
  /** What the grids show: every rank's device blocks, then (host tier) every rank's host blocks. */
  readonly panels: Panel[];
  /** Block state codes per panel, refreshed by `refresh()`. */
  readonly states: Uint8Array[];
  /** Ids in each state per panel (index = BlockState code), from `refresh()`. */
  readonly counts: Int32Array[];
  readonly samples = new Samples();
  private readonly recent: Array<[number, number]> = [];
  private recentPrompt = 0;
  private recentMatched = 0;

  readonly trace: readonly TraceRequest[];
  readonly traceName: string;
  /** The configuration `result()` echoes, as `kvpool replay` would print it. */
  readonly config: ReplayConfig;

  /** A session over `trace` (named `traceName`), or over the built-in workload the options describe. */
  constructor(
    readonly options: SessionOptions,
    trace?: readonly TraceRequest[],
    traceName?: string,
  ) {
    const o = options;
    const parsed = checkSessionOptions(o);
    this.trace = trace ?? generateWorkload({ requests: parsed.requests, seed: parsed.seed });
    this.traceName = traceName ?? `built-in workload (${this.trace.length} requests, seed ${o.seed})`;
    this.config = replayConfig(parsed, trace === undefined ? undefined : this.traceName);
    this.open = openReplay(parsed);
    try {
      this.stepper = new ReplayStepper(this.open.target, this.trace, { blockSize: o.blockSize, maxRunning: o.maxRunning, publishAfterPrefill: o.publishAfterPrefill });
    } catch (e) {
      this.open.pool.dispose();
      throw e;
    }
    const pool = this.open.pool;
    const composite = this.open.mode === 'composite';
    const device = pool.managers.map((manager, rank): Panel => ({
      title: `dp rank ${rank}${composite ? ' · full sub-manager' : ''}`,
      rank,
      manager,
      table: composite ? (q) => q.compositeBlockTables[pool.compositeManager(rank)!.capacityIndex]! : (q) => q.blockTable,
    }));
    const host = this.open.mode === 'host-tier' ? (pool as HierarchyBlockManagerPool) : null;
    const hosts = (host?.hosts ?? []).map((manager, rank): Panel => ({ title: `host tier · rank ${rank}`, rank, manager, table: (q) => host!.hostBlockTable(q) }));
    this.panels = [...device, ...hosts];
    this.states = this.panels.map((p) => new Uint8Array(p.manager.numBlocks));
    this.counts = this.panels.map(() => new Int32Array(5));
    this.sample();
    this.refresh();
  }

  get pool() {
    return this.open.pool;
  }

  get mode() {
    return this.open.mode;
  }

  /** The running sequences, oldest first, as the pool's Sequences. */
  running(): Sequence[] {
    return this.stepper.running().map((s) => this.open.sequenceOf(s));
  }

  /** The replay's result so far, as `replay()` reports it (the whole result once finished). */
  result(): ReplayRun {
    return this.open.finish(this.stepper.result(), this.config);
  }

  get done(): number {
    return this.stepper.done;
  }

  get finished(): boolean {
    return this.stepper.finished;
  }

  /** Runs up to `n` steps, stopping early after `budgetMs`; returns the steps taken. */
  step(n = 1, budgetMs = Infinity): number {
    const t0 = performance.now();
    let k = 0;
    while (k < n) {
      const s = this.stepper.step();
      if (!s) break;
      k++;
      if (s.placed) {
        const prompt = Math.floor(this.trace[s.request]!.inputLength / this.options.blockSize);
        this.recent.push([prompt, s.matchedBlocks]);
        this.recentPrompt += prompt;
        this.recentMatched += s.matchedBlocks;
        if (this.recent.length > RECENT) {
          const [p, m] = this.recent.shift()!;
          this.recentPrompt -= p;
          this.recentMatched -= m;
        }
      }
      this.sample();
      if (performance.now() - t0 > budgetMs) break;
    }
    return k;
  }

  private sample(): void {
    if (!this.samples.offer()) return;
    const r = this.stepper.result();
    const used = this.pool.numUsedBlocks().reduce((a, b) => a + b, 0);
    const total = (this.options.numBlocks - 1) * this.options.dpSize;
    this.samples.add({
      step: this.stepper.done + (this.stepper.finished ? 1 : 0),
      free: r.freeBlocksAtEnd,
      used,
      // Only the prefix cache holds these (the grid's "cached"); free + used + cached = all blocks.
      cached: total - r.freeBlocksAtEnd - used,
      hitRate: r.hitRate,
      recentHitRate: this.recentPrompt === 0 ? 0 : this.recentMatched / this.recentPrompt,
      evicted: r.evictedBlocks,
    });
  }

  /** Reads every panel's block states in one pass each and counts them. */
  refresh(): void {
    for (let k = 0; k < this.panels.length; k++) {
      const st = this.panels[k]!.manager.blockStates(this.states[k]);
      const c = this.counts[k]!;
      c.fill(0);
      for (let i = 0; i < st.length; i++) c[st[i]!]!++;
    }
  }

  /** Who holds block `id` of panel `panel`: the running requests and the prefix cache. */
  holders(panel: number, id: number): { requests: number[]; prefixCache: boolean } {
    const p = this.panels[panel]!;
    const requests: number[] = [];
    const seqs = this.running();
    const reqs = this.stepper.runningRequests();
    let held = 0;
    for (let i = 0; i < seqs.length; i++) {
      const s = seqs[i]!;
      if (s.dpRank !== p.rank) continue;
      const t = p.table(s);
      let n = 0;
      for (let j = 0; j < t.length; j++) if (t[j] === id) n++;
      if (n > 0) {
        requests.push(reqs[i]!);
        held += n;
      }
    }
    const state = this.states[panel]![id];
    const prefixCache = state === BlockState.Cached || (state !== BlockState.Free && state !== BlockState.Padding && p.manager.refCount(id) > held);
    return { requests, prefixCache };
  }

  dispose(): void {
    this.open.pool.dispose();
  }
}

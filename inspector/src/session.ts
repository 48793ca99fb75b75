// One replay run for the inspector: a BlockManagerPool, the stepping replay
// kernel over it, the block states read in bulk, and the time series the
// plots draw. No DOM here, so it runs (and is tested) in Node as well.

import {
  BlockManagerPool,
  BlockState,
  generateWorkload,
  PoolReplayTarget,
  ReplayStepper,
  type Sequence,
  type TraceRequest,
} from '../../bindings/index.js';

export interface SessionOptions {
  numBlocks: number;
  blockSize: number;
  dpSize: number;
  maxRunning: number;
  /** Requests of the built-in workload (ignored with a trace). */
  requests: number;
  seed: number;
  publishAfterPrefill: boolean;
}

export const DEFAULT_OPTIONS: SessionOptions = {
  numBlocks: 4096,
  blockSize: 16,
  dpSize: 2,
  maxRunning: 32,
  requests: 2000,
  seed: 1024,
  publishAfterPrefill: false,
};

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

export class Session {
  readonly pool: BlockManagerPool;
  readonly stepper: ReplayStepper<Sequence>;
  /** Block state codes per rank, refreshed by `refresh()`. */
  readonly states: Uint8Array[];
  /** Ids in each state per rank (index = BlockState code), from `refresh()`. */
  readonly counts: Int32Array[];
  readonly samples = new Samples();
  private readonly recent: Array<[number, number]> = [];
  private recentPrompt = 0;
  private recentMatched = 0;

  constructor(
    readonly options: SessionOptions,
    readonly trace: readonly TraceRequest[] = generateWorkload({ requests: options.requests, seed: options.seed }),
    readonly traceName = `built-in workload (${trace.length} requests, seed ${options.seed})`,
  ) {
    const o = options;
    this.pool = new BlockManagerPool({ numBlocks: o.numBlocks, blockSize: o.blockSize, dpSize: o.dpSize, seed: o.seed });
    try {
      this.stepper = new ReplayStepper(new PoolReplayTarget(this.pool), trace, {
        blockSize: o.blockSize,
        maxRunning: o.maxRunning,
        publishAfterPrefill: o.publishAfterPrefill,
      });
    } catch (e) {
      this.pool.dispose();
      throw e;
    }
    this.states = this.pool.managers.map((m) => new Uint8Array(m.numBlocks));
    this.counts = this.pool.managers.map(() => new Int32Array(5));
    this.sample();
    this.refresh();
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

  /** Reads every rank's block states in one pass each and counts them. */
  refresh(): void {
    for (let r = 0; r < this.states.length; r++) {
      const st = this.pool.managers[r]!.blockStates(this.states[r]);
      const c = this.counts[r]!;
      c.fill(0);
      for (let i = 0; i < st.length; i++) c[st[i]!]!++;
    }
  }

  /** Who holds block `id` of rank `rank`: the running requests and the prefix cache. */
  holders(rank: number, id: number): { requests: number[]; prefixCache: boolean } {
    const requests: number[] = [];
    const seqs = this.stepper.running();
    const reqs = this.stepper.runningRequests();
    let held = 0;
    for (let i = 0; i < seqs.length; i++) {
      const s = seqs[i]!;
      if (s.dpRank !== rank) continue;
      const t = s.blockTable;
      let n = 0;
      for (let j = 0; j < t.length; j++) if (t[j] === id) n++;
      if (n > 0) {
        requests.push(reqs[i]!);
        held += n;
      }
    }
    const state = this.states[rank]![id];
    const prefixCache =
      state === BlockState.Cached || (state !== BlockState.Free && state !== BlockState.Padding && this.pool.managers[rank]!.refCount(id) > held);
    return { requests, prefixCache };
  }

  dispose(): void {
    this.pool.dispose();
  }
}

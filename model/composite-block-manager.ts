// Model of CompositeBlockManager: sub-managers with their own pools, one
// table per sub-manager, all-or-nothing growth, then the window release.
// Mirrors bindings/managers/composite-block-manager.ts, written for clarity.

import { ModelBlockManager } from './block-manager-impl.js';
import { ModelSlidingWindowBlockManager } from './sliding-window-block-manager.js';
import { modelInt } from './validate.js';

export type ModelKind = 'full' | 'sliding-window';

export interface ModelCompositeOptions {
  blockSize: number;
  numBlocks: number;
  kinds: ModelKind[];
  ratios?: number[];
  window?: number;
  maxSeqsPerBatch?: number;
  maxTokensPerBatch?: number;
  /** Window blocks one sequence keeps (default (window - 1) / B + 1). */
  swaBlocksPerSeq?: number;
  /** Each sub-manager's blocks, overriding the layout rules. */
  subManagerBlocks?: number[];
}

export interface ModelSubSpec {
  kind: ModelKind;
  blockSize: number;
  numBlocks: number;
}

/** The layout rules of docs/composite.md (layout), restated. */
export function modelLayout(o: ModelCompositeOptions): ModelSubSpec[] {
  return o.kinds.map((kind, i) => {
    const ratio = o.ratios?.[i] ?? 1;
    const blockSize = o.blockSize * Math.max(ratio, 1);
    const override = o.subManagerBlocks?.[i];
    if (override !== undefined) return { kind, blockSize, numBlocks: override };
    if (kind === 'full') return { kind, blockSize, numBlocks: Math.floor(o.numBlocks / ratio) };
    const B = blockSize;
    const W = o.window!;
    const perSeq = o.swaBlocksPerSeq ?? Math.floor((W - 1) / B) + 1;
    const maxSeqs = Math.max(o.maxSeqsPerBatch ?? 256, 1);
    const maxTokens = Math.max(o.maxTokensPerBatch ?? 20480, 1);
    return { kind, blockSize: B, numBlocks: perSeq * maxSeqs + Math.ceil(maxTokens / B) + maxSeqs + 2 };
  });
}

export class ModelCompositeBlockManager {
  /** Base tokens per block. */
  readonly blockSize: number;
  readonly specs: ModelSubSpec[];
  readonly subs: ModelBlockManager[];
  readonly capacityIndex: number;
  readonly peaks: number[];
  readonly releasedOut: number[];

  constructor(o: ModelCompositeOptions) {
    this.blockSize = o.blockSize;
    this.specs = modelLayout(o);
    this.subs = this.specs.map((s) =>
      s.kind === 'full'
        ? new ModelBlockManager({ numBlocks: s.numBlocks, blockSize: s.blockSize, enablePrefixCache: false })
        : new ModelSlidingWindowBlockManager(s.numBlocks, s.blockSize, o.window!),
    );
    let cap = -1;
    this.specs.forEach((s, i) => {
      if (s.kind === 'full' && (cap < 0 || s.blockSize < this.specs[cap]!.blockSize)) cap = i;
    });
    this.capacityIndex = cap < 0 ? 0 : cap;
    this.peaks = this.specs.map(() => 0);
    this.releasedOut = this.specs.map(() => 0);
  }

  /** Tables this manager made (tables of another manager are refused). */
  private readonly made = new WeakSet<number[][]>();

  newTables(): number[][] {
    const t = this.specs.map((): number[] => []);
    this.made.add(t);
    return t;
  }

  /** A TypeError for something that is not a set of tables, an Error for another manager's. */
  own(tables: unknown): number[][] {
    if (!Array.isArray(tables)) throw new TypeError('model: not block tables');
    if (!this.made.has(tables)) throw new Error('model: tables of another composite manager');
    return tables;
  }

  allocate(tables: number[][], numTokens: number, cached = 0): boolean {
    this.own(tables);
    modelInt('numTokens', numTokens);
    modelInt('kvCachedTokens', cached);
    const need = this.specs.map((s, i) => Math.max(0, Math.ceil(numTokens / s.blockSize) - tables[i]!.length));
    if (need.some((n, i) => n > this.subs[i]!.numFreeBlocks())) return false;
    need.forEach((n, i) => {
      if (n === 0) return;
      tables[i]!.push(...this.subs[i]!.allocate(n)!);
      // No prefix cache: every id off the free stack is used.
      this.peaks[i] = Math.max(this.peaks[i]!, this.subs[i]!.numBlocks - 1 - this.subs[i]!.free.length);
    });
    this.releaseOutOfWindow(tables, cached);
    return true;
  }

  releaseOutOfWindow(tables: number[][], cached: number): number {
    this.own(tables);
    modelInt('kvCachedTokens', cached);
    let n = 0;
    this.subs.forEach((m, i) => {
      if (m instanceof ModelSlidingWindowBlockManager) {
        const k = m.releaseOutOfWindow(tables[i]!, cached);
        this.releasedOut[i]! += k;
        n += k;
      }
    });
    return n;
  }

  deallocate(tables: number[][]): void {
    this.own(tables);
    this.subs.forEach((m, i) => m.deallocate(tables[i]!.filter((id) => id !== -1)));
    for (const t of tables) t.length = 0;
  }

  fork(tables: number[][]): number[][] {
    this.own(tables);
    this.subs.forEach((m, i) => m.retain(tables[i]!.filter((id) => id !== -1)));
    const c = tables.map((t) => [...t]);
    this.made.add(c);
    return c;
  }

  numFreeBlocks(): number {
    return this.subs[this.capacityIndex]!.numFreeBlocks();
  }

  numUsedBlocks(): number {
    return this.subs[this.capacityIndex]!.numUsedBlocks();
  }
}

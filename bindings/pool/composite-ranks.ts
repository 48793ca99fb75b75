// The pool's composite ranks (seed 5.1, SEMANTICS B.5): when `managerTypes`
// is given, each dp rank's KV manager is a CompositeBlockManager and a
// sequence's blocks live in its 2-D tables. The pool keeps its flow (rank,
// single id, live set) and calls in here through a few hooks; as in the
// reference, a composite rank does no prefix caching and no beam swaps.

import type { BlockManagerImpl } from '../managers/block-manager-impl.js';
import {
  COMPOSITE_OPTION_KEYS,
  CompositeBlockManager,
  parseCompositeLayout,
  type CompositeBlockManagerOptions,
  type ManagerType,
} from '../managers/composite-block-manager.js';
import type { Sequence } from './sequence.js';

/** The pool options that select and shape composite ranks (see CompositeBlockManagerOptions). */
export type CompositePoolOptions = Partial<Omit<CompositeBlockManagerOptions, 'blockSize' | 'numBlocks' | 'managerTypes'>> & {
  /** Sub-manager types per rank (0 / 'full', 1 / 'sliding-window'); given, every rank is a composite. */
  managerTypes?: readonly ManagerType[];
};

export { COMPOSITE_OPTION_KEYS };

export class CompositeRanks {
  /** One composite manager per dp rank. */
  readonly managers: CompositeBlockManager[] = [];
  private readonly options: CompositeBlockManagerOptions;

  /** Validates the layout (nothing is created yet). */
  constructor(options: CompositePoolOptions & { blockSize: number; numBlocks: number }) {
    const o: CompositeBlockManagerOptions = { blockSize: options.blockSize, numBlocks: options.numBlocks, managerTypes: options.managerTypes! };
    for (const k of COMPOSITE_OPTION_KEYS) if (k !== 'managerTypes' && options[k] !== undefined) (o as unknown as Record<string, unknown>)[k] = options[k];
    parseCompositeLayout(o);
    this.options = o;
  }

  /** Creates the next rank's composite; returns the sub-manager its capacity figures come from. */
  addRank(): BlockManagerImpl {
    const m = new CompositeBlockManager(this.options);
    this.managers.push(m);
    return m.capacityManager;
  }

  /** All-or-nothing growth of every table of `seq` on rank `r`, then the window release. */
  allocate(seq: Sequence, r: number, numTokens: number): boolean {
    const m = this.managers[r]!;
    const t = seq._composite ?? (seq._composite = m.newTables());
    return m.allocateFor(t, numTokens, seq._kvCached);
  }

  /** True when `seq` holds an id of some sub-manager. */
  holds(seq: Sequence): boolean {
    return seq._composite !== null && !seq._composite.empty;
  }

  /** Lets go of every id `seq` holds on rank `r` (sub-manager by sub-manager, ascending). */
  release(seq: Sequence, r: number): void {
    if (seq._composite) this.managers[r]!.deallocateFor(seq._composite);
  }

  /** A fork shares every id of its parent. */
  fork(parent: Sequence, child: Sequence): void {
    if (parent._composite) child._composite = this.managers[parent._dpRank]!.forkFor(parent._composite);
  }

  /**
   * Audits rank `r`'s sub-managers against the tables of the live sequences
   * placed there, and adds the capacity sub-manager's holders to
   * `capacityCounts` (the pool compares that manager too).
   */
  checkRank(r: number, capacityCounts: Int32Array, live: Iterable<Sequence>): void {
    const m = this.managers[r]!;
    m.check();
    const tables = [];
    for (const s of live) if (s._dpRank === r && s._composite) tables.push(s._composite);
    const counts = m.checkHolders(tables)[m.capacityIndex]!;
    for (let id = 0; id < counts.length; id++) capacityCounts[id]! += counts[id]!;
  }

  dispose(): void {
    for (const m of this.managers) m.dispose();
  }
}

// The per-sequence single ids of a pool (the reference's embedding ids /
// per-sequence slots): one single-id manager per dp rank. With linear state
// a sequence's live checkpoint slot comes and goes with its single id.

import { SingleBlockManager } from '../managers/single-block-manager.js';
import type { RankManager } from '../ranks/rank-manager.js';
import type { SequenceState } from '../ranks/sequence-state.js';

export class SingleIds {
  /** One manager per dp rank. */
  readonly managers: SingleBlockManager[] = [];
  private readonly scratch = new Int32Array(1);

  constructor(private readonly ranks: readonly RankManager[]) {}

  /** Adds the manager of the next rank. */
  addRank(capacity: number): void {
    this.managers.push(new SingleBlockManager({ numBlocks: capacity }));
  }

  /** True when rank `r` has no single id to give. */
  exhausted(r: number): boolean {
    return this.managers[r]!.numFreeBlocks() === 0;
  }

  /** Gives `s` a single id on rank `r` (and its live linear-state slot); false, changing nothing, when either is short. */
  acquire(s: SequenceState, r: number): boolean {
    if (!this.managers[r]!.allocateInto(1, this.scratch, 0)) return false;
    s.single = this.scratch[0]!;
    const linear = this.ranks[r]!.linear;
    if (linear && !linear.acquire(s)) {
      this.releaseId(r, s.single);
      s.single = -1;
      return false;
    }
    return true;
  }

  /** Takes back the single id of `s` (and its live slot). */
  release(s: SequenceState, r: number): void {
    this.ranks[r]!.linear?.release(s);
    this.releaseId(r, s.single);
    s.single = -1;
  }

  private releaseId(r: number, id: number): void {
    this.scratch[0] = id;
    const code = this.managers[r]!.releaseFrom(this.scratch, 0, 1);
    if (code < 0) throw new Error(`kvpool: internal error releasing single id ${id} (core code ${code})`);
  }

  /** Audits rank `r`: its manager, and one holder per id for each placed sequence holding it. */
  check(r: number, placed: readonly SequenceState[]): void {
    const m = this.managers[r]!;
    m.check();
    const expected = new Int32Array(m.numBlocks);
    for (const s of placed) if (s.single >= 0) expected[s.single]!++;
    const actual = m.holderCounts();
    for (let id = 1; id < actual.length; id++) {
      if (actual[id] !== expected[id]) {
        throw new Error(`kvpool: rank ${r} single-id block ${id} has ${actual[id]} holders but live sequences hold it ${expected[id]} times`);
      }
    }
  }

  dispose(): void {
    for (const m of this.managers) m.dispose();
  }
}

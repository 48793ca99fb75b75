// The replay loop's view of the model host-tier pool, completing every
// transfer at once (test glue: the model itself imports nothing from bindings/).

import { ModelHierarchyPool } from '../../model/hierarchy-block-manager-pool.js';
import type { ModelSequence } from '../../model/sequence.js';
import { ModelReplayTarget } from '../../model/replay-target.js';

export class ModelHierarchyReplayTarget extends ModelReplayTarget {
  constructor(readonly tiered: ModelHierarchyPool) {
    super(tiered);
  }
  override allocate(seq: ModelSequence, numTokens?: number): boolean {
    const ok = this.tiered.allocate(seq, numTokens);
    this.complete();
    return ok;
  }
  override deallocate(seq: ModelSequence): void {
    this.tiered.deallocate(seq);
    this.complete();
  }
  private complete(): void {
    for (const t of this.tiered.takeTransfers()) if (t.offload) this.tiered.completeOffload(t.offload);
  }
}

// Model of a BlockManagerPool with composite ranks (docs/composite.md):
// rank choice and single ids as in the pool, the blocks in 2-D tables, no
// prefix cache, no beam swap. Mirrors bindings/ranks/composite-rank.ts and
// the pool's placement in bindings/pool/block-manager-pool.ts.

import { ModelCompositeBlockManager, type ModelCompositeOptions } from './composite-block-manager.js';
import { ModelSequence } from './sequence.js';
import { ModelSingleBlockManager } from './single-block-manager.js';

export class ModelCompositeSequence extends ModelSequence {
  tables: number[][] = [];

  override reset(): void {
    super.reset();
    this.tables = [];
  }
}

export class ModelCompositePool {
  readonly ranks: ModelCompositeBlockManager[] = [];
  readonly singles: ModelSingleBlockManager[] = [];

  constructor(o: ModelCompositeOptions & { dpSize?: number; singleBlockCapacity?: number }) {
    for (let r = 0; r < (o.dpSize ?? 1); r++) {
      this.ranks.push(new ModelCompositeBlockManager(o));
      this.singles.push(new ModelSingleBlockManager(o.singleBlockCapacity ?? 202));
    }
  }

  newSequence(prompt: ArrayLike<number>): ModelCompositeSequence {
    return new ModelCompositeSequence(prompt);
  }

  private rankOf(s: ModelCompositeSequence): number {
    if (s.dpRank < 0) {
      let best = 0;
      for (let r = 1; r < this.ranks.length; r++) if (this.ranks[r]!.numFreeBlocks() > this.ranks[best]!.numFreeBlocks()) best = r;
      s.dpRank = best;
    }
    return s.dpRank;
  }

  allocate(s: ModelCompositeSequence, numTokens = s.numTokens): boolean {
    const r = this.rankOf(s);
    const newSingle = s.singleBlockId < 0;
    if (newSingle) {
      const got = this.singles[r]!.allocate(1);
      if (!got) return false;
      s.singleBlockId = got[0]!;
    }
    const m = this.ranks[r]!;
    if (s.tables.length === 0) s.tables = m.newTables();
    if (m.allocate(s.tables, numTokens, s.kvCachedTokens)) return true;
    if (newSingle) {
      this.singles[r]!.deallocate([s.singleBlockId]);
      s.singleBlockId = -1;
    }
    return false;
  }

  tryAllocate(s: ModelCompositeSequence): boolean {
    if (!this.allocate(s, s.numTokens)) return false;
    s.kvCachedTokens = s.numTokens;
    return true;
  }

  deallocate(s: ModelCompositeSequence): void {
    if (s.dpRank < 0) return;
    if (s.singleBlockId >= 0) {
      this.singles[s.dpRank]!.deallocate([s.singleBlockId]);
      s.singleBlockId = -1;
    }
    if (s.tables.length > 0) this.ranks[s.dpRank]!.deallocate(s.tables);
    s.reset();
  }

  fork(parent: ModelCompositeSequence): ModelCompositeSequence {
    const c = new ModelCompositeSequence(parent.tokens);
    c.kvCachedTokens = parent.kvCachedTokens;
    c.dpRank = parent.dpRank;
    if (parent.tables.length > 0) c.tables = this.ranks[parent.dpRank]!.fork(parent.tables);
    return c;
  }

  numFreeBlocks(): number[] {
    return this.ranks.map((m) => m.numFreeBlocks());
  }

  numUsedBlocks(): number[] {
    return this.ranks.map((m) => m.numUsedBlocks());
  }
}

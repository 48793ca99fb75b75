// Blocks the pool hands out raw (the reference's allocate(num_tokens)): the
// caller owns them, so the pool counts its references per id and takes back
// only what it handed out, and the audit counts them as holders.

import type { PoolManager } from '../managers/pool-manager.js';
import { checkInt32Array } from '../validate.js';

export class RawBlocks {
  /** Per rank, the references the caller holds (index = id). */
  readonly held: Int32Array[] = [];

  addRank(numBlocks: number): void {
    this.held.push(new Int32Array(numBlocks));
  }

  /** `n` blocks of `kv` (rank `r`) for the caller, or null when it is short. */
  take(kv: PoolManager, r: number, n: number): Int32Array | null {
    const ids = kv.allocate(n);
    if (ids === null) return null;
    const held = this.held[r]!;
    for (const id of ids) held[id]!++;
    return ids;
  }

  /** Gives back blocks handed out on rank `r`: all of them, or nothing when one was not (validated first). */
  giveBack(kv: PoolManager, r: number, blockIds: ArrayLike<number>): void {
    const ids = checkInt32Array('blockIds', blockIds);
    const held = this.held[r]!;
    const left = new Map<number, number>();
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i]!;
      const h = left.get(id) ?? (id >= 0 && id < held.length ? held[id]! : 0);
      if (h <= 0) throw new RangeError(`blockIds[${i}] = ${id} is not a block allocateBlocks handed out on dp rank ${r} (or it was given back)`);
      left.set(id, h - 1);
    }
    kv.deallocate(ids);
    for (let i = 0; i < ids.length; i++) held[ids[i]!]!--;
  }
}

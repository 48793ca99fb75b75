// The scheduler-level operations the pool differential tests share: one
// operation applied to a Wasm-pool sequence and to its model twin, with the
// results compared. Test glue (the model itself imports nothing from bindings/).

import type { BlockManagerPool, Sequence } from '../../bindings/index.js';
import type { ModelBlockManagerPool } from '../../model/block-manager-pool.js';
import type { ModelSequence } from '../../model/sequence.js';
import { agree } from './agree.js';

export type SequenceOp =
  | { kind: 'allocate'; pick: number }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'tryAllocate'; pick: number }
  | { kind: 'allocateShared'; pick: number }
  | { kind: 'publish'; pick: number; upTo?: number }
  | { kind: 'finish'; pick: number; withoutCache?: boolean }
  | { kind: 'fork'; pick: number; swap?: boolean };

const KINDS = new Set(['allocate', 'decode', 'tryAllocate', 'allocateShared', 'publish', 'finish', 'fork']);

export function isSequenceOp(op: { kind: string }): op is SequenceOp {
  return KINDS.has(op.kind);
}

/**
 * Applies `op` to both twins and checks they agree on its result. Returns the
 * new pair a fork makes, or null.
 */
export function applySequenceOp(
  pool: BlockManagerPool,
  model: ModelBlockManagerPool,
  [s, m]: [Sequence, ModelSequence],
  op: SequenceOp,
  blockSize: number,
): [Sequence, ModelSequence] | null {
  switch (op.kind) {
    case 'allocate':
      agree(pool.allocate(s), model.allocate(m));
      if (s.numBlocks > 0) s.kvCachedTokens = m.kvCachedTokens = Math.min(s.numTokens, s.numBlocks * blockSize);
      return null;
    case 'decode':
      for (let i = 0; i < op.steps && s.numBlocks > 0; i++) {
        s.appendToken(7000 + i);
        m.appendToken(7000 + i);
        s.kvCachedTokens = m.kvCachedTokens = s.numTokens - 1;
        agree(pool.allocate(s, s.numTokens), model.allocate(m, m.numTokens));
      }
      return null;
    case 'tryAllocate':
      agree(pool.tryAllocate(s), model.tryAllocate(m));
      return null;
    case 'allocateShared':
      agree(pool.allocateShared(s), model.allocateShared(m));
      return null;
    case 'publish':
      // The KV of the first `upTo` tokens (all by default) is published.
      if (s.dpRank >= 0) {
        const n = op.upTo === undefined ? s.numTokens : op.upTo % (s.numTokens + 2);
        pool.cache(s, n);
        model.cache(m, n);
      }
      return null;
    case 'finish':
      if (op.withoutCache) {
        pool.deallocateWithoutCache(s);
        model.deallocate(m, false);
      } else {
        pool.deallocate(s);
        model.deallocate(m);
      }
      return null;
    case 'fork':
      if (s.dpRank < 0) return null;
      return [s.fork({ swapLastBlock: op.swap ?? false }), model.fork(m, op.swap ?? false)];
  }
}

// The scheduler-level operations the pool differential tests share: one
// operation applied to a Wasm-pool sequence and to its model twin, with the
// results compared. Test glue (the model itself imports nothing from bindings/).

import { expect } from 'vitest';
import type { BlockManagerPool } from '../../bindings/pool/block-manager-pool.js';
import type { Sequence } from '../../bindings/pool/sequence.js';
import type { ModelBlockManagerPool } from '../model/block-manager-pool.js';
import type { ModelSequence } from '../model/sequence.js';

export type SequenceOp =
  | { kind: 'allocate'; pick: number }
  | { kind: 'decode'; pick: number; steps: number }
  | { kind: 'tryAllocate'; pick: number }
  | { kind: 'allocateShared'; pick: number }
  | { kind: 'publish'; pick: number }
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
      expect(pool.allocate(s)).toBe(model.allocate(m));
      if (s.numBlocks > 0) s.kvCachedTokens = m.kvCachedTokens = Math.min(s.numTokens, s.numBlocks * blockSize);
      return null;
    case 'decode':
      for (let i = 0; i < op.steps && s.numBlocks > 0; i++) {
        s.appendToken(7000 + i);
        m.appendToken(7000 + i);
        s.kvCachedTokens = m.kvCachedTokens = s.numTokens - 1;
        expect(pool.allocate(s, s.numTokens)).toBe(model.allocate(m, m.numTokens));
      }
      return null;
    case 'tryAllocate':
      expect(pool.tryAllocate(s)).toBe(model.tryAllocate(m));
      return null;
    case 'allocateShared':
      expect(pool.allocateShared(s)).toBe(model.allocateShared(m));
      return null;
    case 'publish':
      if (s.dpRank >= 0) {
        pool.cache(s, s.numTokens);
        model.cache(m, m.numTokens);
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

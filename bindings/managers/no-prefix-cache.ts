// What a manager without a prefix cache answers (single-id pools, XTensor
// pages): the arguments are still checked, nothing is ever shared or cached.

import { checkInt, checkInt32Array } from '../validate.js';

export function noSharedBlocks(tokens: ArrayLike<number>, existingShared: ArrayLike<number>): Int32Array {
  checkInt32Array('tokens', tokens);
  checkInt32Array('existingShared', existingShared);
  return new Int32Array(0);
}

export function noCaching(tokens: ArrayLike<number>, ids: ArrayLike<number>, existingSharedCount: number): number {
  checkInt32Array('tokens', tokens);
  checkInt32Array('ids', ids);
  checkInt('existingSharedCount', existingSharedCount);
  return 0;
}

// Token arrays made of recognisable blocks, for scenario tests.

/**
 * `blocks` full blocks of `blockSize` tokens, block j filled with base + j,
 * then `extra` tokens -1, -2, ... (a partial last block).
 */
export function blockTokens(blockSize: number, blocks: number, base = 100, extra = 0): number[] {
  const t: number[] = [];
  for (let j = 0; j < blocks; j++) for (let k = 0; k < blockSize; k++) t.push(base + j);
  for (let k = 0; k < extra; k++) t.push(-1 - k);
  return t;
}

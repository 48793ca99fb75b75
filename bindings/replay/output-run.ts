// A run of output tokens appended to a pool sequence in one call: the decode
// steps the loop counts instead of making (kernel.ts, decodeRoom) append
// ~4.5 M tokens over the conversation trace, and one appendToken call each
// was a visible part of the loop.

import type { Sequence } from '../pool/sequence.js';
import { OUTPUT_BASE, OUTPUT_LAST } from './kernel.js';

/** Appends `count` output tokens from `first` on (wrapping as nextOutputToken does) to `seq`. */
export function appendOutputRun(seq: Sequence, first: number, count: number): void {
  const s = seq.state;
  const n = s.numTokens;
  const need = n + count;
  if (need > s.tokens.length) {
    const grown = new Int32Array(Math.max(need, s.tokens.length * 2));
    grown.set(s.tokens.subarray(0, n));
    s.tokens = grown;
  }
  const t = s.tokens;
  const straight = Math.min(count, OUTPUT_LAST - first + 1);
  for (let j = 0; j < straight; j++) t[n + j] = first + j;
  for (let j = straight; j < count; j++) t[n + j] = OUTPUT_BASE + (j - straight);
  s.numTokens = need;
}

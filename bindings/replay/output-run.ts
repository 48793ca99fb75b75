// A run of output tokens appended to a pool sequence in one call: the decode
// steps the loop counts instead of making (kernel.ts, decodeRoom) append
// ~4.5 M tokens over the conversation trace, and one appendToken call each
// was a visible part of the loop.

import type { BlockManagerPool } from '../pool/block-manager-pool.js';
import { Sequence } from '../pool/sequence.js';
import { MAX_SEQUENCE_TOKENS, checkInt, describe } from '../validate.js';
import { OUTPUT_BASE, OUTPUT_LAST, outputsBeforeWrap } from './kernel.js';

/**
 * Appends `count` output tokens from `first` on (wrapping as nextOutputToken
 * does) to `seq`. Checks every argument first (PoolReplayTarget makes this
 * public): a bad one throws and appends nothing.
 */
export function appendOutputRun(seq: Sequence, first: number, count: number): void {
  if (!(seq instanceof Sequence)) throw new TypeError(`seq must be a Sequence, got ${describe(seq)}`);
  const s = seq.state;
  const n = s.numTokens;
  checkInt('first', first, -0x80000000, OUTPUT_LAST);
  checkInt('count', count, 0, MAX_SEQUENCE_TOKENS - n);
  const need = n + count;
  s.reserveTokens(count);
  const t = s.tokens;
  const straight = outputsBeforeWrap(first, count);
  for (let j = 0; j < straight; j++) t[n + j] = first + j;
  for (let j = straight; j < count; j++) t[n + j] = OUTPUT_BASE + (j - straight);
  s.numTokens = need;
}

/**
 * The pool's decodeSteps for a replay target that makes it public: checks
 * its arguments first (a bad one throws and changes nothing).
 */
export function decodeStepsOf(pool: BlockManagerPool, seq: Sequence, steps: number): number {
  if (!(seq instanceof Sequence)) throw new TypeError(`seq must be a Sequence, got ${describe(seq)}`);
  checkInt('steps', steps, 1, MAX_SEQUENCE_TOKENS);
  return pool.decodeSteps(seq, steps);
}

/**
 * appendOutputRun without writing the tokens: `seq` grows by `count` tokens
 * its buffer does not hold (the core holds them, keepPromptTokens). Checks
 * its arguments first, as appendOutputRun does.
 */
export function advanceOutputRun(seq: Sequence, count: number): void {
  if (!(seq instanceof Sequence)) throw new TypeError(`seq must be a Sequence, got ${describe(seq)}`);
  const s = seq.state;
  checkInt('count', count, 0, MAX_SEQUENCE_TOKENS - s.numTokens);
  s.reserveTokens(count);
  s.numTokens += count;
}

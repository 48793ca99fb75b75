// Breaking a manager's state behind its back (through the words it keeps,
// as no public call can), for the tests of what check() notices.

import { expect } from 'vitest';

/**
 * Sets `words[at]` to `value` and expects `check()` to throw `message`; then
 * puts the word back and expects `check()` to pass again.
 */
export function expectCheckCatches(words: Int32Array, at: number, value: number, check: () => void, message: RegExp): void {
  const was = words[at]!;
  words[at] = value;
  expect(check).toThrow(message);
  words[at] = was;
  check();
}

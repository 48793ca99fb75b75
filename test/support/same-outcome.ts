// Compares one call made on the implementation and on the model: both return
// equal values, or both throw an error of the same class (TypeError,
// RangeError, ...). Messages are not compared: the model words its own.

import { expect } from 'vitest';
import { agree } from './agree.js';

export type Outcome<T> = { ok: true; value: T } | { ok: false; error: Error };

function attempt<T>(f: () => T): Outcome<T> {
  try {
    return { ok: true, value: f() };
  } catch (e) {
    if (!(e instanceof Error)) throw e;
    return { ok: false, error: e };
  }
}

/** Typed arrays become plain arrays, so a core's Int32Array equals a model's number[]. */
function plain(v: unknown): unknown {
  return ArrayBuffer.isView(v) && !(v instanceof DataView) ? Array.from(v as unknown as ArrayLike<number>) : v;
}

/** Runs both calls and expects the same outcome; returns the implementation's. */
export function sameOutcome<A, B>(impl: () => A, model: () => B): Outcome<A> {
  const a = attempt(impl);
  const b = attempt(model);
  if (a.ok && b.ok) agree(plain(a.value), plain(b.value));
  else {
    const name = (o: Outcome<unknown>) => (o.ok ? `returned ${JSON.stringify(plain(o.value))}` : `threw ${o.error.constructor.name}: ${o.error.message}`);
    expect(a.ok ? name(a) : a.error.constructor.name, `implementation ${name(a)}; model ${name(b)}`).toBe(
      b.ok ? name(b) : b.error.constructor.name,
    );
  }
  return a;
}

/** Both calls must throw, with the same error class; returns that class's name. */
export function sameRefusal(impl: () => unknown, model: () => unknown): string {
  const a = sameOutcome(impl, model);
  if (a.ok) expect.fail(`an invalid call was accepted by both sides (returned ${JSON.stringify(plain(a.value))})`);
  return a.error.constructor.name;
}

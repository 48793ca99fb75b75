// Argument rules every public call follows (DESIGN "Errors and bad input"),
// restated for the model: a value of the wrong kind is a TypeError, a value
// of the right kind that is out of range a RangeError, and the check runs
// before anything changes. Messages are the model's own; the differential
// tests compare the error class and the state after it, not the wording.

export const INT32_MAX = 0x7fffffff;

/** An integer in [min, max]. */
export function modelInt(name: string, v: unknown, min = 0, max = INT32_MAX): number {
  if (typeof v !== 'number') throw new TypeError(`model: ${name} is not a number`);
  if (!Number.isInteger(v) || v < min || v > max) throw new RangeError(`model: ${name} = ${v} is not an integer in [${min}, ${max}]`);
  return v;
}

/** An array (or array-like) of int32 integers, copied. */
export function modelInt32s(name: string, v: unknown): number[] {
  if (v === null || typeof v !== 'object' || typeof (v as ArrayLike<unknown>).length !== 'number') {
    throw new TypeError(`model: ${name} is not an array`);
  }
  const a = Array.from(v as ArrayLike<number>);
  for (let i = 0; i < a.length; i++) {
    // An int32 is exactly a value that survives `| 0` unchanged.
    if ((a[i]! | 0) !== a[i]) throw new RangeError(`model: ${name}[${i}] = ${String(a[i])} is not an int32`);
  }
  return a;
}

/** Checks an array-like of int32 integers without copying it. */
export function modelCheckInt32s(name: string, v: unknown): void {
  if (v === null || typeof v !== 'object' || typeof (v as ArrayLike<unknown>).length !== 'number') {
    throw new TypeError(`model: ${name} is not an array`);
  }
  const a = v as ArrayLike<number>;
  for (let i = 0; i < a.length; i++) if ((a[i]! | 0) !== a[i]) throw new RangeError(`model: ${name}[${i}] = ${String(a[i])} is not an int32`);
}

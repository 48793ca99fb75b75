// Argument checks shared by every public call. Each one runs before any state
// changes and throws a TypeError (wrong kind of value) or RangeError (right
// kind, bad value) whose message names the argument and the value.

const INT32_MAX = 0x7fffffff;

/**
 * Most tokens one sequence may hold: 2^28, so that its tokens (1 GiB) fit a
 * staging area of the 32-bit core. Calls that would need more are refused
 * before anything is allocated.
 */
export const MAX_SEQUENCE_TOKENS = 1 << 28;

export function describe(v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'bigint') return `${v}n`;
  if (Array.isArray(v)) return `an array of length ${v.length}`;
  if (v !== null && typeof v === 'object') {
    const name = (v as object).constructor?.name ?? 'object';
    // "an Object", "an ArrayBuffer", "an Int32Array"; "a Uint8Array" (said "you-int").
    return `${/^[aeio]/i.test(name) ? 'an' : 'a'} ${name}`;
  }
  return String(v);
}

/** An integer in [min, max]. */
export function checkInt(name: string, v: unknown, min = 0, max = INT32_MAX): number {
  // Fast path for the common case (an int32 in range): `v | 0` is v itself
  // exactly for int32 numbers; everything else takes the checks below.
  if (typeof v === 'number' && (v | 0) === v && v >= min && v <= max) return v;
  if (typeof v !== 'number') throw new TypeError(`${name} must be a number, got ${describe(v)}`);
  if (!Number.isInteger(v)) throw new RangeError(`${name} must be an integer, got ${describe(v)}`);
  if (v < min || v > max) {
    if (max !== INT32_MAX || min < 0) throw new RangeError(`${name} must be in [${min}, ${max}], got ${v}`);
    throw new RangeError(v < min ? `${name} must be >= ${min}, got ${v}` : `${name} must be at most ${max} (int32), got ${v}`);
  }
  return v;
}

export function checkBool(name: string, v: unknown): boolean {
  if (typeof v !== 'boolean') throw new TypeError(`${name} must be a boolean, got ${describe(v)}`);
  return v;
}

/** An array-like of int32 integers (an Int32Array passes without a scan). */
export function checkInt32Array(name: string, v: unknown): ArrayLike<number> {
  if (v instanceof Int32Array) return v;
  if (v === null || typeof v !== 'object' || typeof (v as ArrayLike<number>).length !== 'number') {
    throw new TypeError(`${name} must be an Int32Array or an array of integers, got ${describe(v)}`);
  }
  const a = v as ArrayLike<number>;
  const n = a.length;
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`${name}.length must be a non-negative integer, got ${describe(n)}`);
  for (let i = 0; i < n; i++) {
    const x = a[i]!;
    // `x | 0` is x itself exactly for int32 numbers: fractions, NaN, values
    // outside int32 and non-numbers all differ (one operation per element).
    if ((x | 0) !== x) {
      throw new RangeError(`${name}[${i}] must be an int32 integer, got ${describe(x)}`);
    }
  }
  return a;
}

const TWO_64 = 1n << 64n;

/** A 64-bit hash seed as two 32-bit halves. */
export function checkSeed(name: string, v: unknown): { lo: number; hi: number } {
  let big: bigint;
  if (typeof v === 'bigint') big = v;
  else if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) throw new RangeError(`${name} must be a safe integer or a bigint, got ${describe(v)}`);
    big = BigInt(v);
  } else throw new TypeError(`${name} must be a number or a bigint, got ${describe(v)}`);
  if (big < 0n || big >= TWO_64) throw new RangeError(`${name} must be in [0, 2^64), got ${describe(v)}`);
  return { lo: Number(big & 0xffffffffn), hi: Number(big >> 32n) };
}

/** Rejects option keys the caller misspelt. */
export function checkKeys(name: string, opts: object, allowed: readonly string[]): void {
  for (const k of Object.keys(opts)) {
    if (!allowed.includes(k)) throw new TypeError(`${name}: unknown option ${JSON.stringify(k)} (known: ${allowed.join(', ')})`);
  }
}

/** Throws unless `v` is undefined or a function. */
export function checkOptionalFunction(name: string, v: unknown): void {
  if (v !== undefined && typeof v !== 'function') throw new TypeError(`${name} must be a function, got ${describe(v)}`);
}

export function checkObject(name: string, v: unknown): object {
  if (v === null || typeof v !== 'object') throw new TypeError(`${name} must be an object, got ${describe(v)}`);
  return v;
}

/**
 * A refusal restated in the caller's words: `message`, of `e`'s class
 * (RangeError or TypeError; anything else becomes `other`), `e` its cause.
 */
export function restated(e: unknown, message: string, other: ErrorConstructor = Error): Error {
  const E = e instanceof RangeError ? RangeError : e instanceof TypeError ? TypeError : other;
  return new E(message, { cause: e });
}

// XXH3-128 and chained block hashes against the real xxHash library:
// committed vectors (libxxhash via xLLM's tooling), a committed random fixture
// (scripts/gen-xxh3-fixtures.py), and a live differential run against
// Debian's python3-xxhash when it is installed.

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { plainCore } from '../bindings/core/plain-core.js';

const core = () => plainCore().ex;
const mem = { get u8() { return plainCore().u8; }, get i32() { return plainCore().i32; }, get buffer() { return plainCore().buffer; } };
const stageTokens = (t: ArrayLike<number>) => plainCore().staging.stageTokens(t);
import { hashBlocks, xxh3_128 } from '../bindings/hash.js';
import { external } from './support/externals.js';
import { mulberry32 } from '../bindings/replay/prng.js';

// ------------------------------------------------------------------ helpers

const hex = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
const unhex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));

function tokenBytes(tokens: ArrayLike<number>): Uint8Array {
  const out = new Uint8Array(tokens.length * 4);
  const dv = new DataView(out.buffer);
  for (let i = 0; i < tokens.length; i++) dv.setInt32(i * 4, tokens[i]!, true);
  return out;
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}

/** The chain computed through xxh3_128 alone: the reference for hashBlocks. */
function manualChain(tokens: ArrayLike<number>, blockSize: number, seed: number | bigint, parent = new Uint8Array(0)): Uint8Array {
  const n = Math.floor(tokens.length / blockSize);
  const out = new Uint8Array(16 * n);
  let prev: Uint8Array = parent;
  for (let b = 0; b < n; b++) {
    const block = Array.from({ length: blockSize }, (_, i) => tokens[b * blockSize + i]!);
    const h = xxh3_128(concat(prev, tokenBytes(block)), seed);
    out.set(h, 16 * b);
    prev = h;
  }
  return out;
}

/** Mirrors gen_bytes() in scripts/gen-xxh3-fixtures.py. */
function xorshiftBytes(state: number, n: number): Uint8Array {
  const out = new Uint8Array(n);
  let s = state >>> 0;
  for (let i = 0; i < n; i++) {
    s = (s ^ (s << 13)) >>> 0;
    s = (s ^ (s >>> 17)) >>> 0;
    s = (s ^ (s << 5)) >>> 0;
    out[i] = s & 0xff;
  }
  return out;
}

/** Deterministic 32-bit integers (mulberry32) for the generated differential inputs. */
function prng(seed: number): () => number {
  const next = mulberry32(seed);
  return () => next() * 4294967296;
}

const fixture = (name: string): any => JSON.parse(readFileSync(new URL(`./fixtures/${name}`, import.meta.url), 'utf8'));

// ------------------------------------------------------------------ committed vectors

interface Vector {
  name: string;
  seed: number;
  tokens: number[];
  prevHashBytes: string | null;
  inputLen: number;
  inputHex: string;
  low64: string;
  high64: string;
  bytes: string;
}

describe('xxh3_vectors.json (libxxhash XXH3_128bits_withSeed)', () => {
  const doc = fixture('xxh3_vectors.json');
  const vectors: Vector[] = doc.vectors;

  it('has the documented layout', () => {
    expect(vectors.length).toBeGreaterThan(10);
    for (const v of vectors) {
      expect(v.inputHex).toBe((v.prevHashBytes ?? '') + hex(tokenBytes(v.tokens)));
      expect(v.inputHex.length / 2).toBe(v.inputLen);
      const lo = BigInt(v.low64);
      const hi = BigInt(v.high64);
      const dv = new DataView(unhex(v.bytes).buffer);
      expect(dv.getBigUint64(0, true)).toBe(lo);
      expect(dv.getBigUint64(8, true)).toBe(hi);
    }
  });

  for (const v of vectors) {
    it(`xxh3_128: ${v.name}`, () => {
      expect(hex(xxh3_128(unhex(v.inputHex), v.seed))).toBe(v.bytes);
      expect(hex(xxh3_128(unhex(v.inputHex), BigInt(v.seed)))).toBe(v.bytes);
    });
  }

  // hashBlocks applies to a vector whose parent is "no parent" or, recursively,
  // another vector of the same block size and seed: rebuild the whole token
  // sequence and check every block of the chain.
  const byBytes = new Map(vectors.map((v) => [v.bytes, v]));
  function chainOf(v: Vector): Vector[] | null {
    if (v.prevHashBytes === null) return [v];
    const parent = byBytes.get(v.prevHashBytes);
    if (!parent || parent.tokens.length !== v.tokens.length || parent.seed !== v.seed) return null;
    const rest = chainOf(parent);
    return rest && [...rest, v];
  }
  const applicable = vectors.filter((v) => v.tokens.length > 0 && chainOf(v) !== null);

  it('hashBlocks applies to every vector with tokens except the zero-parent one', () => {
    const left = vectors.filter((v) => v.tokens.length > 0 && !applicable.includes(v)).map((v) => v.name);
    expect(left).toEqual(['chain: zero-prev(16 zero bytes) ++ [0..15]']);
  });

  for (const v of applicable) {
    it(`hashBlocks: ${v.name}`, () => {
      const chain = chainOf(v)!;
      const tokens = chain.flatMap((c) => c.tokens);
      const B = v.tokens.length;
      const expected = chain.map((c) => c.bytes).join('');
      expect(hex(hashBlocks(tokens, B, v.seed))).toBe(expected);
      expect(hex(hashBlocks(Int32Array.from(tokens), B, BigInt(v.seed)))).toBe(expected);
      if (v.seed === 1024) expect(hex(hashBlocks(tokens, B))).toBe(expected); // default seed
      // A trailing partial block is ignored.
      expect(hex(hashBlocks([...tokens, 7, 8, 9].slice(0, tokens.length + Math.min(3, B - 1)), B, v.seed))).toBe(expected);
    });
  }
});

// ------------------------------------------------------------------ committed random fixture

describe('xxh3_random.json (python3-xxhash, every length class)', () => {
  const doc = fixture('xxh3_random.json');
  const cases: { note: string; len: number; seed: string; hex?: string; xorshift32?: number; bytes: string }[] = doc.cases;

  it('covers every length class and boundary', () => {
    const lens = new Set(cases.map((c) => c.len));
    for (const n of [0, 1, 2, 3, 4, 8, 9, 16, 17, 64, 80, 128, 129, 240, 241, 1024, 1025]) expect(lens.has(n)).toBe(true);
    expect(cases.some((c) => c.len > 100_000)).toBe(true);
    expect(cases.length).toBeGreaterThan(300);
  });

  it('matches on every case', () => {
    let checked = 0;
    for (const c of cases) {
      const data = c.hex !== undefined ? unhex(c.hex) : xorshiftBytes(c.xorshift32!, c.len);
      expect(data.length).toBe(c.len);
      const seed = BigInt(c.seed);
      const got = hex(xxh3_128(data, seed));
      if (got !== c.bytes) expect({ len: c.len, seed: c.seed, got }).toEqual({ len: c.len, seed: c.seed, got: c.bytes });
      if (seed <= BigInt(Number.MAX_SAFE_INTEGER)) expect(hex(xxh3_128(data, Number(seed)))).toBe(c.bytes);
      checked++;
    }
    expect(checked).toBe(cases.length);
  });

  it('seed 0 is the default', () => {
    const c = cases.find((x) => x.seed === '0' && x.len > 0 && x.hex !== undefined)!;
    expect(hex(xxh3_128(unhex(c.hex!)))).toBe(c.bytes);
  });
});

// ------------------------------------------------------------------ live differential

const PY = process.env.XXH3_PYTHON ?? '/usr/bin/python3'; // overridable to test the skip path
const probe = spawnSync(PY, ['-c', 'import xxhash'], { encoding: 'utf8' });
const havePython = external(
  'the xxHash reference (python3-xxhash)',
  probe.status === 0,
  `${PY} with the "xxhash" module is not available (${probe.error?.message ?? probe.stderr.trim().split('\n').pop()}); ` +
    "install Debian's python3-xxhash (apt-get install python3-xxhash)",
);

// Reads requests on stdin, one per line, answers one line each:
//   H <seed> x<hex>          -> 16 bytes hex (low64 LE, high64 LE)
//   C <seed> <B> <t0,t1,...> -> the chain of full blocks, 32 hex digits per block ("-" if none)
const PY_SCRIPT = String.raw`
import sys, struct, xxhash
M = (1 << 64) - 1
def h128(data, seed):
    v = xxhash.xxh3_128(data, seed=seed).intdigest()
    return (v & M).to_bytes(8, 'little') + (v >> 64).to_bytes(8, 'little')
out = []
for line in sys.stdin:
    f = line.split()
    if not f:
        continue
    seed = int(f[1])
    if f[0] == 'H':
        out.append(h128(bytes.fromhex(f[2][1:]), seed).hex())
    else:
        B = int(f[2])
        toks = [int(t) for t in f[3].split(',')] if len(f) > 3 else []
        prev, hs = b'', []
        for b in range(len(toks) // B):
            prev = h128(prev + struct.pack('<%di' % B, *toks[b * B:(b + 1) * B]), seed)
            hs.append(prev.hex())
        out.append(''.join(hs) or '-')
sys.stdout.write('\n'.join(out) + '\n')
`;

describe('live differential against python3-xxhash', () => {
  const rand = prng(Number(process.env.XXH3_TEST_SEED ?? 0x5eed));
  const u64 = (): bigint => (BigInt(rand()) << 32n) | BigInt(rand());
  const int = (lo: number, hi: number): number => lo + (rand() % (hi - lo + 1));
  const pickSeed = (): number | bigint => {
    switch (rand() % 6) {
      case 0: return 0;
      case 1: return 1024;
      case 2: return rand();
      case 3: return u64();
      case 4: return u64() | (1n << 63n);
      default: return int(0, 1 << 20) * 4096 + rand(); // a safe integer above 2^32
    }
  };
  // Length classes, each equally likely, plus boundaries +-1.
  const classes: [number, number][] = [[0, 0], [1, 3], [4, 8], [9, 16], [17, 128], [129, 240], [241, 1024], [1025, 3000]];
  const edges = [16, 17, 32, 64, 80, 96, 128, 129, 160, 240, 241, 1024, 1025, 2048];

  const inputs: { data: Uint8Array; seed: number | bigint }[] = [];
  for (let i = 0; i < 4000; i++) {
    let len: number;
    if (rand() % 5 === 0) len = edges[rand() % edges.length]! + int(-1, 1);
    else {
      const [lo, hi] = classes[rand() % classes.length]!;
      len = int(lo, hi);
    }
    const data = new Uint8Array(len);
    for (let j = 0; j < len; j++) data[j] = rand() & 0xff;
    inputs.push({ data, seed: pickSeed() });
  }
  for (const len of [65_536, 100_003, 300_000 + 17, 1_500_000]) {
    inputs.push({ data: xorshiftBytes(rand() | 1, len), seed: pickSeed() });
  }

  const tokenCases: { tokens: number[]; B: number; seed: number | bigint }[] = [];
  for (let i = 0; i < 400; i++) {
    const B = rand() % 3 === 0 ? [16, 32, 16, 64][rand() % 4]! : int(1, 40);
    const len = int(0, 6 * B + 5);
    const tokens = Array.from({ length: len }, () => {
      const r = rand() % 10;
      if (r === 0) return -0x8000_0000;
      if (r === 1) return 0x7fff_ffff;
      if (r < 5) return int(0, 151_935); // vocabulary-sized ids
      return rand() | 0; // any int32
    });
    tokenCases.push({ tokens, B, seed: pickSeed() });
  }

  let answers: string[] = [];
  beforeAll(() => {
    if (!havePython) return;
    const lines = [
      ...inputs.map(({ data, seed }) => `H ${seed} x${hex(data)}`),
      ...tokenCases.map(({ tokens, B, seed }) => `C ${seed} ${B} ${tokens.join(',')}`),
    ];
    const r = spawnSync(PY, ['-c', PY_SCRIPT], { input: lines.join('\n') + '\n', encoding: 'utf8', maxBuffer: 1 << 30 });
    if (r.status !== 0) throw new Error(`python3-xxhash failed: ${r.error?.message ?? r.stderr}`);
    answers = r.stdout.trimEnd().split('\n');
    expect(answers.length).toBe(lines.length);
  });

  it.skipIf(!havePython)(`xxh3_128 on ${inputs.length} random inputs (every length class, random seeds)`, () => {
    let mismatches = 0;
    inputs.forEach(({ data, seed }, i) => {
      const got = hex(xxh3_128(data, seed));
      if (got !== answers[i] && mismatches++ < 5) {
        expect({ len: data.length, seed: String(seed), got }).toEqual({ len: data.length, seed: String(seed), got: answers[i] });
      }
    });
    expect(mismatches).toBe(0);
  });

  it.skipIf(!havePython)(`hashBlocks on ${tokenCases.length} random token arrays and block sizes`, () => {
    tokenCases.forEach(({ tokens, B, seed }, i) => {
      const want = answers[inputs.length + i] === '-' ? '' : answers[inputs.length + i];
      expect(hex(hashBlocks(tokens, B, seed)), `case ${i}: ${tokens.length} tokens, B=${B}, seed ${seed}`).toBe(want);
      // Same again, from an Int32Array: the no-copy chaining left nothing behind.
      expect(hex(hashBlocks(Int32Array.from(tokens), B, seed))).toBe(want);
    });
  });
});

// ------------------------------------------------------------------ chaining without copies

describe('hashBlocks chaining', () => {
  const tokens = Int32Array.from({ length: 16 * 9 + 5 }, (_, i) => (i * 2654435761) | 0);

  it('equals hashing each chain input with xxh3_128', () => {
    // 8..28 tokens take the run with the scalar chain step; 8, 16/17 and
    // 24/28 reach its three input lengths (48-64, 65-96 and 97-128 bytes).
    for (const B of [1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 23, 24, 25, 28, 29, 32, 60, 64, 149]) {
      for (const seed of [1024, 0, 2n ** 64n - 1n]) {
        expect(hex(hashBlocks(tokens, B, seed)), `B=${B} seed=${seed}`).toBe(hex(manualChain(tokens, B, seed)));
      }
    }
  });

  it('chains block 0 on a given parent hash as on any other block', () => {
    const parent = Uint8Array.from({ length: 16 }, (_, i) => 0xf0 ^ (i * 37));
    for (const B of [4, 8, 16, 17, 28, 29]) {
      for (const [lo, hi, seed] of [[1024, 0, 1024n], [0xffffffff, 0xffffffff, 2n ** 64n - 1n]] as const) {
        const ptr = stageTokens(tokens);
        const pp = ptr + tokens.length * 4 + 16; // inside the token area's spare room
        mem.u8.set(parent, pp);
        const out = pp + 32;
        const n = core().hash_blocks_from(ptr, tokens.length, B, lo, hi, pp, out);
        expect(hex(mem.u8.slice(out, out + 16 * n)), `B=${B} seed=${seed}`).toBe(hex(manualChain(tokens, B, seed, parent)));
      }
    }
  });

  it('gives every count of 16-token blocks, even or odd, with or without a parent, the chain of xxh3_128', () => {
    // 16 tokens take a run of two blocks a turn and one more for an odd count.
    const parent = Uint8Array.from({ length: 16 }, (_, i) => 0x5a ^ (i * 71));
    for (let n = 1; n <= 7; n++) {
      const t = tokens.subarray(0, 16 * n);
      for (const seed of [1024n, 2n ** 64n - 1n]) {
        expect(hex(hashBlocks(t, 16, seed)), `n=${n} seed=${seed}`).toBe(hex(manualChain(t, 16, seed)));
        const ptr = stageTokens(t);
        const pp = ptr + t.length * 4 + 16;
        mem.u8.set(parent, pp);
        const out = pp + 32;
        const got = core().hash_blocks_from(ptr, t.length, 16, Number(seed & 0xffffffffn), Number(seed >> 32n), pp, out);
        expect(got).toBe(n);
        expect(hex(mem.u8.slice(out, out + 16 * n)), `n=${n} seed=${seed} with a parent`).toBe(hex(manualChain(t, 16, seed, parent)));
      }
    }
  });

  it('is stable across repeated calls and returns copies', () => {
    const a = hashBlocks(tokens, 16);
    const b = hashBlocks(tokens, 16);
    expect(hex(a)).toBe(hex(b));
    expect(a.length).toBe(16 * 9);
    expect(a.buffer).not.toBe(mem.buffer);
    a.fill(0);
    expect(hex(hashBlocks(tokens, 16))).toBe(hex(b));
    const h = xxh3_128(new Uint8Array(64));
    expect(h.length).toBe(16);
    expect(h.buffer).not.toBe(mem.buffer);
  });

  it('restores the staged tokens and the 16 bytes in front of them', () => {
    for (const B of [1, 3, 4, 16]) {
      const ptr = stageTokens(tokens);
      const head = mem.u8.slice(ptr - 16, ptr);
      head.forEach((_, i) => (mem.u8[ptr - 16 + i] = 0xa0 + i));
      const out = ptr + tokens.length * 4 + 64; // inside the token area's spare room
      const n = core().hash_blocks(ptr, tokens.length, B, 1024, 0, out);
      expect(n).toBe(Math.floor(tokens.length / B));
      expect(Array.from(mem.u8.subarray(ptr - 16, ptr))).toEqual(Array.from({ length: 16 }, (_, i) => 0xa0 + i));
      expect(mem.i32.subarray(ptr >>> 2, (ptr >>> 2) + tokens.length)).toEqual(tokens);
      expect(hex(mem.u8.slice(out, out + 16 * n))).toBe(hex(manualChain(tokens, B, 1024)));
    }
  });

  it('returns no blocks when the tokens do not fill one', () => {
    expect(hashBlocks([], 16).length).toBe(0);
    expect(hashBlocks([1, 2, 3], 4).length).toBe(0);
    expect(hashBlocks(new Int32Array(15), 16).length).toBe(0);
    expect(hashBlocks([1, 2, 3], 1e12).length).toBe(0);
  });
});

// ------------------------------------------------------------------ validation

describe('argument validation', () => {
  it('xxh3_128 rejects data that is not a Uint8Array', () => {
    for (const bad of [[1, 2, 3], 'abc', null, undefined, 42, new Uint16Array(4), new Uint8ClampedArray(4), new ArrayBuffer(4)]) {
      expect(() => xxh3_128(bad as any)).toThrow(TypeError);
      expect(() => xxh3_128(bad as any)).toThrow(/data must be a Uint8Array/);
    }
    expect(() => xxh3_128('abc' as any)).toThrow(/"abc"/);
    expect(() => xxh3_128(Buffer.from('abc'))).not.toThrow(); // a Uint8Array subclass
  });

  for (const fn of ['xxh3_128', 'hashBlocks'] as const) {
    const call = (seed: unknown) => (fn === 'xxh3_128' ? xxh3_128(new Uint8Array(3), seed as any) : hashBlocks([1, 2], 2, seed as any));

    it(`${fn} rejects seeds outside [0, 2^64)`, () => {
      const cases: [unknown, string][] = [
        [-1, '-1'], [1.5, '1.5'], [NaN, 'NaN'], [Infinity, 'Infinity'], [-Infinity, '-Infinity'],
        [2 ** 53, '9007199254740992'], [2 ** 64, '18446744073709552000'], [-1n, '-1n'], [2n ** 64n, '18446744073709551616n'],
      ];
      for (const [seed, shown] of cases) {
        expect(() => call(seed)).toThrow(RangeError);
        expect(() => call(seed)).toThrow(new RegExp(`${fn}: seed .*got ${shown.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}$`));
      }
      for (const seed of ['1', null, {}, true]) {
        expect(() => call(seed)).toThrow(TypeError);
        expect(() => call(seed)).toThrow(/seed/);
      }
    });

    it(`${fn} accepts the whole seed range, numbers and bigints alike`, () => {
      expect(hex(call(Number.MAX_SAFE_INTEGER) as Uint8Array)).toBe(hex(call(BigInt(Number.MAX_SAFE_INTEGER)) as Uint8Array));
      expect(hex(call(2 ** 32 + 5) as Uint8Array)).toBe(hex(call(2n ** 32n + 5n) as Uint8Array));
      expect(() => call(2n ** 64n - 1n)).not.toThrow();
      expect(() => call(0n)).not.toThrow();
      expect(() => call(-0)).not.toThrow();
    });
  }

  it('hashBlocks rejects tokens that are not int32 integers, checking every element', () => {
    const cases: [ArrayLike<unknown>, RegExp][] = [
      [[NaN], /tokens\[0\] .*got NaN/],
      [[1.5], /tokens\[0\] .*got 1\.5/],
      [[2 ** 31], /tokens\[0\] .*got 2147483648/],
      [[-(2 ** 31) - 1], /tokens\[0\] .*got -2147483649/],
      [[Infinity], /tokens\[0\] .*got Infinity/],
      [['7'], /tokens\[0\] .*got "7"/],
      [[1n], /tokens\[0\] .*got 1n/],
      [[null], /tokens\[0\] .*got null/],
      [[...Array(999).fill(1), 2 ** 31], /tokens\[999\] .*got 2147483648/],
      [[1, 2, 3, 4, 5, 6, 7, 8, 0.5, 1, 2, 3], /tokens\[8\] .*got 0\.5/],
      [new Float64Array([1, 2, 3.25]), /tokens\[2\] .*got 3\.25/],
      [new Uint32Array([1, 2 ** 31]), /tokens\[1\] .*got 2147483648/],
    ];
    for (const [tokens, re] of cases) {
      expect(() => hashBlocks(tokens as ArrayLike<number>, 4)).toThrow(RangeError);
      expect(() => hashBlocks(tokens as ArrayLike<number>, 4)).toThrow(re);
    }
    // A bad element in a trailing partial block is still rejected.
    expect(() => hashBlocks([1, 2, 3, 4, 5.5], 4)).toThrow(/tokens\[4\]/);
    // The int32 extremes are fine.
    expect(() => hashBlocks([-(2 ** 31), 2 ** 31 - 1, -0, 0], 2)).not.toThrow();
  });

  it('hashBlocks rejects tokens that are not an array-like', () => {
    for (const bad of [null, undefined, 5, 'abcd', {}]) {
      expect(() => hashBlocks(bad as any, 4)).toThrow(TypeError);
      expect(() => hashBlocks(bad as any, 4)).toThrow(/tokens must be/);
    }
  });

  it('hashBlocks rejects a blockSize that is not an integer >= 1', () => {
    for (const [bs, shown] of [[0, '0'], [-1, '-1'], [1.5, '1.5'], [NaN, 'NaN'], [Infinity, 'Infinity'], [-0, '-0']] as const) {
      expect(() => hashBlocks([1, 2, 3, 4], bs)).toThrow(RangeError);
      expect(() => hashBlocks([1, 2, 3, 4], bs)).toThrow(new RegExp(`blockSize must be an integer >= 1, got ${shown}$`));
    }
    for (const bs of ['16', undefined, null, 16n]) {
      expect(() => hashBlocks([1, 2, 3, 4], bs as any)).toThrow(TypeError);
      expect(() => hashBlocks([1, 2, 3, 4], bs as any)).toThrow(/blockSize/);
    }
  });

  it('validates before touching the core (a bad call leaves later results intact)', () => {
    const before = hex(hashBlocks([1, 2, 3, 4], 2));
    expect(() => hashBlocks([1, 2, 3, NaN], 2)).toThrow();
    expect(() => xxh3_128(new Uint8Array(300), -5)).toThrow();
    expect(hex(hashBlocks([1, 2, 3, 4], 2))).toBe(before);
  });
});

#!/usr/bin/python3
"""Generates test/fixtures/xxh3_random.json: XXH3-128 answers from the real
library (Debian's python3-xxhash, which wraps libxxhash) for a deterministic
set of inputs covering every length class of XXH3_128bits_withSeed.

Run from the repository root:  /usr/bin/python3 scripts/gen-xxh3-fixtures.py

Each case has `len`, `seed` (decimal string: seeds are 64-bit), the input as
`hex`, or for long inputs a generator recipe `xorshift32` (see gen_bytes()),
and the answer as `low64`/`high64` (hex) and `bytes` (16 bytes, hex: low64
little-endian then high64 little-endian, the memory layout of XXH128_hash_t;
python-xxhash's digest()/hexdigest() are the big-endian canonical form, so
the answer is taken from intdigest() = high64 << 64 | low64).
"""

import json
import os
import random
import sys

import xxhash

RNG_SEED = 0x6B7670_01  # fixed: the fixture must be reproducible
MASK32 = 0xFFFFFFFF
MASK64 = (1 << 64) - 1
HEX_MAX = 4096  # inputs up to this length are stored; longer ones use a recipe

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "test", "fixtures", "xxh3_random.json")
VECTORS = os.path.join(ROOT, "test", "fixtures", "xxh3_vectors.json")


def gen_bytes(state, n):
    """xorshift32 (13, 17, 5) from `state` (nonzero u32); byte i is the low
    8 bits of the state after step i+1. test/xxh3.test.ts mirrors this."""
    out = bytearray(n)
    s = state & MASK32
    for i in range(n):
        s ^= (s << 13) & MASK32
        s ^= s >> 17
        s ^= (s << 5) & MASK32
        out[i] = s & 0xFF
    return bytes(out)


def answer(data, seed):
    v = xxhash.xxh3_128(data, seed=seed).intdigest()
    lo, hi = v & MASK64, v >> 64
    return {
        "low64": "0x%016x" % lo,
        "high64": "0x%016x" % hi,
        "bytes": (lo.to_bytes(8, "little") + hi.to_bytes(8, "little")).hex(),
    }


def check_committed_vectors():
    """Sanity: this module agrees with the committed reference vectors."""
    with open(VECTORS) as f:
        vectors = json.load(f)["vectors"]
    for v in vectors:
        got = answer(bytes.fromhex(v["inputHex"]), v["seed"])["bytes"]
        if got != v["bytes"]:
            sys.exit("python xxhash disagrees with %s on %r" % (VECTORS, v["name"]))


def main():
    check_committed_vectors()
    rng = random.Random(RNG_SEED)
    cases = []

    def add(n, seed, note):
        if n <= HEX_MAX:
            data = bytes(rng.getrandbits(8) for _ in range(n))
            case = {"note": note, "len": n, "seed": str(seed), "hex": data.hex()}
        else:
            state = rng.randrange(1, 1 << 32)
            data = gen_bytes(state, n)
            case = {"note": note, "len": n, "seed": str(seed), "xorshift32": state}
        case.update(answer(data, seed))
        cases.append(case)

    def rand_seed():
        return rng.choice([0, 1024, rng.getrandbits(64), rng.getrandbits(64) | (1 << 63), rng.getrandbits(32)])

    boundaries = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 80, 96, 97,
                  127, 128, 129, 159, 160, 161, 192, 239, 240, 241, 255, 256, 320, 1023, 1024, 1025]
    fixed_seeds = [0, 1024, 0x9E3779B97F4A7C15, MASK64]
    for n in boundaries:
        for seed in fixed_seeds:
            add(n, seed, "boundary")
        add(n, rng.getrandbits(64), "boundary")

    classes = [(0, 0, 4), (1, 3, 12), (4, 8, 16), (9, 16, 16), (17, 128, 60),
               (129, 240, 40), (241, 1024, 25), (1025, 2048, 8), (2049, 8192, 6)]
    for lo, hi, count in classes:
        for _ in range(count):
            add(rng.randint(lo, hi), rand_seed(), "random %d-%d" % (lo, hi))

    # Long inputs as recipes: several blocks (1024 bytes each), exact block
    # multiples, a last stripe overlapping the previous block, 100 KB+.
    for n in [8193, 16384, 16447, 65536 + 1, 100_000, 131_072, 262_144 + 63, 1_048_576 + 17]:
        add(n, rand_seed() if n != 100_000 else 0, "long recipe")
        if n in (100_000, 131_072):
            add(n, 1024, "long recipe")

    doc = {
        "library": "python3-xxhash %s (libxxhash %s)" % (xxhash.VERSION, xxhash.XXHASH_VERSION),
        "function": "XXH3_128bits_withSeed",
        "generator": "scripts/gen-xxh3-fixtures.py, RNG seed 0x%x" % RNG_SEED,
        "bytes": "16 bytes: low64 little-endian then high64 little-endian",
        "xorshift32": "input byte i = low 8 bits of a xorshift32 (13, 17, 5) state after step i+1, starting from the given state",
        "cases": cases,
    }
    with open(OUT, "w") as f:
        f.write("{\n")
        for key in ["library", "function", "generator", "bytes", "xorshift32"]:
            f.write(" %s: %s,\n" % (json.dumps(key), json.dumps(doc[key])))
        f.write(' "cases": [\n')
        f.write(",\n".join("  " + json.dumps(c, separators=(", ", ": ")) for c in cases))
        f.write("\n ]\n}\n")
    print("wrote %d cases to %s (%d bytes)" % (len(cases), OUT, os.path.getsize(OUT)))


if __name__ == "__main__":
    main()

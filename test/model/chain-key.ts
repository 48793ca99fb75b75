// The model's block key: a 128-bit chain key of (parent key, tokens).
//
// Deliberately not XXH3: the model must not share code or algorithm with the
// core. Eviction order, hits and ids depend only on key *equality*, so any
// chain key without collisions gives the same results (REPLAY.md); four
// independent 32-bit lanes make an accidental collision out of reach.

const P = [0x9e3779b1, 0x85ebca77, 0xc2b2ae3d, 0x27d4eb2f];

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Key of a block: `parent` is the previous block's key, or null for the first block. */
export function chainKey(parent: string | null, tokens: ArrayLike<number>, start: number, end: number, salt = ''): string {
  let a = 1, b = 2, c = 3, d = 4;
  const mixIn = (w: number) => {
    a = Math.imul(a ^ w, P[0]!); a = (a << 13) | (a >>> 19);
    b = Math.imul(b ^ w, P[1]!); b = (b << 17) | (b >>> 15);
    c = Math.imul(c ^ w, P[2]!); c = (c << 11) | (c >>> 21);
    d = Math.imul(d ^ w, P[3]!); d = (d << 7) | (d >>> 25);
    a = (a + d) | 0; b = (b + a) | 0; c = (c + b) | 0; d = (d + c) | 0;
  };
  if (parent !== null) {
    for (let i = 0; i < 32; i += 8) mixIn(parseInt(parent.slice(i, i + 8), 16));
  } else {
    mixIn(0x5eed);
    for (let i = 0; i < salt.length; i++) mixIn(salt.charCodeAt(i));
  }
  for (let i = start; i < end; i++) mixIn(tokens[i]! | 0);
  mixIn(end - start);
  const hex = (x: number) => x.toString(16).padStart(8, '0');
  return hex(fmix(a ^ c)) + hex(fmix(b ^ d)) + hex(fmix(c + a)) + hex(fmix(d + b));
}

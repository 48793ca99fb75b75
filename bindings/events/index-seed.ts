// The secret that places the index's table entries. Engine hashes and the
// index's own chain keys come from the network (a stream chooses its hashes;
// chain keys are XXH3 of tokens it chooses, with a public seed), so a fixed
// table hash lets a stream send thousands of entries with one home position
// and make every probe walk all of them (docs/events.md, limits). Each index
// draws a 128-bit secret at construction and places entries by a
// multiply-fold hash keyed with it: without the secret no stream can choose
// which entries share a home.

/** Four random u32 words; crypto.getRandomValues is in Node and every browser. */
export function drawSecret(): Uint32Array {
  const s = new Uint32Array(4);
  globalThis.crypto.getRandomValues(s);
  return s;
}

/** The 64-bit product of two u32 values, folded to 32 bits (hi ^ lo): every input bit reaches the middle bits. */
function mum(a: number, b: number): number {
  const a0 = a & 0xffff;
  const a1 = a >>> 16;
  const b0 = b & 0xffff;
  const b1 = b >>> 16;
  const lo00 = a0 * b0;
  const mid1 = a1 * b0 + (lo00 >>> 16);
  const mid2 = a0 * b1 + (mid1 & 0xffff);
  const hi = a1 * b1 + Math.floor(mid1 / 65536) + Math.floor(mid2 / 65536);
  return (Math.imul(a, b) ^ hi) | 0;
}

/** Table hash of three u32 words under secret `s` (wyhash-style: each word xored with a secret word before the multiply). */
export function keyedMix3(s: Uint32Array, a: number, b: number, c: number): number {
  const h = mum((a ^ s[0]!) >>> 0, (b ^ s[1]!) >>> 0);
  return mum((h ^ c ^ s[2]!) >>> 0, (s[3]! | 1) >>> 0);
}

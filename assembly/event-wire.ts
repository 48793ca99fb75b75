// The two loops of the vLLM wire encoder (bindings/events/vllm.ts) that touch
// every block and token of a run of stored records: its block hashes and its
// token ids as msgpack, written to `out`. JavaScript writes the rest of each
// event; these run over ~150 million tokens in a replay of the Mooncake trace.

import { EV_HASH, EV_HEADER, EV_KIND, EV_PARENT, EV_NUM_TOKENS, EV_PARENT_HASH, EV_STORED, EV_REMOVED, EV_PARENT_CHAIN } from "../bindings/core/abi";

/**
 * The hashes of `n` records from `p` (`rec` bytes apart) as msgpack: uint64
 * of the low 64 bits (`bytes` 0), or the 16-byte canonical digest as bin
 * (`bytes` 1). Returns the bytes written (at most 18 per record).
 */
export function ev_wire_hashes(p: usize, rec: i32, n: i32, bytes: i32, out: usize): i32 {
  let q = out;
  for (let k = 0; k < n; k++) {
    const h = p + <usize>k * <usize>rec + <usize>EV_HASH;
    if (bytes != 0) {
      store<u16>(q, 0x10c4); // bin 8, 16 bytes
      store<u64>(q + 2, bswap<u64>(load<u64>(h + 8)));
      store<u64>(q + 10, bswap<u64>(load<u64>(h)));
      q += 18;
    } else {
      store<u8>(q, 0xcf);
      store<u64>(q + 1, bswap<u64>(load<u64>(h)));
      q += 9;
    }
  }
  return <i32>(q - out);
}

/**
 * The tokens of `n` records from `p` (`rec` bytes apart, `ntok` each) as
 * msgpack integers. Returns the bytes written (at most 5 per token, and up to
 * 3 bytes past them are overwritten: `out` needs 8 bytes of slack).
 */
export function ev_wire_tokens(p: usize, rec: i32, n: i32, ntok: i32, out: usize): i32 {
  let q = out;
  for (let k = 0; k < n; k++) {
    const t0 = p + <usize>k * <usize>rec + <usize>EV_HEADER;
    for (let i = 0; i < ntok; i++) {
      const t = load<i32>(t0 + (<usize>i << 2));
      if (<u32>t >= 0x10000) {
        // uint 32 or int 32, in one 8-byte store (the next token overwrites its tail).
        store<u64>(q, (<u64>bswap<u32>(<u32>t) << 8) | (t >= 0 ? 0xce : 0xd2));
        q += 5;
      } else if (<u32>t < 128) {
        store<u8>(q, <u8>t);
        q += 1;
      } else if (<u32>t < 0x100) {
        store<u16>(q, <u16>(0xcc | (t << 8)));
        q += 2;
      } else {
        store<u32>(q, 0xcd | (<u32>bswap<u16>(<u16>t) << 8));
        q += 3;
      }
    }
  }
  return <i32>(q - out);
}

/**
 * How many records from `p` (a stored record; `end` the end of the records)
 * make one run: each next one a stored record of the same token count
 * chained on the one before (its parent hash is that block's hash), as one
 * BlockStored event carries them. Removals: how many removal records follow
 * one another from `p`.
 */
export function ev_wire_run(p: usize, end: usize): i32 {
  const kind = load<i32>(p + <usize>EV_KIND);
  if (kind == EV_REMOVED) {
    let n = 1;
    let q = p + <usize>EV_HEADER;
    while (q < end && load<i32>(q + <usize>EV_KIND) == EV_REMOVED) {
      n++;
      q += <usize>EV_HEADER;
    }
    return n;
  }
  const ntok = load<i32>(p + <usize>EV_NUM_TOKENS);
  const rec = <usize>EV_HEADER + (<usize>ntok << 2);
  let n = 1;
  let q = p + rec;
  while (q < end) {
    if (load<i32>(q + <usize>EV_KIND) != EV_STORED || load<i32>(q + <usize>EV_PARENT) != EV_PARENT_CHAIN) break;
    if (load<i32>(q + <usize>EV_NUM_TOKENS) != ntok) break;
    const prev = q - rec + <usize>EV_HASH;
    if (load<u64>(q + <usize>EV_PARENT_HASH) != load<u64>(prev) || load<u64>(q + <usize>EV_PARENT_HASH + 8) != load<u64>(prev + 8)) break;
    n++;
    q += rec;
  }
  return n;
}

// Exports of the linear-state prefix cache (linear-state.ts). `m` is the
// cache's manager header (created by ls_create), `key` a 16-byte hash in
// linear memory; slots are i32, errors negative.

import { Manager, STAMPED, META_SHIFT } from "./layout";
import { hashChain } from "./chain";
import { createManager, mgr_check } from "./manager-exports";
import { MAGIC_LINEAR_STATE } from "../bindings/core/abi";
import {
  LIVE, takeSlot, giveBack, committed, pin, unpin, reserve, commit, promote, stateOf, trimTo, auditStates, PENDING, prefillBatch,
} from "./linear-state";

/** grows: a cache of `numSlots` slots (slot 0 padding), or 0 when memory is exhausted. */
export function ls_create(numSlots: i32): usize {
  return createManager(numSlots, 1, 1, 0, 0, <u32>MAGIC_LINEAR_STATE);
}

export function ls_acquire_live(m: usize): i32 {
  return takeSlot(changetype<Manager>(m), LIVE);
}

export function ls_release_live(m: usize, slot: i32): i32 {
  return giveBack(changetype<Manager>(m), slot, LIVE);
}

export function ls_abort(m: usize, slot: i32): i32 {
  return giveBack(changetype<Manager>(m), slot, PENDING);
}

export function ls_match(m: usize, key: usize): i32 {
  return pin(changetype<Manager>(m), key);
}

export function ls_unpin(m: usize, slot: i32): i32 {
  return unpin(changetype<Manager>(m), slot);
}

export function ls_contains(m: usize, key: usize): i32 {
  return committed(changetype<Manager>(m), key);
}

export function ls_reserve(m: usize, key: usize, pinExisting: i32): i32 {
  return reserve(changetype<Manager>(m), key, pinExisting);
}

export function ls_commit(m: usize, slot: i32): i32 {
  return commit(changetype<Manager>(m), slot);
}

export function ls_promote(m: usize, slot: i32, key: usize): i32 {
  return promote(changetype<Manager>(m), slot, key);
}

export function ls_state(m: usize, slot: i32): i32 {
  return stateOf(changetype<Manager>(m), slot);
}

/** Blocks of a KV prefix match to keep (docs/linear-state.md, which prefix hits are kept); `kv` is the KV manager. */
export function ls_trim(ls: usize, kv: usize, ids: usize, from: i32, limit: i32, contiguous: i32): i32 {
  return trimTo(changetype<Manager>(ls), changetype<Manager>(kv), ids, from, limit, contiguous);
}

/** The manager audit, then the slot-state audit; live/pending/pinned/pins counts at `counts`. */
export function ls_check(m: usize, counts: usize): i32 {
  const code = mgr_check(m);
  if (code != 0) return code;
  return auditStates(changetype<Manager>(m), counts);
}

/**
 * Chain hashes at the first `nBlocks` block boundaries of a sequence, 16
 * bytes each at `out`: a held KV block (ids[b], b < nHeld) that carries a
 * stamped hash gives it directly, the others are hashed from the tokens on
 * the previous boundary's hash. `tokens` holds the tokens from block
 * `tokFrom` on (16 writable bytes before them): the blocks before it must
 * carry their stamps, else nothing is written and the result is -1 (the
 * caller stages every token). Block 0 is chained on the 16 bytes at `salt`
 * (a cache salt's digest) unless it is 0. Returns 0.
 */
export function ls_prefix_hashes(kv: usize, ids: usize, nHeld: i32, tokens: usize, nBlocks: i32, out: usize, tokFrom: i32, salt: usize): i32 {
  const k = changetype<Manager>(kv);
  const bytes = <usize>k.blockSize << 2;
  // The header's fields in locals: the copies' stores could alias them, so
  // they would be read again for each block. No block is stamped without
  // caching (nor are hashes kept), so `held` stops at 0 then.
  const flags = k.flags;
  const hashes = k.hashes;
  const last = <u32>(k.numBlocks - 1);
  const held = k.prefixOn != 0 ? nHeld : 0;
  for (let b = 0; b < tokFrom && b < nBlocks; b++) if (!stampedAt(flags, last, ids, held, b)) return -1;
  tokens -= <usize>tokFrom * bytes; // block b's tokens at tokens + b * bytes
  let b = 0;
  while (b < nBlocks) {
    // A run of stamped blocks is copied, the run of blocks after it hashed in one go.
    const o = out + (<usize>b << 4);
    if (stampedAt(flags, last, ids, held, b)) {
      v128.store(o, v128.load(hashes + (<usize>load<i32>(ids + (<usize>b << 2)) << META_SHIFT)));
      b++;
      continue;
    }
    let e = b + 1;
    while (e < nBlocks && !stampedAt(flags, last, ids, held, e)) e++;
    hashChain(tokens + <usize>b * bytes, bytes, e - b, b > 0 ? o - 16 : salt, k.seed, o);
    b = e;
  }
  return 0;
}

/** True when ids[b] (b < nHeld) is a block in range (1..last + 1) whose flags carry a stamped hash. */
@inline function stampedAt(flags: usize, last: u32, ids: usize, nHeld: i32, b: i32): bool {
  if (b >= nHeld) return false;
  const id = load<i32>(ids + (<usize>b << 2));
  return <u32>(id - 1) < last && (load<u8>(flags + <usize>id) & STAMPED) != 0;
}

/** A prefill's batch, resolved and committed at once (prefillBatch in linear-state.ts). */
export function ls_prefill_batch(m: usize, restoreKey: usize, keys: usize, n: i32, scratch: usize, setMask: i32): i32 {
  return prefillBatch(changetype<Manager>(m), restoreKey, keys, n, scratch, setMask);
}

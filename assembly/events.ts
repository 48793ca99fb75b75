// KV-cache events for cache-aware routers: what entered and left the prefix
// cache, in order, appended to a growable region of linear memory that the
// bindings drain.
//
// Recording is off by default; the hooks in insert and evict test one header
// field and do nothing else when it is 0.
//
// A router follows the stream only if every parent hash names a block it was
// told about and not told to forget. So a block carries TOLD from the event
// that announced it until it leaves the cache; a stored event names its parent
// only when the parent is cached and TOLD (otherwise none), and a removal is
// recorded only for a TOLD block. Turning recording on forgets every TOLD mark:
// a router starts from nothing.

import { alloc, release } from "./heap";
import { Manager, TOLD, flagsOf, setFlags, hashPtr, copyHash } from "./layout";
import { tableFind } from "./table";
import {
  EV_STORED, EV_REMOVED, EV_CLEARED, EV_HEADER, EV_KIND, EV_BLOCK_ID, EV_HAS_PARENT, EV_NUM_TOKENS, EV_HASH, EV_PARENT_HASH,
} from "../bindings/core/abi";

// Record: kind i32, block id i32, has-parent i32, token count i32, hash 16 B,
// parent hash 16 B, then the tokens (stored events only): EV_* offsets in
// bindings/core/abi.ts.

/** Room for one record of `bytes` bytes, or 0 (then `eventsLost` is set). */
function reserve(m: Manager, bytes: i32): usize {
  if (m.eventsLen + bytes > m.eventsCap) {
    // Undrained records are capped at 1 GiB (the i32 length); past it they are lost, and said so.
    const need = <u64>m.eventsLen + <u64>bytes;
    let cap: u64 = m.eventsCap > 0 ? <u64>m.eventsCap * 2 : 4096;
    while (cap < need) cap *= 2;
    if (cap > 0x40000000) {
      m.eventsLost = 1;
      return 0;
    }
    const buf = alloc(<usize>cap);
    if (buf == 0) {
      m.eventsLost = 1;
      return 0;
    }
    if (m.eventsLen > 0) memory.copy(buf, m.events, <usize>m.eventsLen);
    release(m.events);
    m.events = buf;
    m.eventsCap = <i32>cap;
  }
  const p = m.events + <usize>m.eventsLen;
  m.eventsLen += bytes;
  return p;
}

/** A new cache entry `id` (hash stamped), chained on `parent` (16 bytes, or 0), tokens at `tokens`. */
export function recordStored(m: Manager, id: i32, parent: usize, tokens: usize): void {
  const ntok = m.blockSize;
  const p = reserve(m, EV_HEADER + (ntok << 2));
  if (p == 0) return;
  let pid = parent != 0 ? tableFind(m, parent) : 0;
  const hasParent = pid != 0 && (flagsOf(m, pid) & TOLD) != 0;
  store<i32>(p + EV_KIND, EV_STORED);
  store<i32>(p + EV_BLOCK_ID, id);
  store<i32>(p + EV_HAS_PARENT, hasParent ? 1 : 0);
  store<i32>(p + EV_NUM_TOKENS, ntok);
  copyHash(p + EV_HASH, hashPtr(m, id));
  if (hasParent) copyHash(p + EV_PARENT_HASH, parent);
  memory.copy(p + <usize>EV_HEADER, tokens, <usize>ntok << 2);
  setFlags(m, id, flagsOf(m, id) | TOLD);
}

/** Entry `id` is leaving the cache (call before its flags are cleared). */
export function recordRemoved(m: Manager, id: i32): void {
  if ((flagsOf(m, id) & TOLD) == 0) return;
  const p = reserve(m, EV_HEADER);
  if (p == 0) return;
  store<i32>(p + EV_KIND, EV_REMOVED);
  store<i32>(p + EV_BLOCK_ID, id);
  copyHash(p + EV_HASH, hashPtr(m, id));
}

export function recordCleared(m: Manager): void {
  const p = reserve(m, EV_HEADER);
  if (p == 0) return;
  store<i32>(p + EV_KIND, EV_CLEARED);
  store<i32>(p + EV_BLOCK_ID, 0);
}

/** Turns recording on (forgetting every TOLD mark) or off. */
export function setRecording(m: Manager, on: bool): void {
  if (on && m.eventsOn == 0) {
    for (let id = 1; id < m.numBlocks; id++) setFlags(m, id, flagsOf(m, id) & ~TOLD);
  }
  m.eventsOn = on ? 1 : 0;
}

/** Forgets the recorded events (after the bindings read them). */
export function clearEvents(m: Manager): void {
  m.eventsLen = 0;
  m.eventsLost = 0;
}

// KV-cache events for cache-aware routers: what entered and left the prefix
// cache, in order, appended to a growable region of linear memory that the
// bindings drain (docs/events.md).
//
// Recording is off by default; the hooks in insert and evict test one header
// field and do nothing else when it is 0.
//
// A stored event names its block's parent as the chain does, whatever the
// consumer knows (vLLM's rule: no parent only for block 0 of a sequence; a
// salted block 0 names its salt instead). A block carries TOLD from the event
// that announced it until it leaves the cache, and only a TOLD block's
// removal is recorded: a consumer is never told to forget what it was never
// told. Each TOLD id also keeps what announced it (parent and tokens, the
// "mirror"), so that a snapshot can announce the whole cache again to a
// consumer that joins late. Turning recording on forgets every TOLD mark:
// blocks cached before are unknown to consumers and stay out of snapshots.

import { alloc, release } from "./heap";
import { Manager, TOLD, CACHED, AUDIT_MARK, flagsOf, setFlags, hashPtr, copyHash } from "./layout";
import { tableFind } from "./table";
import {
  EV_STORED, EV_REMOVED, EV_CLEARED, EV_HEADER, EV_KIND, EV_BLOCK_ID, EV_PARENT, EV_NUM_TOKENS, EV_HASH, EV_PARENT_HASH,
  EV_PARENT_NONE, EV_PARENT_CHAIN, EV_MIRROR_HEADER,
} from "../bindings/core/abi";

// Record: kind i32, block id i32, parent kind i32, token count i32, hash 16 B,
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

/** Bytes per id of the mirror. */
@inline function mirrorStride(m: Manager): usize {
  return <usize>EV_MIRROR_HEADER + (<usize>m.blockSize << 2);
}

@inline function mirrorOf(m: Manager, id: i32): usize {
  return m.evMirror + <usize>id * mirrorStride(m);
}

/** Appends a stored record of `id` (hash stamped) from its parent kind, parent hash (or 0) and tokens. */
function writeStored(m: Manager, id: i32, kind: i32, parent: usize, tokens: usize): void {
  const ntok = m.blockSize;
  const p = reserve(m, EV_HEADER + (ntok << 2));
  if (p == 0) return;
  store<i32>(p + EV_KIND, EV_STORED);
  store<i32>(p + EV_BLOCK_ID, id);
  store<i32>(p + EV_PARENT, kind);
  store<i32>(p + EV_NUM_TOKENS, ntok);
  copyHash(p + EV_HASH, hashPtr(m, id));
  if (kind != EV_PARENT_NONE) copyHash(p + EV_PARENT_HASH, parent);
  memory.copy(p + <usize>EV_HEADER, tokens, <usize>ntok << 2);
}

/**
 * A new cache entry `id` (hash stamped): `kind` says what `parent` (16 bytes,
 * or 0 for EV_PARENT_NONE) is, `tokens` are its tokens.
 */
export function recordStored(m: Manager, id: i32, kind: i32, parent: usize, tokens: usize): void {
  writeStored(m, id, kind, parent, tokens);
  if (m.evSnapshots != 0) {
    const r = mirrorOf(m, id);
    store<i32>(r, kind);
    if (kind != EV_PARENT_NONE) copyHash(r + 4, parent);
    memory.copy(r + <usize>EV_MIRROR_HEADER, tokens, <usize>m.blockSize << 2);
  }
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

/**
 * Turns recording on (forgetting every TOLD mark), keeping the mirror for
 * snapshots or not, or off. Returns 0, or -1 when the mirror cannot be
 * allocated (then nothing changed). The mirror costs memory (as much again
 * as the manager's arrays) and a copy of each stored block's tokens: off
 * unless asked for.
 */
export function setRecording(m: Manager, on: bool, snapshots: bool): i32 {
  if (on && m.eventsOn == 0) {
    if (snapshots && m.evMirror == 0 && m.prefixOn != 0) {
      const bytes = <u64>m.numBlocks * <u64>mirrorStride(m);
      if (bytes > 0xffffffff) return -1;
      const r = alloc(<usize>bytes);
      if (r == 0) return -1;
      m.evMirror = r;
    }
    for (let id = 1; id < m.numBlocks; id++) setFlags(m, id, flagsOf(m, id) & ~TOLD);
    m.evSnapshots = snapshots && m.evMirror != 0 ? 1 : 0;
  }
  m.eventsOn = on ? 1 : 0;
  return 0;
}

/** Forgets the recorded events (after the bindings read them). */
export function clearEvents(m: Manager): void {
  m.eventsLen = 0;
  m.eventsLost = 0;
}

/** Drops the records after the first `len` bytes (a snapshot the bindings read). */
export function rewindEvents(m: Manager, len: i32): void {
  if (len >= 0 && len <= m.eventsLen) m.eventsLen = len;
}

/**
 * Appends a stored record for every announced (TOLD) cache entry, each
 * block's cached ancestors before it, as a consumer that starts from nothing
 * needs them. Returns the bytes appended, or -1 when memory ran out (the
 * records pending before the call are then as they were, and not lost).
 */
export function snapshotEvents(m: Manager): i32 {
  if (m.evSnapshots == 0 || m.numCached == 0) return 0;
  const start = m.eventsLen;
  const lostBefore = m.eventsLost;
  const path = alloc(<usize>m.numBlocks << 2);
  if (path == 0) return -1;
  for (let id = 1; id < m.numBlocks; id++) {
    let f = flagsOf(m, id);
    if ((f & (CACHED | TOLD)) != (CACHED | TOLD) || (f & AUDIT_MARK) != 0) continue;
    // Up the chain to the first ancestor not cached, not announced or already written.
    let top = 0;
    let cur = id;
    while (true) {
      store<i32>(path + (<usize>top << 2), cur);
      top++;
      setFlags(m, cur, flagsOf(m, cur) | AUDIT_MARK);
      const r = mirrorOf(m, cur);
      if (load<i32>(r) != EV_PARENT_CHAIN) break;
      const q = tableFind(m, r + 4);
      if (q == 0) break;
      f = flagsOf(m, q);
      if ((f & TOLD) == 0 || (f & AUDIT_MARK) != 0) break;
      cur = q;
    }
    while (top > 0) {
      top--;
      const b = load<i32>(path + (<usize>top << 2));
      const r = mirrorOf(m, b);
      writeStored(m, b, load<i32>(r), r + 4, r + <usize>EV_MIRROR_HEADER);
    }
  }
  for (let id = 1; id < m.numBlocks; id++) setFlags(m, id, flagsOf(m, id) & ~AUDIT_MARK);
  release(path);
  if (m.eventsLost != lostBefore) {
    // Only the snapshot's own records did not fit; the pending ones are intact.
    m.eventsLen = start;
    m.eventsLost = lostBefore;
    return -1;
  }
  return m.eventsLen - start;
}

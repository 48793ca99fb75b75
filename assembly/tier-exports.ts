// Exports the host tier needs (HierarchyBlockManagerPool): caching blocks
// under hashes the caller gives (the reference's insert(blocks) by stamped
// hash, used when an offloaded block lands on the host), a side-effect-free
// count of prefix hits (so a load plan's precondition is checked before
// anything changes), whether an id is a cache entry, the offload's choice
// of blocks, a load plan's hashes stamped on the device blocks it fills, and
// a finished sequence's release with its offload completed in one call.

import { Manager, CACHED, STAMPED, META_SHIFT, ERR_NOT_HELD, ERR_EVENTS_ON, flagsOf, hashPtr, setErrorIndex, idError } from "./layout";
import { tableFind, readHomes } from "./table";
import { allocate, release, releaseHeldOnce } from "./idpool";
import { becameEvictable } from "./lru";

const PREFETCH_WINDOW: i32 = 32;
/** Keeps the prefetch loads of mgr_insert_hashes alive (never read). */
let prefetchSink: u32 = 0;
import { chainHash } from "./chain";
import { checkInsertIds, insertRange, touchVisited, sideScratch } from "./prefix";

/**
 * Caches `ids[i]` under the 16-byte hash at `hashes + 16*i`, for i in [0, n).
 * Every id must be held by someone other than the cache. A hash already cached
 * keeps its block and is refreshed; a new hash caches the given block (one
 * more reference) and stamps the hash on it; an id already cached is not
 * cached twice. Visited entries are re-appended in reverse order, as insert
 * does. Overwrites `ids` with the entries visited (0 for none). Returns the
 * number of new entries, or a negative error code with errorIndex set.
 * While events are recorded, `tokens` (blockSize per block) and `parents`
 * (per block: parent kind i32 and 16 bytes, EV_PARENT_*) describe each block
 * for its stored event; both 0 when not recording.
 */
export function mgr_insert_hashes(mp: usize, ids: usize, hashes: usize, n: i32, tokens: usize, parents: usize): i32 {
  const m = changetype<Manager>(mp);
  // The ids' records (their hashes included) are read in the pass that checks them (insert does the same).
  const bad = checkInsertIds(m, ids, n);
  return bad != 0 ? bad : insertHashes(m, ids, hashes, n, tokens, parents);
}

/** mgr_insert_hashes on ids known to be in range and held (the caller allocated them). */
function insertHashes(m: Manager, ids: usize, hashes: usize, n: i32, tokens: usize, parents: usize): i32 {
  if (m.prefixOn == 0) return 0;
  const record = m.eventsOn != 0 && tokens != 0 && parents != 0;
  const bytes = <usize>m.blockSize << 2;
  let added = 0;
  if (record) {
    // Each block's stored event names its own parent (kind and hash at parents + 20 b).
    for (let b = 0; b < n; b++) {
      const par = parents + <usize>b * 20;
      added += insertRange(m, ids, b, b + 1, hashes + (<usize>b << 4), true, tokens, bytes, par + 4, load<i32>(par));
    }
  } else added = insertWindows(m, ids, hashes, n, false);
  touchVisited(m, ids, n);
  m.blocksInserted += <u64>added;
  return added;
}

/**
 * insertRange over ids[0, n) and the keys at `hashes`, a window at a time:
 * a window's home buckets are read first with no branch on what they hold,
 * so their cache misses overlap (a host tier's table and hashes are
 * megabytes, and each offloaded block lands at random in them).
 */
// @ts-ignore: decorator
@inline function insertWindows(m: Manager, ids: usize, hashes: usize, n: i32, handOver: bool): i32 {
  let added = 0;
  for (let w = 0; w < n; w += PREFETCH_WINDOW) {
    const end = w + PREFETCH_WINDOW < n ? w + PREFETCH_WINDOW : n;
    prefetchSink += readHomes(m, hashes + (<usize>w << 4), end - w);
    added += insertRange(m, ids, w, end, hashes + (<usize>w << 4), false, 0, 0, 0, 0, handOver);
  }
  return added;
}

/**
 * insertHashes of blocks that only the caller holds (one reference each,
 * uncached: it has just allocated them), followed by the release of those
 * references, in one pass: a new entry keeps the caller's reference as the
 * cache's (the touch that follows links it, so the release would find it
 * evictable and ordered already), and a block whose key is cached already
 * goes back to the free stack, in list order, as the release would push it.
 * No events may be recorded. Returns the number of new entries.
 */
function insertHandingOver(m: Manager, ids: usize, hashes: usize, n: i32): i32 {
  if (m.prefixOn == 0) {
    releaseHeldOnce(m, ids, n);
    return 0;
  }
  const added = insertWindows(m, ids, hashes, n, true);
  touchVisited(m, ids, n);
  m.blocksInserted += <u64>added;
  m.numUsed -= n;
  m.numEvictable += added;
  return added;
}

/**
 * How many of the `nBlocks` full blocks of tokens (from block 0, chained on
 * the 16 bytes at `salt` when it is not 0; 16 writable bytes before
 * `tokens`) a match would hit, without taking references, refreshing
 * entries or counting statistics.
 */
export function mgr_peek(mp: usize, tokens: usize, nBlocks: i32, salt: usize): i32 {
  const m = changetype<Manager>(mp);
  if (m.prefixOn == 0) return 0;
  const bytes = <usize>m.blockSize << 2;
  const scratch = sideScratch();
  let parent: usize = salt;
  let hits = 0;
  for (let b = 0; b < nBlocks; b++) {
    chainHash(tokens + <usize>b * bytes, bytes, parent, m.seed, scratch);
    const id = tableFind(m, scratch);
    if (id == 0) break;
    hits++;
    parent = hashPtr(m, id);
  }
  return hits;
}

/** 1 when `id` is a prefix-cache entry. */
export function mgr_is_cached(mp: usize, id: i32): i32 {
  const m = changetype<Manager>(mp);
  if (id <= 0 || id >= m.numBlocks) return 0;
  return (flagsOf(m, id) & CACHED) != 0 ? 1 : 0;
}

/**
 * The hash stamped on `id` (whose flags are `f`) to `out` (16 bytes), zeros
 * when it carries none. The manager's fields come as arguments, so a loop
 * reads them once; `hashes` is read only when `prefixOn`.
 */
// @ts-ignore: decorator
@inline function hashOrZero(f: u8, prefixOn: bool, hashes: usize, id: i32, out: usize): void {
  if (prefixOn && (f & STAMPED) != 0) v128.store(out, v128.load(hashes + (<usize>id << META_SHIFT)));
  else v128.store(out, i32x4.splat(0));
}

/**
 * The host tier's offload choice over a finished sequence's blocks: of the
 * `n` device ids at `devIds` (paired with the host ids at `hostIds`), each
 * one only the sequence and the device cache hold (two references, cached)
 * moves: its pair goes to movedDev/movedHost and its stamped hash to
 * `hashes` (16 bytes each), in order; the others keep their order at the
 * front of devIds/hostIds. Changes no manager state. Returns the number moved.
 */
export function mgr_offload_pick(mp: usize, devIds: usize, hostIds: usize, n: i32, movedDev: usize, movedHost: usize, hashes: usize): i32 {
  return offloadPick(changetype<Manager>(mp), devIds, hostIds, n, movedDev, movedHost, hashes, false);
}

/**
 * mgr_offload_pick; with `drop`, each moved id also loses the sequence's
 * reference at once, as release would take it (it keeps the cache's, and
 * becomes evictable): a later release of the moved ids would only repeat
 * the pass, and they are not written to movedDev. An id listed twice is
 * then picked once (its second entry finds one reference), and the release
 * of the ids kept refuses it.
 */
// @ts-ignore: decorator
@inline function offloadPick(m: Manager, devIds: usize, hostIds: usize, n: i32, movedDev: usize, movedHost: usize, outHashes: usize, drop: bool): i32 {
  // The header's fields in locals (the loop's stores could alias them, so
  // they would be read again for each id); one unsigned compare for the range.
  const last = <u32>(m.numBlocks - 1);
  const refs = m.refs;
  const flags = m.flags;
  const prefixOn = m.prefixOn != 0;
  const hashes = m.hashes;
  let moved = 0;
  let kept = 0;
  for (let i = 0; i < n; i++) {
    const d = load<i32>(devIds + (<usize>i << 2));
    const h = load<i32>(hostIds + (<usize>i << 2));
    const f = <u32>(d - 1) < last ? load<u8>(flags + <usize>d) : <u8>0;
    if ((f & CACHED) != 0 && load<i32>(refs + (<usize>d << META_SHIFT)) == 2) {
      // Dropped device ids are not listed: their reference goes here, nothing reads them after.
      if (!drop) store<i32>(movedDev + (<usize>moved << 2), d);
      store<i32>(movedHost + (<usize>moved << 2), h);
      hashOrZero(f, prefixOn, hashes, d, outHashes + (<usize>moved << 4));
      if (drop) {
        store<i32>(refs + (<usize>d << META_SHIFT), 1);
        becameEvictable(m, d, f);
      }
      moved++;
    } else {
      store<i32>(devIds + (<usize>kept << 2), d);
      store<i32>(hostIds + (<usize>kept << 2), h);
      kept++;
    }
  }
  if (drop) {
    m.numUsed -= moved;
    m.numEvictable += moved;
  }
  return moved;
}

/**
 * A finished sequence's release on a host tier whose offload completes at
 * once, as the bindings make it in calls (HostTierRank.release, then
 * completeTransfersNow with nothing else queued), in one: on the host,
 * blocks for the device's computed blocks it lacks (`cachedDev` of them in
 * all, the host's table growing from `heldHost`; none when the host is
 * short), then of the pairs from `cachedHost` on, those whose device block
 * only the sequence and the device cache hold move to the offload (the
 * others close up in order); the host table and then the device table are
 * released; the moved host blocks are cached under the device blocks'
 * hashes; the moved device blocks and then the moved host blocks are
 * released (the device blocks' references go as they are picked, the
 * host blocks' as they are cached: the same state, as no step between
 * reads them). `devIds` holds the device table (`nDev` ids), `hostIds` the
 * host table with room for `cachedDev` ids, `q` room for 20 bytes per
 * computed block; no events may be recorded on either manager. Every id of
 * both tables must be in range and held by someone other than the cache,
 * else nothing changes. Returns the blocks offloaded, or a negative code
 * (errorIndex set: an index into devIds, or nDev + an index into hostIds).
 */
export function tier_release_offload(
  dp: usize, hp: usize, devIds: usize, nDev: i32, hostIds: usize, heldHost: i32, cachedHost: i32, cachedDev: i32, q: usize,
): i32 {
  const dev = changetype<Manager>(dp);
  const host = changetype<Manager>(hp);
  if (dev.eventsOn != 0 || host.eventsOn != 0) return ERR_EVENTS_ON;
  let bad = checkInsertIds(dev, devIds, nDev);
  if (bad == 0) bad = checkInsertIds(host, hostIds, heldHost, nDev);
  if (bad != 0) return bad;
  let nHost = heldHost;
  let moved = 0;
  const qHost = q;
  const qHash = q + (<usize>cachedDev << 2);
  // The offload: only when the host holds fewer blocks than the device.
  if (heldHost < nDev) {
    if (cachedDev > heldHost && allocate(host, cachedDev - heldHost, hostIds + (<usize>heldHost << 2)) >= 0) nHost = cachedDev;
    const end = min(min(cachedDev, nHost), nDev);
    if (nHost > 0 && end > cachedHost) {
      // The moved device blocks lose the sequence's reference here (release's effects, in the same order among them).
      moved = offloadPick(dev, devIds + (<usize>cachedHost << 2), hostIds + (<usize>cachedHost << 2), end - cachedHost, 0, qHost, qHash, true);
      // The moved pairs' places close up; the rest keep their order.
      memory.copy(devIds + (<usize>(end - moved) << 2), devIds + (<usize>end << 2), <usize>(nDev - end) << 2);
      memory.copy(hostIds + (<usize>(end - moved) << 2), hostIds + (<usize>end << 2), <usize>(nHost - end) << 2);
      nDev -= moved;
      nHost -= moved;
    }
  }
  let code = release(host, hostIds, nHost);
  if (code >= 0) code = release(dev, devIds, nDev);
  if (code < 0 || moved == 0) return code < 0 ? code : 0;
  // The moved host blocks come from the allocation above: in range, each held by the sequence alone.
  insertHandingOver(host, qHost, qHash, moved);
  return moved;
}

/**
 * A load plan's hashes: the hash stamped on each source (host) id
 * srcIds[i] goes to `out` + 16i, and is stamped on the destination (device)
 * id dstIds[i] unless that block is cached (its key stays), so a later
 * insert of the destination blocks takes their keys as known instead of
 * hashing their tokens. Every source id must be in range and every
 * destination id held by someone other than the cache; else nothing
 * changes and the result is a negative code (errorIndex set). Returns how
 * many leading destination ids now carry their source's hash.
 */
export function mgr_stamp_loaded(dp: usize, sp: usize, srcIds: usize, dstIds: usize, n: i32, out: usize): i32 {
  const d = changetype<Manager>(dp);
  const src = changetype<Manager>(sp);
  // The headers' fields in locals (the loops' stores could alias them, so
  // they would be read again for each id); one unsigned compare per range.
  const srcLast = <u32>(src.numBlocks - 1);
  const dLast = <u32>(d.numBlocks - 1);
  const dRefs = d.refs;
  const dRefShift = <usize>d.refShift;
  const dFlags = d.flags;
  // The check finds the first bad pair only; why it is bad is worked out after.
  let bad = 0;
  for (; bad < n; bad++) {
    const s = load<i32>(srcIds + (<usize>bad << 2));
    const t = load<i32>(dstIds + (<usize>bad << 2));
    if (<u32>(s - 1) >= srcLast || <u32>(t - 1) >= dLast) break;
    if (load<i32>(dRefs + (<usize>t << dRefShift)) - <i32>(load<u8>(dFlags + <usize>t) & CACHED) <= 0) break;
  }
  if (bad < n) {
    const s = load<i32>(srcIds + (<usize>bad << 2));
    const t = load<i32>(dstIds + (<usize>bad << 2));
    setErrorIndex(bad);
    const code = idError(s, srcLast, 0);
    return code != 0 ? code : idError(t, dLast, ERR_NOT_HELD);
  }
  const srcOn = src.prefixOn != 0;
  const stamp = d.prefixOn != 0 && srcOn;
  const srcFlags = src.flags;
  const srcHashes = src.hashes;
  const dHashes = d.hashes;
  let leading = 0;
  let run = true;
  for (let i = 0; i < n; i++) {
    const s = load<i32>(srcIds + (<usize>i << 2));
    const o = out + (<usize>i << 4);
    const sf = load<u8>(srcFlags + <usize>s);
    hashOrZero(sf, srcOn, srcHashes, s, o);
    const t = load<i32>(dstIds + (<usize>i << 2));
    const fa = dFlags + <usize>t;
    const f = load<u8>(fa);
    const ok = stamp && (sf & STAMPED) != 0 && (f & CACHED) == 0;
    if (ok) {
      v128.store(dHashes + (<usize>t << META_SHIFT), v128.load(o));
      store<u8>(fa, f | STAMPED);
    }
    run = run && ok;
    if (run) leading++;
  }
  return leading;
}

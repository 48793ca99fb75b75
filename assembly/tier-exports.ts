// Exports the host tier needs (HierarchyBlockManagerPool): caching blocks
// under hashes the caller gives (the reference's insert(blocks) by stamped
// hash, used when an offloaded block lands on the host), a side-effect-free
// count of prefix hits (so a load plan's precondition is checked before
// anything changes), and whether an id is a cache entry.

import { Manager, CACHED, flagsOf, hashPtr } from "./layout";
import { tableFind } from "./table";
import { chainHash } from "./chain";
import { checkInsertIds, insertOne, touchVisited, sideScratch } from "./prefix";

/**
 * Caches `ids[i]` under the 16-byte hash at `hashes + 16*i`, for i in [0, n).
 * Every id must be held by someone other than the cache. A hash already cached
 * keeps its block and is refreshed; a new hash caches the given block (one
 * more reference) and stamps the hash on it; an id already cached is not
 * cached twice. Visited entries are re-appended in reverse order, as insert
 * does. Overwrites `ids` with the entries visited (0 for none). Returns the
 * number of new entries, or a negative error code with errorIndex set.
 */
export function mgr_insert_hashes(mp: usize, ids: usize, hashes: usize, n: i32): i32 {
  const m = changetype<Manager>(mp);
  const bad = checkInsertIds(m, ids, n);
  if (bad != 0) return bad;
  if (m.prefixOn == 0) return 0;
  let added = 0;
  for (let b = 0; b < n; b++) added += insertOne(m, ids + (<usize>b << 2), hashes + (<usize>b << 4));
  touchVisited(m, ids, n);
  m.blocksInserted += <u64>added;
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

// Chain hash -> block id: open addressing with linear probing. An entry is
// 8 bytes, (fingerprint, id): the fingerprint is the 32 hash bits that pick
// the home slot, so probing and removal rarely need the block's record; the
// full key lives in the block's record. id 0 marks an empty slot (id 0 is the
// padding block and is never cached). Removal shifts later entries back
// instead of leaving tombstones, so lookups never slow down as entries churn.

import { Manager, hashPtr } from "./layout";

@inline function fingerprint(lo: u64): u32 {
  return <u32>(lo ^ (lo >> 32));
}

@inline function slotAddr(m: Manager, i: i32): usize {
  return m.table + (<usize>i << 3);
}

@inline function fpAddr(m: Manager, id: i32): usize {
  return m.fps + (<usize>id << 2);
}

@inline function idAt(m: Manager, i: i32): i32 {
  return load<i32>(slotAddr(m, i), 4);
}

/** Address of the home slot of the 16-byte hash at `key` (for prefetching reads). */
@inline export function tableHome(m: Manager, key: usize): usize {
  return slotAddr(m, <i32>fingerprint(load<u64>(key)) & m.tableMask);
}

/** Where the last tableFind that found nothing stopped: the empty slot the key would go to. */
let missSlot: i32 = 0;

/**
 * The cached id whose chain hash is the 16 bytes at `key`, or 0 (then
 * tableInsertAtMiss can add the key without probing again).
 */
export function tableFind(m: Manager, key: usize): i32 {
  const lo = load<u64>(key);
  const hi = load<u64>(key, 8);
  const fp = fingerprint(lo);
  const mask = m.tableMask;
  let i = <i32>fp & mask;
  while (true) {
    const a = slotAddr(m, i);
    const id = load<i32>(a, 4);
    if (id == 0) {
      missSlot = i;
      return 0;
    }
    if (load<u32>(a) == fp) {
      const h = hashPtr(m, id);
      if (load<u64>(h) == lo && load<u64>(h, 8) == hi) return id;
    }
    i = (i + 1) & mask;
  }
}

/** Adds `id` under the hash already stored in its record (the key must be absent). */
export function tableInsert(m: Manager, id: i32): void {
  const fp = fingerprint(load<u64>(hashPtr(m, id)));
  store<u32>(fpAddr(m, id), fp);
  const mask = m.tableMask;
  let i = <i32>fp & mask;
  while (idAt(m, i) != 0) i = (i + 1) & mask;
  const a = slotAddr(m, i);
  store<u32>(a, fp);
  store<i32>(a, id, 4);
}

/**
 * Adds `id` under the hash in its record at the slot where the last
 * tableFind (of that hash, with no table change since) found nothing.
 */
export function tableInsertAtMiss(m: Manager, id: i32): void {
  const a = slotAddr(m, missSlot);
  const fp = fingerprint(load<u64>(hashPtr(m, id)));
  store<u32>(fpAddr(m, id), fp);
  store<u32>(a, fp);
  store<i32>(a, id, 4);
}

/** Removes `id` (which must be present). */
export function tableRemove(m: Manager, id: i32): void {
  // The header's fields in locals: a store to linear memory could alias them
  // as far as the compilers know, so they would be reloaded on every step.
  const table = m.table;
  const mask = m.tableMask;
  let i = <i32>load<u32>(m.fps + (<usize>id << 2)) & mask;
  while (load<i32>(table + (<usize>i << 3), 4) != id) i = (i + 1) & mask;
  // Backward shift: pull later entries of the probe run into the hole when
  // their home slot does not lie cyclically in (hole, their position].
  let j = i;
  while (true) {
    j = (j + 1) & mask;
    const aj = table + (<usize>j << 3);
    const entry = load<u64>(aj);
    if (<i32>(entry >> 32) == 0) break;
    const home = <i32>(<u32>entry) & mask;
    const stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      store<u64>(table + (<usize>i << 3), entry);
      i = j;
    }
  }
  store<u64>(table + (<usize>i << 3), 0);
}

/** Audit: number of entries, or -1 if some entry is wrong or unreachable from its home slot. */
export function tableCount(m: Manager): i32 {
  let n = 0;
  for (let i = 0; i <= m.tableMask; i++) {
    const id = idAt(m, i);
    if (id == 0) continue;
    if (id < 0 || id >= m.numBlocks) return -1;
    const fp = fingerprint(load<u64>(hashPtr(m, id)));
    if (load<u32>(slotAddr(m, i)) != fp || load<u32>(fpAddr(m, id)) != fp) return -1;
    if (tableFind(m, hashPtr(m, id)) != id) return -1;
    n++;
  }
  return n;
}

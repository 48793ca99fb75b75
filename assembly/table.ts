// Chain hash -> block id: open addressing with linear probing over an i32
// array (0 = empty: id 0 is the padding block and is never cached). The key
// lives in the block's own hash slot, so an entry is just the id. Removal
// shifts later entries back instead of leaving tombstones, so lookups never
// slow down as entries come and go.

import { Manager, hashPtr } from "./layout";

@inline function slotOf(m: Manager, lo: u64): i32 {
  return <i32>(<u32>(lo ^ (lo >> 32))) & m.tableMask;
}

@inline function entry(m: Manager, i: i32): i32 {
  return load<i32>(m.table + (<usize>i << 2));
}

@inline function setEntry(m: Manager, i: i32, id: i32): void {
  store<i32>(m.table + (<usize>i << 2), id);
}

/** The cached id whose chain hash is the 16 bytes at `key`, or 0. */
export function tableFind(m: Manager, key: usize): i32 {
  const lo = load<u64>(key);
  const hi = load<u64>(key, 8);
  let i = slotOf(m, lo);
  while (true) {
    const id = entry(m, i);
    if (id == 0) return 0;
    const h = hashPtr(m, id);
    if (load<u64>(h) == lo && load<u64>(h, 8) == hi) return id;
    i = (i + 1) & m.tableMask;
  }
}

/** Adds `id` under the hash already stored in its slot (the key must be absent). */
export function tableInsert(m: Manager, id: i32): void {
  let i = slotOf(m, load<u64>(hashPtr(m, id)));
  while (entry(m, i) != 0) i = (i + 1) & m.tableMask;
  setEntry(m, i, id);
}

/** Removes `id` (which must be present). */
export function tableRemove(m: Manager, id: i32): void {
  const mask = m.tableMask;
  let i = slotOf(m, load<u64>(hashPtr(m, id)));
  while (entry(m, i) != id) i = (i + 1) & mask;
  // Backward shift: pull later entries of the probe run into the hole when
  // their home slot does not lie cyclically in (hole, their position].
  let j = i;
  while (true) {
    j = (j + 1) & mask;
    const e = entry(m, j);
    if (e == 0) break;
    const home = slotOf(m, load<u64>(hashPtr(m, e)));
    const stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      setEntry(m, i, e);
      i = j;
    }
  }
  setEntry(m, i, 0);
}

/** Audit: number of entries, or -1 if some entry is not found from its home slot. */
export function tableCount(m: Manager): i32 {
  let n = 0;
  for (let i = 0; i <= m.tableMask; i++) {
    const id = entry(m, i);
    if (id == 0) continue;
    if (id < 0 || id >= m.numBlocks) return -1;
    if (tableFind(m, hashPtr(m, id)) != id) return -1;
    n++;
  }
  return n;
}

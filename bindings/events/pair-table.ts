// The removal both of the index's open-addressing tables use. Each keeps its
// entries as pairs in one Int32Array: entry number + 1 (0: empty) and the
// entry's hash, probed linearly from the hash's home position.

/**
 * Empties position `i` of `tab` and moves later entries of its probe run
 * back into the hole wherever their home allows (backward shift), so that a
 * lookup never stops at a gap before its entry and no tombstones pile up.
 */
export function removePair(tab: Int32Array, mask: number, i: number): void {
  for (let j = (i + 1) & mask; tab[2 * j] !== 0; j = (j + 1) & mask) {
    const home = tab[2 * j + 1]! & mask;
    const stays = i <= j ? i < home && home <= j : i < home || home <= j;
    if (!stays) {
      tab[2 * i] = tab[2 * j]!;
      tab[2 * i + 1] = tab[2 * j + 1]!;
      i = j;
    }
  }
  tab[2 * i] = 0;
}

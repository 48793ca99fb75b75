// An open-addressing table of entry numbers, the one the router index and the
// replay's KV-cache store both keep: pairs of (entry + 1, the entry's 32-bit
// hash) in one Int32Array, 0 marking an empty pair, linear probing from the
// hash's home position, at most half full. Each pair keeps its hash so that
// probes, growth and the shift after a deletion read this array alone: the
// entries' own data is megabytes, and every other array touched is a cache
// miss. Lookups compare keys the table does not know, so its users walk
// `tab` themselves (see find in the users); the table places, moves and
// removes pairs.

export class PairTable {
  /** Pairs: entry + 1 (0: empty), the entry's hash. */
  tab: Int32Array;
  /** Pairs in `tab`, less one (a power of two, less one). */
  mask: number;
  /** Entries held. */
  size = 0;

  /** `pairs`: the starting number of pairs, a power of two >= 2. */
  constructor(pairs = 1024) {
    this.tab = new Int32Array(pairs * 2);
    this.mask = pairs - 1;
  }

  /** Adds `entry` with hash `h` (doubling the table first if it would pass half full). */
  insert(entry: number, h: number): void {
    if ((this.size + 1) * 2 > this.mask + 1) this.grow();
    this.place(entry, h);
    this.size++;
  }

  /** Takes `entry` (hash `h`) out. */
  remove(entry: number, h: number): void {
    this.shiftInto(this.positionOf(entry, h));
    this.size--;
  }

  /** `next` takes `entry`'s pair (the same key, so the same hash `h`). */
  replace(entry: number, h: number, next: number): void {
    this.tab[2 * this.positionOf(entry, h)] = next + 1;
  }

  /** The longest distance of a pair from its hash's home position (what a lookup may walk). */
  longestProbe(): number {
    const { tab, mask } = this;
    let most = 0;
    for (let i = 0; i <= mask; i++) {
      if (tab[2 * i] === 0) continue;
      const d = (i - (tab[2 * i + 1]! & mask)) & mask;
      if (d > most) most = d;
    }
    return most;
  }

  private positionOf(entry: number, h: number): number {
    const tab = this.tab;
    let i = h & this.mask;
    while (tab[2 * i] !== entry + 1) i = (i + 1) & this.mask;
    return i;
  }

  private place(entry: number, h: number): void {
    const tab = this.tab;
    let i = h & this.mask;
    while (tab[2 * i] !== 0) i = (i + 1) & this.mask;
    tab[2 * i] = entry + 1;
    tab[2 * i + 1] = h;
  }

  /**
   * Empties pair `i` and moves later pairs of its probe run back into the
   * hole wherever their home allows (backward shift), so that a lookup never
   * stops at a gap before its entry and no tombstones pile up.
   */
  private shiftInto(i: number): void {
    const tab = this.tab;
    const mask = this.mask;
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

  private grow(): void {
    const old = this.tab;
    this.tab = new Int32Array(old.length * 2);
    this.mask = this.tab.length / 2 - 1;
    for (let i = 0; i < old.length; i += 2) if (old[i] !== 0) this.place(old[i]! - 1, old[i + 1]!);
  }
}

// Model of the prefix cache: key -> block id, with the LRU as a Map's
// insertion order (first = least recent). Written for clarity, not speed:
// eviction walks the whole LRU and skips held blocks, as the reference does.

export class ModelPrefixCache {
  /** key -> block id, least recent first. */
  readonly entries = new Map<string, number>();
  /** block id -> its key, for cached ids. */
  readonly keyOf = new Map<number, string>();

  has(key: string): boolean {
    return this.entries.has(key);
  }

  get(key: string): number | undefined {
    return this.entries.get(key);
  }

  add(key: string, id: number): void {
    this.entries.set(key, id);
    this.keyOf.set(id, key);
  }

  remove(key: string): void {
    const id = this.entries.get(key)!;
    this.entries.delete(key);
    this.keyOf.delete(id);
  }

  /** Moves the keys to the most recent end, the last listed first (so the first ends most recent). */
  touchReversed(keys: string[]): void {
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i]!;
      const id = this.entries.get(k)!;
      this.entries.delete(k);
      this.entries.set(k, id);
    }
  }

  /** Cached ids, least recent first. */
  lruOrder(): number[] {
    return [...this.entries.values()];
  }

  get size(): number {
    return this.entries.size;
  }
}

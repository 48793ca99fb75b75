// Model of the prefix cache: key -> block id, with the LRU as a Map's
// insertion order (first = least recent). Written for clarity, not speed:
// eviction walks the whole LRU and skips held blocks, as the reference does.
// The other policies scan every entry for the smallest (policy key, recency).

export type ModelEvictionPolicy = 'lru' | 'lfu' | 'priority';

/** A token range with a priority (see bindings/managers/retention.ts), end/duration Infinity when open. */
export interface ModelRetention {
  start: number;
  end: number;
  priority: number;
  duration: number;
}

export const MODEL_DEFAULT_PRIORITY = 35;

/**
 * Token ranges as a caller writes them ({ start?, end?, priority, duration? }),
 * checked and normalized: start defaults to 0, end and duration to Infinity;
 * start >= 0, end > start, priority an integer in 0..100, duration >= 0.
 */
export function modelRetentionRanges(ranges: unknown): ModelRetention[] {
  if (!Array.isArray(ranges)) throw new TypeError('model: ranges is not an array');
  return ranges.map((r: unknown, i) => {
    if (r === null || typeof r !== 'object') throw new TypeError(`model: ranges[${i}] is not an object`);
    const o = r as Record<string, unknown>;
    for (const k of Object.keys(o)) if (!['start', 'end', 'priority', 'duration'].includes(k)) throw new TypeError(`model: ranges[${i}].${k}`);
    const int = (k: string, v: unknown, min: number, max: number): number => {
      if (typeof v !== 'number') throw new TypeError(`model: ranges[${i}].${k} is not a number`);
      if (!Number.isInteger(v) || v < min || v > max) throw new RangeError(`model: ranges[${i}].${k} = ${v}`);
      return v;
    };
    const start = int('start', o['start'] ?? 0, 0, 0x7fffffff);
    const end = o['end'] === undefined ? Infinity : int('end', o['end'], start + 1, 0x7fffffff);
    const priority = int('priority', o['priority'], 0, 100);
    const d = o['duration'] ?? Infinity;
    if (typeof d !== 'number') throw new TypeError(`model: ranges[${i}].duration is not a number`);
    if (!(d >= 0)) throw new RangeError(`model: ranges[${i}].duration = ${d}`);
    return { start, end, priority, duration: d };
  });
}

/** The (priority, duration) of the block holding tokens [lo, hi): the highest overlapping priority, its longest duration. */
export function blockRetention(ranges: readonly ModelRetention[], lo: number, hi: number): [number, number] {
  const over = ranges.filter((r) => r.start < hi && r.end > lo);
  if (over.length === 0) return [MODEL_DEFAULT_PRIORITY, Infinity];
  const top = Math.max(...over.map((r) => r.priority));
  return [top, Math.max(...over.filter((r) => r.priority === top).map((r) => r.duration))];
}

export class ModelPrefixCache {
  /** key -> block id, least recent first. */
  readonly entries = new Map<string, number>();
  /** block id -> its key, for cached ids. */
  readonly keyOf = new Map<number, string>();
  /** block id -> its policy key (LFU: hits counted, see touchReversed), for cached ids. */
  readonly policyKey = new Map<number, number>();
  /** block id -> when its priority ends (the priority policy), for cached ids. */
  readonly expiry = new Map<number, number>();
  /** The priority policy's clock. */
  now = 0;
  /** How many entries have each stored policy key (to know the smallest one without a scan). */
  private readonly keyCount = new Map<number, number>();

  private setKey(id: number, k: number): void {
    const old = this.policyKey.get(id);
    if (old !== undefined) this.countKey(old, -1);
    this.policyKey.set(id, k);
    this.countKey(k, 1);
  }

  private countKey(k: number, d: number): void {
    const n = (this.keyCount.get(k) ?? 0) + d;
    if (n === 0) this.keyCount.delete(k);
    else this.keyCount.set(k, n);
  }

  /**
   * No entry's key is below this: the smallest stored key (and, under the
   * priority policy, at most 35, which an ended retention falls back to).
   */
  private keyFloor(): number {
    let min = Infinity;
    for (const k of this.keyCount.keys()) if (k < min) min = k;
    return this.policy === 'priority' ? Math.min(min, MODEL_DEFAULT_PRIORITY) : min;
  }

  constructor(readonly policy: ModelEvictionPolicy = 'lru') {}

  /** The key eviction orders by: hits (LFU), the priority unless its retention ended (priority), 0 (LRU). */
  key(id: number): number {
    if (this.policy === 'priority' && this.expiry.get(id)! <= this.now) return MODEL_DEFAULT_PRIORITY;
    return this.policyKey.get(id)!;
  }

  /** The priority policy: the entry takes `priority` until `expiry`. */
  setPriority(key: string, priority: number, expiry: number): void {
    const id = this.entries.get(key)!;
    this.setKey(id, priority);
    this.expiry.set(id, expiry);
  }

  has(key: string): boolean {
    return this.entries.has(key);
  }

  get(key: string): number | undefined {
    return this.entries.get(key);
  }

  add(key: string, id: number): void {
    this.entries.set(key, id);
    this.keyOf.set(id, key);
    this.setKey(id, this.policy === 'priority' ? MODEL_DEFAULT_PRIORITY : 0);
    this.expiry.set(id, Infinity);
  }

  remove(key: string): void {
    const id = this.entries.get(key)!;
    this.entries.delete(key);
    this.keyOf.delete(id);
    this.countKey(this.policyKey.get(id)!, -1);
    this.policyKey.delete(id);
    this.expiry.delete(id);
  }

  /** Moves the keys to the most recent end, the last listed first (so the first ends most recent). */
  touchReversed(keys: string[]): void {
    if (this.policy === 'lfu') {
      // One hit each, root first, none above the entry before it in the batch.
      let cap = Infinity;
      for (const k of keys) {
        const id = this.entries.get(k)!;
        const n = Math.min(this.policyKey.get(id)! + 1, cap);
        this.setKey(id, n);
        cap = n;
      }
    }
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i]!;
      const id = this.entries.get(k)!;
      this.entries.delete(k);
      this.entries.set(k, id);
    }
  }

  /** Cached ids in eviction order: least recent first, after the policy key when there is one. */
  lruOrder(): number[] {
    const ids = [...this.entries.values()];
    if (this.policy === 'lru') return ids;
    const pos = new Map(ids.map((id, i) => [id, i]));
    return ids.sort((a, b) => this.key(a) - this.key(b) || pos.get(a)! - pos.get(b)!);
  }

  /**
   * The next victim: the first id in lruOrder() that `evictable` accepts, or
   * undefined. A scan in recency order that keeps the smallest key; it stops
   * early at an entry whose key is the floor, since nothing can beat that.
   */
  victim(evictable: (id: number) => boolean): number | undefined {
    const floor = this.keyFloor();
    let best: number | undefined;
    let bestKey = Infinity;
    for (const id of this.entries.values()) {
      if (!evictable(id)) continue;
      const k = this.key(id);
      if (k === floor) return id;
      if (k < bestKey) {
        best = id;
        bestKey = k;
      }
    }
    return best;
  }

  get size(): number {
    return this.entries.size;
  }
}

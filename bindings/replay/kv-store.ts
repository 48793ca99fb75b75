// The KV-cache store of a host-tier replay with `storeBlocks` (docs/replay.md,
// the store tier): a set of block chain hashes of bounded size, least
// recently used first out. Every block the host tier receives from the device
// is also written to the store; a prefill asks it for the blocks the host
// lacks, and it delivers the leading ones it holds.

/** What the store did over a replay. */
export interface KvStoreResult {
  /** Blocks the store holds at most. */
  storeBlocks: number;
  /** Blocks written to it (offloads; a block it held already is rewritten and counts again). */
  blocksWritten: number;
  /** Blocks asked for by prefetches (the host lacked them). */
  blocksRequested: number;
  /** Of those, blocks it delivered to the host. */
  blocksDelivered: number;
  /** Blocks dropped to make room. */
  blocksEvicted: number;
  /** Blocks held at the end. */
  blocksAtEnd: number;
}

/** A 16-byte chain hash as a Map key (8 UTF-16 units: no allocation beyond the string). */
function keyOf(h: Uint8Array): string {
  return String.fromCharCode(
    h[0]! | (h[1]! << 8), h[2]! | (h[3]! << 8), h[4]! | (h[5]! << 8), h[6]! | (h[7]! << 8),
    h[8]! | (h[9]! << 8), h[10]! | (h[11]! << 8), h[12]! | (h[13]! << 8), h[14]! | (h[15]! << 8),
  );
}

/**
 * The store: a Map's insertion order is its recency order (a touch deletes
 * and re-inserts). The oldest entry is read through one iterator kept for
 * the store's life: taking the first key of a fresh iterator would step
 * over every deleted entry still in the table (V8 compacts lazily), which
 * made a full store ten times slower than an empty one. A Map iterator
 * never yields an entry twice and skips deleted ones, and a touched entry
 * is re-inserted behind it, so its next key is always the least recent.
 */
export class ReplayKvStore {
  private readonly held = new Map<string, true>();
  private readonly oldest = this.held.keys();
  private written = 0;
  private requested = 0;
  private delivered = 0;
  private evicted = 0;

  constructor(readonly capacity: number) {}

  /** Writes one block (it becomes the most recently used). */
  write(hash: Uint8Array): void {
    const k = keyOf(hash);
    this.written++;
    if (!this.held.delete(k) && this.held.size >= this.capacity) {
      this.held.delete(this.oldest.next().value!);
      this.evicted++;
    }
    this.held.set(k, true);
  }

  /**
   * Asked for `hashes` in prompt order: the count of leading ones it holds
   * (each becomes the most recently used). A prefetch delivers a prefix only.
   */
  deliver(hashes: readonly { readonly hash: Uint8Array }[]): number {
    this.requested += hashes.length;
    let n = 0;
    for (; n < hashes.length; n++) {
      const k = keyOf(hashes[n]!.hash);
      if (!this.held.delete(k)) break;
      this.held.set(k, true);
    }
    this.delivered += n;
    return n;
  }

  result(): KvStoreResult {
    return {
      storeBlocks: this.capacity,
      blocksWritten: this.written,
      blocksRequested: this.requested,
      blocksDelivered: this.delivered,
      blocksEvicted: this.evicted,
      blocksAtEnd: this.held.size,
    };
  }
}

// KV-cache events as the bindings hand them out, decoded from the records the
// core appends (assembly/events.ts) when recording is on. docs/events.md
// says what a consumer can rely on.

import {
  EV_BLOCK_ID, EV_HASH, EV_HEADER, EV_KIND, EV_NUM_TOKENS, EV_PARENT, EV_PARENT_HASH, EV_PARENT_NONE, EV_PARENT_SALT, EV_REMOVED, EV_STORED,
} from '../core/abi.js';
import type { CoreInstance } from '../core/core-instance.js';
import type { MemViews } from '../core/views.js';

/** The attention kind of a KV-cache group, as vLLM's `kv_cache_spec_kind` names it. */
export type KVCacheSpecKind = 'full_attention' | 'sliding_window';

/** The KV-cache group an event belongs to (vLLM's `group_idx` and cache spec). */
export interface KVCacheGroup {
  /** The group's index (a composite pool's sub-manager; 0 for a plain pool). */
  readonly index: number;
  readonly kind: KVCacheSpecKind;
  /** The window in tokens of a sliding-window group, else null. */
  readonly slidingWindow: number | null;
}

/** Where a manager's events come from: its storage medium (vLLM's `medium`) and its group. */
export interface KVEventSource {
  /** "GPU" for a rank's device blocks, "CPU" for its host tier. */
  readonly medium: string;
  readonly group: KVCacheGroup;
}

/** The group of a plain pool's blocks. */
export const FULL_ATTENTION_GROUP: KVCacheGroup = Object.freeze({ index: 0, kind: 'full_attention', slidingWindow: null });
/** A rank's device blocks. */
export const GPU_SOURCE: KVEventSource = Object.freeze({ medium: 'GPU', group: FULL_ATTENTION_GROUP });
/** A rank's host-tier blocks. */
export const CPU_SOURCE: KVEventSource = Object.freeze({ medium: 'CPU', group: FULL_ATTENTION_GROUP });

export interface RecordEventsOptions {
  /**
   * Keep what each stored event said, so that `snapshotEvents` can announce
   * the cache again to a consumer that joins late (default false). It costs
   * 20 + 4 x blockSize bytes of Wasm memory per block (about as much again
   * as the manager) and a copy of each stored block's tokens. Taken when
   * recording starts.
   */
  snapshots?: boolean;
}

/** Checks `options` of recordEvents; returns whether snapshots are kept. */
export function parseRecordOptions(options: RecordEventsOptions | undefined): boolean {
  if (options === undefined) return false;
  if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object, got ${String(options)}`);
  for (const k of Object.keys(options)) if (k !== 'snapshots') throw new TypeError(`options: unknown option ${JSON.stringify(k)} (known: snapshots)`);
  const s = options.snapshots ?? false;
  if (typeof s !== 'boolean') throw new TypeError(`options.snapshots must be a boolean, got ${String(s)}`);
  return s;
}

/** A block entered the prefix cache. */
export interface BlockStoredEvent {
  type: 'stored';
  dpRank: number;
  blockId: number;
  /** Its 16-byte chain hash (XXH3-128: low 64 bits then high 64 bits, little endian). */
  hash: Uint8Array;
  /**
   * The previous block's hash, null only for the first block of a sequence
   * (block 0), as vLLM sends it. A consumer that joined late may not know it.
   */
  parentHash: Uint8Array | null;
  /** The block's tokens (`tokenIds.length` is the token count, the block size). */
  tokenIds: Int32Array;
  /** The cache salt of a salted sequence's block 0 (vLLM's `extra_keys` of that block), else null. */
  salt: string | null;
  medium: string;
  group: KVCacheGroup;
}

/** A block left the prefix cache (evicted). */
export interface BlockRemovedEvent {
  type: 'removed';
  dpRank: number;
  blockId: number;
  hash: Uint8Array;
  medium: string;
  group: KVCacheGroup;
}

/** Every block of the rank's prefix cache on `medium` left it at once. */
export interface AllBlocksClearedEvent {
  type: 'cleared';
  dpRank: number;
  medium: string;
}

export type KVEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

/**
 * Cache salts by their digest, so that a salted block 0 (whose record holds
 * the digest where a parent hash would be) is announced with its salt. A pool
 * registers each salt once, when a sequence that has one is placed.
 */
export class SaltNames {
  private readonly names = new Map<string, string>();
  add(digest: Uint8Array, salt: string): void {
    this.names.set(digestKey(digest, 0), salt);
  }
  /** The salt whose digest is the 16 bytes at `u8[at..]`, or null. */
  lookup(u8: Uint8Array, at: number): string | null {
    return this.names.get(digestKey(u8, at)) ?? null;
  }
}

function digestKey(u8: Uint8Array, at: number): string {
  let s = '';
  for (let i = 0; i < 16; i++) s += String.fromCharCode(u8[at + i]!);
  return s;
}

/**
 * Receives a manager's raw records, `len` bytes at `ptr` of its own core
 * instance `rt`, valid during the call only.
 */
export type KVEventRecordVisitor = (source: KVEventSource, rt: CoreInstance, ptr: number, len: number) => void;

/** Decodes `len` bytes of records at `ptr` of `mem` into events of rank `dpRank` appended to `out`. */
export function decodeEvents(
  mem: MemViews, ptr: number, len: number, dpRank: number, source: KVEventSource, salts: SaltNames | null, out: KVEvent[],
): void {
  const i32 = mem.i32;
  const u8 = mem.u8;
  const { medium, group } = source;
  let p = ptr;
  const end = ptr + len;
  while (p < end) {
    const w = p >>> 2;
    const kind = i32[w + EV_KIND / 4]!;
    if (kind === EV_STORED) {
      const ntok = i32[w + EV_NUM_TOKENS / 4]!;
      const parent = i32[w + EV_PARENT / 4]!;
      const hasParent = parent !== EV_PARENT_NONE && parent !== EV_PARENT_SALT;
      out.push({
        type: 'stored',
        dpRank,
        blockId: i32[w + EV_BLOCK_ID / 4]!,
        hash: u8.slice(p + EV_HASH, p + EV_HASH + 16),
        parentHash: hasParent ? u8.slice(p + EV_PARENT_HASH, p + EV_PARENT_HASH + 16) : null,
        tokenIds: i32.slice(w + EV_HEADER / 4, w + EV_HEADER / 4 + ntok),
        salt: parent === EV_PARENT_SALT ? (salts?.lookup(u8, p + EV_PARENT_HASH) ?? null) : null,
        medium,
        group,
      });
      p += EV_HEADER + ntok * 4;
    } else if (kind === EV_REMOVED) {
      out.push({ type: 'removed', dpRank, blockId: i32[w + EV_BLOCK_ID / 4]!, hash: u8.slice(p + EV_HASH, p + EV_HASH + 16), medium, group });
      p += EV_HEADER;
    } else {
      out.push({ type: 'cleared', dpRank, medium });
      p += EV_HEADER;
    }
  }
}

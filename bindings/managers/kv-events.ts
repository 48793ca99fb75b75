// KV-cache events as the bindings hand them out, decoded from the records the
// core appends (assembly/events.ts) when recording is on.

import { EV_BLOCK_ID, EV_HASH, EV_HAS_PARENT, EV_HEADER, EV_KIND, EV_NUM_TOKENS, EV_PARENT_HASH, EV_REMOVED, EV_STORED } from '../core/abi.js';
import type { MemViews } from '../core/views.js';

/** A block entered the prefix cache. */
export interface BlockStoredEvent {
  type: 'stored';
  dpRank: number;
  blockId: number;
  /** Its 16-byte chain hash (XXH3-128: low 64 bits then high 64 bits, little endian). */
  hash: Uint8Array;
  /** The previous block's hash when the consumer was told about it (and not told to forget it), else null. */
  parentHash: Uint8Array | null;
  /** The block's tokens (`tokenIds.length` is the token count, the block size). */
  tokenIds: Int32Array;
}

/** A block left the prefix cache (evicted). */
export interface BlockRemovedEvent {
  type: 'removed';
  dpRank: number;
  blockId: number;
  hash: Uint8Array;
}

/** Every block of the rank's prefix cache left it at once. */
export interface AllBlocksClearedEvent {
  type: 'cleared';
  dpRank: number;
}

export type KVEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

/** Decodes `len` bytes of records at `ptr` of the memory `mem` views (current views of the manager's own core). */
export function decodeEvents(mem: MemViews, ptr: number, len: number, dpRank: number, out: KVEvent[]): void {
  const i32 = mem.i32;
  const u8 = mem.u8;
  let p = ptr;
  const end = ptr + len;
  while (p < end) {
    const w = p >>> 2;
    const kind = i32[w + EV_KIND / 4]!;
    if (kind === EV_STORED) {
      const ntok = i32[w + EV_NUM_TOKENS / 4]!;
      out.push({
        type: 'stored',
        dpRank,
        blockId: i32[w + EV_BLOCK_ID / 4]!,
        hash: u8.slice(p + EV_HASH, p + EV_HASH + 16),
        parentHash: i32[w + EV_HAS_PARENT / 4] !== 0 ? u8.slice(p + EV_PARENT_HASH, p + EV_PARENT_HASH + 16) : null,
        tokenIds: i32.slice(w + EV_HEADER / 4, w + EV_HEADER / 4 + ntok),
      });
      p += EV_HEADER + ntok * 4;
    } else if (kind === EV_REMOVED) {
      out.push({ type: 'removed', dpRank, blockId: i32[w + EV_BLOCK_ID / 4]!, hash: u8.slice(p + EV_HASH, p + EV_HASH + 16) });
      p += EV_HEADER;
    } else {
      out.push({ type: 'cleared', dpRank });
      p += EV_HEADER;
    }
  }
}

// KV-cache events as the bindings hand them out, decoded from the records the
// core appends (assembly/events.ts) when recording is on.

import { mem } from '../core/instance.js';

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

const EV_STORED = 1;
const EV_REMOVED = 2;
const EV_HEADER = 48;

/** Decodes `len` bytes of records at `ptr` (views must be current). */
export function decodeEvents(ptr: number, len: number, dpRank: number, out: KVEvent[]): void {
  const i32 = mem.i32;
  const u8 = mem.u8;
  let p = ptr;
  const end = ptr + len;
  while (p < end) {
    const w = p >>> 2;
    const kind = i32[w]!;
    if (kind === EV_STORED) {
      const ntok = i32[w + 3]!;
      out.push({
        type: 'stored',
        dpRank,
        blockId: i32[w + 1]!,
        hash: u8.slice(p + 16, p + 32),
        parentHash: i32[w + 2] !== 0 ? u8.slice(p + 32, p + 48) : null,
        tokenIds: i32.slice(w + EV_HEADER / 4, w + EV_HEADER / 4 + ntok),
      });
      p += EV_HEADER + ntok * 4;
    } else if (kind === EV_REMOVED) {
      out.push({ type: 'removed', dpRank, blockId: i32[w + 1]!, hash: u8.slice(p + 16, p + 32) });
      p += EV_HEADER;
    } else {
      out.push({ type: 'cleared', dpRank });
      p += EV_HEADER;
    }
  }
}

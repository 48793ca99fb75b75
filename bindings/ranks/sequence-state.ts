// What the pool and its rank managers know of one sequence. `Sequence`
// (pool/sequence.ts) is its public face and reads it; only the pool and the
// rank managers write it, through the fields below, each with one meaning.

import type { CompositeBlockTables } from '../managers/composite-block-tables.js';
import type { Retention } from '../managers/retention.js';

/** A sequence's blocks in the host tier (the reference's host_kv_state). */
export interface HostBlocks {
  /** Host ids in logical order; [0, numBlocks) in use. */
  table: Int32Array;
  numBlocks: number;
  /** Prompt tokens whose KV the host holds (a multiple of the block size). */
  kvTokens: number;
  /** Blocks a prefetch from the KV-cache store is filling (host ids after the first kvTokens / B), or null. */
  prefetch: { readonly dst: Int32Array; readonly hashes: Uint8Array } | null;
}

export class SequenceState {
  /** Token buffer: [0, numTokens) are the sequence's tokens; it grows by doubling. */
  tokens: Int32Array;
  numTokens: number;
  numPromptTokens: number;
  /** Tokens whose KV is computed (the scheduler advances it). */
  kvCached = 0;
  /** The KV block table: physical ids [0, numBlocks) in logical order. */
  table: Int32Array;
  numBlocks = 0;
  /** Leading blocks that came from the prefix cache. */
  shared = 0;
  /**
   * Blocks [0, hashed) carry, on their ids, the chain hash of these tokens
   * (matched, or cached by this pool): a later cache() takes those keys
   * instead of hashing the tokens again. Lowered by every change to a
   * table entry below it.
   */
  hashed = 0;
  /**
   * The first block it shares with a fork or beam sibling that may still
   * write tokens into it (-1: none). Siblings may write different tokens
   * there, and the first to cache such a block keys it, so neither trusts
   * the hash stamped on it: `hashed` stays below it, and blocks from it on
   * are keyed by this sequence's own tokens.
   */
  forkSharedFrom = -1;
  /** The next allocation that needs no new block copies the shared last block first (beam fork). */
  needSwap = false;
  /**
   * Beam search as the reference does it: the source beam's blocks (one
   * reference each, taken when adopted) that replace this sequence's table
   * at its next allocation; null when none is pending.
   */
  beamSource: { table: Int32Array; shared: number; hashed: number; forkSharedFrom: number } | null = null;
  /** The dp rank, -1 until the sequence is placed. */
  dpRank = -1;
  /** The single id, -1 when it holds none. */
  single = -1;
  /** The pool it was placed in: a sequence is used with one pool only. */
  owner: object | null = null;
  /** The cache salt (null: none) and its 16-byte digest, block 0's parent hash (set when placed). */
  salt: string | null = null;
  saltKey: Uint8Array | null = null;
  /** Token ranges with eviction priorities (the 'priority' policy), null for none. */
  retention: Retention[] | null = null;
  /** Composite ranks: one block table per sub-manager. */
  composite: CompositeBlockTables | null = null;
  /** Linear state: the live slot (-1 when none) and whether it holds this sequence's state. */
  linearSlot = -1;
  linearInit = false;
  /** Host tier: the sequence's host blocks (null when it holds none). */
  host: HostBlocks | null = null;

  /** `table`: an empty table to fill (a replay hands on a finished sequence's). */
  constructor(tokens: Int32Array, numTokens: number, table: Int32Array = new Int32Array(16)) {
    this.tokens = tokens;
    this.numTokens = numTokens;
    this.numPromptTokens = numTokens;
    this.table = table;
  }

  /** Room for `n` more tokens in the token buffer (it grows by doubling). */
  reserveTokens(n: number): void {
    const need = this.numTokens + n;
    if (need <= this.tokens.length) return;
    let cap = Math.max(16, this.tokens.length * 2);
    while (cap < need) cap *= 2;
    const t = new Int32Array(cap);
    t.set(this.tokens.subarray(0, this.numTokens));
    this.tokens = t;
  }

  /** Room for `n` more blocks in the table. */
  reserveBlocks(n: number): void {
    const need = this.numBlocks + n;
    if (need <= this.table.length) return;
    let cap = this.table.length * 2;
    while (cap < need) cap *= 2;
    const t = new Int32Array(cap);
    t.set(this.table.subarray(0, this.numBlocks));
    this.table = t;
  }

  /** Forgets every block and the computed count (the rank released them). */
  resetBlocks(): void {
    this.numBlocks = 0;
    this.hashed = 0;
    this.forkSharedFrom = -1;
    this.shared = 0;
    this.kvCached = 0;
    this.needSwap = false;
  }

  /** Notes that blocks from `i` on are shared with a sibling that may write into them. */
  shareWritableFrom(i: number): void {
    if (i >= this.numBlocks) return;
    if (this.forkSharedFrom < 0 || i < this.forkSharedFrom) this.forkSharedFrom = i;
    this.unstampFrom(i);
  }

  /** Lowers the hash watermark below a table entry that changed. */
  unstampFrom(i: number): void {
    if (this.hashed > i) this.hashed = i;
  }
}

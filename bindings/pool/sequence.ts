// A sequence as the pool sees it (docs/pool.md, Sequence): tokens, the count of tokens
// whose KV is computed, its block table (logical index -> physical id), how
// many leading blocks came from the prefix cache, its dp rank and its
// single id. All arrays grow by doubling; reads are views, not copies.

import { parseRetention, type RetentionRange } from '../managers/retention.js';
import { SequenceState } from '../ranks/sequence-state.js';
import { checkInt, checkInt32Array, describe } from '../validate.js';

/** The pool-side operations a sequence needs (fork adds references). */
export interface SequenceOwner {
  /** @internal */
  forkSequence(parent: Sequence, child: Sequence): void;
  /** @internal */
  readonly blockSize: number;
  /** @internal chain hashes at the first `nBlocks` block boundaries (16 bytes each) */
  prefixHashes(seq: Sequence, nBlocks: number): Uint8Array;
}

/** The state the next `new Sequence()` takes instead of building one (adoptBuffer). */
let adopting: SequenceState | null = null;

/**
 * @internal Sequence.fromBuffer with its arguments already checked, and
 * `table` (empty) as its block table: the replay makes one per request, and
 * the placeholder arrays a plain construction makes cost ~3% of its loop.
 */
export function adoptBuffer(buffer: Int32Array, numTokens: number, table?: Int32Array): Sequence {
  adopting = new SequenceState(buffer.length > 0 ? buffer : new Int32Array(16), numTokens, table);
  return new Sequence();
}

/** The pool a placed sequence belongs to. */
function ownerOf(s: SequenceState): SequenceOwner | null {
  return s.owner as SequenceOwner | null;
}

export interface ForkOptions {
  /**
   * The fork will write into the shared last block (a second or later beam
   * child of the same source): its next allocation that needs no new block
   * copies that block first (a beam-search swap: docs/pool.md, beam search).
   */
  swapLastBlock?: boolean;
}

export interface SequenceOptions {
  /**
   * Tenant isolation: mixed into the hash of the first block only, so
   * sequences with different salts never share prefix-cache blocks and
   * sequences with the same salt share as usual. Omitted or "" = no salt.
   */
  cacheSalt?: string;
}

export class Sequence {
  /** @internal everything the pool and its ranks know of the sequence */
  readonly state: SequenceState;

  /** A sequence whose prompt is `prompt` (int32 tokens). */
  constructor(prompt: ArrayLike<number> = [], options?: SequenceOptions) {
    if (adopting !== null) {
      this.state = adopting;
      adopting = null;
      return;
    }
    const toks = checkInt32Array('prompt', prompt);
    const salt = options === undefined ? null : parseSalt(options);
    const n = toks.length;
    const buf = new Int32Array(Math.max(16, n + (n >> 2)));
    if (toks instanceof Int32Array) buf.set(toks);
    else for (let i = 0; i < n; i++) buf[i] = toks[i]!;
    this.state = new SequenceState(buf, n);
    this.state.salt = salt;
  }

  /** Prompt tokens (the tokens it was made with). */
  get numPromptTokens(): number {
    return this.state.numPromptTokens;
  }

  /**
   * Marks token ranges with eviction priorities (used by pools with
   * evictionPolicy 'priority' when they cache this sequence's blocks; see
   * RetentionRange). Replaces earlier marks; [] removes them.
   */
  setRetention(ranges: readonly RetentionRange[]): void {
    const r = parseRetention('ranges', ranges);
    this.state.retention = r.length > 0 ? r : null;
  }

  /** The cache salt ("" when none). Settable only before the first allocation. */
  get cacheSalt(): string {
    return this.state.salt ?? '';
  }

  set cacheSalt(salt: string) {
    if (typeof salt !== 'string') throw new TypeError(`cacheSalt must be a string, got ${describe(salt)}`);
    if (this.state.owner !== null) throw new Error('cacheSalt can only be set before the sequence is first allocated (a pool takes it on its first allocate call, even one that fails)');
    this.state.salt = salt === '' ? null : salt;
  }

  /**
   * A sequence over `buffer[0, numTokens)` as its prompt, taking the buffer
   * over without a copy; its length is the room for tokens before the
   * sequence grows (e.g. prompt + the most tokens it may generate). The
   * caller must not use the buffer afterwards.
   */
  static fromBuffer(buffer: Int32Array, numTokens = buffer.length): Sequence {
    if (!(buffer instanceof Int32Array)) throw new TypeError(`buffer must be an Int32Array, got ${describe(buffer)}`);
    checkInt('numTokens', numTokens, 0, buffer.length);
    return adoptBuffer(buffer, numTokens);
  }

  /** Appends one generated token. */
  appendToken(token: number): void {
    // `token | 0` is token itself exactly for an int32 number (checkInt's
    // fast path, inline: a decode step calls this millions of times).
    if ((token | 0) !== token) checkInt('token', token, -0x80000000, 0x7fffffff);
    const s = this.state;
    if (s.numTokens === s.tokens.length) s.reserveTokens(1);
    s.tokens[s.numTokens++] = token;
  }

  /** The tokens (a view; valid until the next append). */
  get tokens(): Int32Array {
    return this.state.tokens.subarray(0, this.state.numTokens);
  }

  get numTokens(): number {
    return this.state.numTokens;
  }

  /** Tokens whose KV is computed; the caller advances it after each step. */
  get kvCachedTokens(): number {
    return this.state.kvCached;
  }

  set kvCachedTokens(n: number) {
    const s = this.state;
    if ((n | 0) !== n || n < 0 || n > s.numTokens) checkInt('kvCachedTokens', n, 0, s.numTokens);
    s.kvCached = n;
  }

  /** Physical block ids in logical order (a view; valid until the table changes). */
  get blockTable(): Int32Array {
    return this.state.table.subarray(0, this.state.numBlocks);
  }

  get numBlocks(): number {
    return this.state.numBlocks;
  }

  /** The physical id of logical block `i`. */
  blockAt(i: number): number {
    const s = this.state;
    if (!(i >= 0 && i < s.numBlocks) || !Number.isInteger(i)) {
      throw new RangeError(`i must be an integer in [0, ${s.numBlocks}), got ${describe(i)}`);
    }
    return s.table[i]!;
  }

  /** Leading blocks that came from the prefix cache. */
  get sharedBlocks(): number {
    return this.state.shared;
  }

  /** The dp rank the sequence was placed on, -1 until its first allocation. */
  get dpRank(): number {
    return this.state.dpRank;
  }

  /** Its single id (embedding id / per-sequence slot), -1 when it holds none. */
  get singleBlockId(): number {
    return this.state.single;
  }

  /** Its live linear-state slot (pools with linear state), -1 when it holds none. */
  get linearStateSlotId(): number {
    return this.state.linearSlot;
  }

  /**
   * Whether its live slot holds its recurrent state: false until its first
   * forward (which restores from a checkpoint when kvCachedTokens > 0), and
   * again after a promotion gave it a fresh slot.
   */
  get linearStateInitialized(): boolean {
    return this.state.linearInit;
  }

  /** Records that the first forward ran (the batch builder does this after building the op). */
  markLinearStateInitialized(): void {
    this.state.linearInit = true;
  }

  /**
   * The prefix hashes at its first `floor(numTokens / blockSize)` block
   * boundaries, 16 bytes each (boundary k at bytes [16(k-1), 16k)): the chain
   * hashes stamped on its KV blocks where they carry one, computed from the
   * tokens otherwise. These key the linear-state checkpoints.
   */
  prefixHashes(numTokens = this.state.numTokens): Uint8Array {
    const owner = this.requireOwner('prefixHashes');
    checkInt('numTokens', numTokens, 0, this.state.numTokens);
    return owner.prefixHashes(this, Math.floor(numTokens / owner.blockSize));
  }

  /** The prefix hash at block boundary `numTokens` (a multiple of the block size, >= 1 block). */
  prefixHash(numTokens: number): Uint8Array {
    const owner = this.requireOwner('prefixHash');
    const B = owner.blockSize;
    checkInt('numTokens', numTokens, B, this.state.numTokens);
    if (numTokens % B !== 0) throw new RangeError(`numTokens must be a multiple of the block size ${B}, got ${numTokens}`);
    const all = owner.prefixHashes(this, numTokens / B);
    return all.slice(all.length - 16);
  }

  /** True when the next allocation will copy the shared last block first. */
  get needsSwap(): boolean {
    return this.state.needSwap;
  }

  /**
   * On a composite pool, one block table per sub-manager (views; valid until
   * the tables change): positions that slid out of a window hold -1, so
   * logical positions never shift. Empty on other pools.
   */
  get compositeBlockTables(): Int32Array[] {
    return this.state.composite ? this.state.composite.views() : [];
  }

  /**
   * Slot ids of tokens [start, end): `blockTable[i / B] * B + i % B`, what an
   * attention kernel writes KV to. With `table`, the same over composite
   * table `table` and its block size; a slid-out position gives -1.
   */
  slotIds(start = 0, end = this.state.numTokens, table?: number): Int32Array {
    if (table !== undefined) return this.compositeSlotIds(start, end, table);
    const B = this.requireOwner('slotIds').blockSize;
    const s = this.state;
    checkInt('start', start);
    checkInt('end', end, start);
    if (end > s.numBlocks * B) {
      throw new RangeError(`end = ${end} is beyond the ${s.numBlocks} blocks of ${B} tokens the sequence holds`);
    }
    const out = new Int32Array(end - start);
    for (let i = start; i < end; i++) out[i - start] = s.table[(i / B) | 0]! * B + (i % B);
    return out;
  }

  private compositeSlotIds(start: number, end: number, table: number): Int32Array {
    const c = this.state.composite;
    if (!c) throw new Error('slotIds: the sequence holds no composite block tables (allocate it on a composite pool first)');
    checkInt('table', table, 0, c.count - 1);
    checkInt('start', start);
    checkInt('end', end, start);
    const B = c.blockSizes[table]!;
    const n = c.length(table);
    if (end > n * B) throw new RangeError(`end = ${end} is beyond the ${n} blocks of ${B} tokens of composite table ${table}`);
    const t = c._tables[table]!;
    const out = new Int32Array(end - start);
    for (let i = start; i < end; i++) {
      const id = t[(i / B) | 0]!;
      out[i - start] = id < 0 ? -1 : id * B + (i % B);
    }
    return out;
  }

  /**
   * A copy sharing every block of this one (a reference added to each), with
   * the same tokens, computed count and dp rank, and no single id of its own.
   */
  fork(options: ForkOptions = {}): Sequence {
    const owner = this.requireOwner('fork');
    if (options === null || typeof options !== 'object') throw new TypeError(`options must be an object, got ${describe(options)}`);
    const swap = options.swapLastBlock ?? false;
    if (typeof swap !== 'boolean') throw new TypeError(`options.swapLastBlock must be a boolean, got ${describe(swap)}`);
    // Its tokens are the beam's already, its table not yet: a copy would pair them wrongly.
    if (this.state.beamSource !== null) throw new Error('fork: the sequence adopted a beam its next allocation takes; allocate it first');
    const child = new Sequence(this.tokens);
    const p = this.state;
    const c = child.state;
    c.numPromptTokens = p.numPromptTokens;
    c.table = p.table.slice(0, Math.max(16, p.numBlocks));
    c.numBlocks = p.numBlocks;
    c.hashed = p.hashed;
    c.forkSharedFrom = p.forkSharedFrom;
    c.shared = p.shared;
    c.kvCached = p.kvCached;
    c.dpRank = p.dpRank;
    c.owner = owner;
    c.needSwap = swap && p.numBlocks > 0;
    c.salt = p.salt;
    c.saltKey = p.saltKey;
    c.retention = p.retention; // parsed ranges are never mutated: sharing is safe
    owner.forkSequence(this, child);
    return child;
  }

  private requireOwner(what: string): SequenceOwner {
    const owner = ownerOf(this.state);
    if (!owner) throw new Error(`${what}: the sequence has not been placed in a pool yet (allocate it first)`);
    return owner;
  }
}

function parseSalt(options: SequenceOptions): string | null {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) throw new TypeError(`options must be an object, got ${describe(options)}`);
  for (const k of Object.keys(options)) {
    if (k !== 'cacheSalt') throw new TypeError(`options: unknown option ${JSON.stringify(k)} (known: cacheSalt)`);
  }
  // Only absent means "no salt" (as '' does); null is refused, as the setter refuses it.
  const salt = options.cacheSalt === undefined ? '' : options.cacheSalt;
  if (typeof salt !== 'string') throw new TypeError(`options.cacheSalt must be a string, got ${describe(salt)}`);
  return salt === '' ? null : salt;
}

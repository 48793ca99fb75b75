// LinearStatePrefixCache (docs/linear-state.md): the slots that hold the
// recurrent state of GDN / Mamba-style layers. A running sequence holds a
// *live* slot; a *checkpoint* is a slot holding the state at a block
// boundary, keyed by the prefix hash there, so a later sequence with the same
// prefix can restore it instead of recomputing. Slot pool, checkpoint table
// and LRU live in the Wasm core (assembly/linear-state.ts); this class keeps
// the handles (pins, reservations) JavaScript needs in place of destructors.

import { CHECK_SLOT_STATE, SLOT_COMMITTED, SLOT_LIVE, SLOT_PENDING } from '../core/abi.js';
import { CHECK_MESSAGES } from '../core/abi-names.js';
import type { CoreExports } from '../core/exports.js';
import { loadCore } from '../core/plain-core.js';
import { CoreManager, exhausted, type CoreManagerConfig } from '../managers/core-manager.js';
import type { CoreBytes, CoreInstance } from '../core/core-instance.js';
import { checkInt, checkKeys, checkObject, describe } from '../validate.js';

export interface LinearStatePrefixCacheOptions {
  /** Slots, padding slot 0 included (>= 2). */
  numSlots: number;
}

/** The linear-state fields of a sequence the batch flow reads and writes. */
export interface SlotHolder {
  linearSlot: number;
  linearInit: boolean;
  readonly kvCached: number;
  readonly numPromptTokens: number;
}

/** A sequence as the batch flow takes it (a pool's `Sequence`). */
export interface LinearStateSequence {
  /** @internal */
  readonly state: SlotHolder;
}

/** A committed checkpoint pinned by a restore: not evictable until unpinned. */
export interface LinearStatePin {
  readonly slot: number;
  readonly hash: Uint8Array;
}

/** A pending checkpoint: the slot the worker copies a state into before `commit`. */
export interface LinearStateReservation {
  readonly slot: number;
  readonly hash: Uint8Array;
}

/** What `reserveCheckpoint` gives: a new reservation, or the slot already committed under the hash. */
export interface LinearStateReserveResult {
  /** The pending slot, the committed slot (reservation null), or -1 when every slot is live, pending or pinned. */
  readonly slot: number;
  readonly reservation: LinearStateReservation | null;
}

/** One prefill row of a batch (the reference's linear-state cache op). */
export interface LinearStateCacheOp {
  /** The sequence's live slot (-1 when it has none). */
  liveSlot: number;
  /** Restore the state at this prefix hash before the forward (null: no restore). */
  restoreHash?: Uint8Array | null;
  /** Save the state after the forward under this prefix hash (null: no save). */
  saveHash?: Uint8Array | null;
}

/** A save served by the sequence's own live slot: it becomes the checkpoint at commit. */
export interface LinearStatePromotion {
  readonly hash: Uint8Array;
  readonly sequence: LinearStateSequence;
  readonly liveSlot: number;
  readonly replacement: number;
}

/** `resolveCacheOps`' answer: where the worker reads and writes, and what `commitReservations` settles. */
export interface ResolvedLinearStateOps {
  /** Per op: the checkpoint slot to restore from, -1 for none or a miss. */
  readonly restoreSrcSlots: Int32Array;
  /** Per op: the slot to save into, -1 for none or when no slot was free. */
  readonly saveDstSlots: Int32Array;
  readonly restorePins: readonly LinearStatePin[];
  /** Saves to an already-committed hash pin it for the batch (a fix of the reference: docs/semantics.md, linear state). */
  readonly savePins: readonly LinearStatePin[];
  readonly reservations: readonly LinearStateReservation[];
  readonly promotions: readonly LinearStatePromotion[];
}

export interface LinearStateStats {
  freeSlots: number;
  liveSlots: number;
  pendingSlots: number;
  committedCheckpoints: number;
  /** Distinct committed checkpoints pinned right now. */
  pinnedCheckpoints: number;
  matchCalls: number;
  matchHits: number;
  checkpointsCommitted: number;
  checkpointsEvicted: number;
}

const STATE_NAMES = ['free', 'live', 'pending', 'committed'] as const;
export type LinearSlotState = (typeof STATE_NAMES)[number];

/** The hash set of a prefill batch of `n` saves: a power of two at least 2n. */
function prefillSetCap(n: number): number {
  let setCap = 2;
  while (setCap < 2 * n) setCap *= 2;
  return setCap;
}

/** @internal Scratch bytes a prefill batch of `n` saves needs after its keys (LinearStatePrefixCache.prefillBatchAt). */
export function prefillScratchBytes(n: number): number {
  return (3 * n + 1 + prefillSetCap(n)) * 4;
}

/** The core's manager region of the cache (caching on, block size 1). */
class SlotCore extends CoreManager {
  constructor(numSlots: number, rt?: CoreInstance) {
    super({ numBlocks: numSlots, blockSize: 1, prefixOn: true, seedLo: 0, seedHi: 0, rt });
  }

  protected override createRegion(cfg: CoreManagerConfig): number {
    this.rt.live();
    const ptr = this.rt.growing((e) => e.ls_create(cfg.numBlocks));
    if (ptr === 0) throw new RangeError(exhausted(this.rt, cfg.numBlocks, true, `a linear-state cache of ${cfg.numBlocks} slots`));
    return ptr;
  }

  protected override get publicName(): string {
    return 'LinearStatePrefixCache';
  }
}

function parse(o: LinearStatePrefixCacheOptions): number {
  checkObject('options', o);
  checkKeys('options', o, ['numSlots']);
  return checkInt('options.numSlots', o.numSlots, 2);
}

export function checkHash(name: string, h: unknown): Uint8Array {
  if (!(h instanceof Uint8Array) || h.length !== 16) {
    throw new TypeError(`${name} must be a 16-byte Uint8Array (a prefix hash), got ${describe(h)}${h instanceof Uint8Array ? ` of length ${h.length}` : ''}`);
  }
  return h;
}

function hexOf(h: Uint8Array): string {
  let s = '';
  for (let i = 0; i < 16; i++) s += (h[i]! < 16 ? '0' : '') + h[i]!.toString(16);
  return s;
}

export class LinearStatePrefixCache {
  /** Slots, padding slot 0 included. */
  readonly numSlots: number;
  /** @internal */
  readonly slots: SlotCore;
  private readonly pins = new Set<LinearStatePin>();
  private readonly reservations = new Set<LinearStateReservation>();
  private readonly batches = new Set<ResolvedLinearStateOps>();
  private readonly liveSet = new Set<number>();
  /** Live slots a pool's sequences hold, and which: the pool gives them back, not releaseLiveSlot. */
  private readonly poolHeld = new Map<number, SlotHolder>();

  constructor(options: LinearStatePrefixCacheOptions, /** @internal */ rt?: CoreInstance) {
    this.numSlots = parse(options);
    this.slots = new SlotCore(this.numSlots, rt);
  }

  /** @internal A cache in the core instance `kv` lives in (trimming compares their hashes in one call); the plain core without one. */
  static onCoreOf(kv: CoreManager | null, options: LinearStatePrefixCacheOptions): LinearStatePrefixCache {
    return new LinearStatePrefixCache(options, kv?.rt);
  }

  static async create(options: LinearStatePrefixCacheOptions): Promise<LinearStatePrefixCache> {
    parse(options);
    await loadCore();
    return new LinearStatePrefixCache(options);
  }

  /** @internal header pointer in the core */
  get ptr(): number {
    this.slots.live();
    return this.slots.ptr;
  }

  /** @internal The raw exports of the core the slots live in; throws once the cache is disposed. */
  core(): CoreExports {
    this.slots.live();
    return this.slots.rt.ex;
  }

  /** Copies a hash into the slots' core's byte staging area; returns its pointer. */
  private stageHash(h: Uint8Array): number {
    return this.slots.rt.staging.stageBytes(h);
  }

  // ---- live slots ----

  /**
   * A slot for a running sequence's state. With no free slot it evicts the
   * least recent unpinned checkpoint; null when every slot is live, pending or pinned.
   */
  acquireLiveSlot(): number | null {
    this.slots.live();
    const s = this.core().ls_acquire_live(this.ptr);
    if (s === 0) return null;
    this.liveSet.add(s);
    return s;
  }

  /** Gives a live slot back (it is free at once). */
  releaseLiveSlot(slot: number): void {
    this.slots.live();
    this.checkSlot('slot', slot, SLOT_LIVE);
    if (this.poolHeld.has(slot)) {
      throw new Error(`slot ${slot} is the live slot of a pool's sequence; the pool gives it back (BlockManagerPool.releaseLinearStateSlot)`);
    }
    this.core().ls_release_live(this.ptr, slot);
    this.liveSet.delete(slot);
  }

  /** @internal A live slot for a pool's sequence `holder` (only the pool gives it back, with releasePoolSlot). */
  acquirePoolSlot(holder: SlotHolder): number | null {
    const s = this.acquireLiveSlot();
    if (s !== null) this.poolHeld.set(s, holder);
    return s;
  }

  /** @internal Gives back a live slot a pool's sequence held. */
  releasePoolSlot(slot: number): void {
    this.poolHeld.delete(slot);
    this.releaseLiveSlot(slot);
  }

  // ---- checkpoints ----

  /** Pins the checkpoint of `hash` (and makes it the most recent); null on a miss. Release it with `unpin`. */
  match(hash: Uint8Array): LinearStatePin | null {
    this.slots.live();
    checkHash('hash', hash);
    const s = this.core().ls_match(this.ptr, this.stageHash(hash));
    if (s === 0) return null;
    const pin = Object.freeze({ slot: s, hash: hash.slice() });
    this.pins.add(pin);
    return pin;
  }

  unpin(pin: LinearStatePin): void {
    this.slots.live();
    if (!this.pins.has(pin)) throw new Error(`pin ${describe(pin)} is not an open pin of this cache (already released?)`);
    this.pins.delete(pin);
    const code = this.core().ls_unpin(this.ptr, pin.slot);
    if (code < 0) throw new Error(`kvpool: internal error unpinning slot ${pin.slot} (core code ${code})`);
  }

  /** Whether `hash` has a committed checkpoint (no LRU change; pending ones are invisible). */
  contains(hash: Uint8Array): boolean {
    this.slots.live();
    checkHash('hash', hash);
    return this.core().ls_contains(this.ptr, this.stageHash(hash)) !== 0;
  }

  /**
   * reserve_checkpoint: a committed `hash` is touched and its slot returned
   * (no reservation); otherwise a pending slot (evicting at most one
   * unpinned checkpoint), or slot -1 when none can be freed.
   */
  reserveCheckpoint(hash: Uint8Array): LinearStateReserveResult {
    this.slots.live();
    checkHash('hash', hash);
    const r = this.reserveRaw(hash, false);
    return typeof r === 'number' ? { slot: r, reservation: null } : { slot: r.slot, reservation: r };
  }

  /**
   * The worker wrote the state: the reservation becomes a committed
   * checkpoint at the most recent end. If the hash got committed meanwhile the
   * existing checkpoint wins and the reserved slot is freed. Returns the committed slot.
   */
  commit(reservation: LinearStateReservation): number {
    this.slots.live();
    this.takeReservation(reservation);
    const s = this.core().ls_commit(this.ptr, reservation.slot);
    if (s < 0) throw new Error(`kvpool: internal error committing slot ${reservation.slot} (core code ${s})`);
    return s;
  }

  /**
   * A batch's sequence that holds a live slot must hold it in this cache: a
   * slot a pool gave it here (a sequence of another rank names another
   * sequence's slot, and promoting it would take that sequence's state), or
   * one acquired from this cache by hand that no pool's sequence holds.
   */
  private checkSequence(name: string, seq: LinearStateSequence | null | undefined): void {
    if (seq == null) return;
    const st = (seq as { state?: unknown }).state;
    if (typeof seq !== 'object' || typeof st !== 'object' || st === null || typeof (st as SlotHolder).linearSlot !== 'number') {
      throw new TypeError(`${name} must be a pool's Sequence, null or undefined, got ${describe(seq)}`);
    }
    const slot = (st as SlotHolder).linearSlot;
    if (slot < 0) return;
    const holder = this.poolHeld.get(slot);
    const inPool = (st as { owner?: unknown }).owner != null;
    if (inPool ? holder !== st : holder !== undefined || !this.liveSet.has(slot)) {
      throw new RangeError(`${name} holds live slot ${slot} of another linear-state cache (a sequence of another rank, or of another pool)`);
    }
  }

  /** Drops a reservation: its slot is free again. */
  abort(reservation: LinearStateReservation): void {
    this.slots.live();
    this.takeReservation(reservation);
    const code = this.core().ls_abort(this.ptr, reservation.slot);
    if (code < 0) throw new Error(`kvpool: internal error aborting slot ${reservation.slot} (core code ${code})`);
  }

  // ---- the batch flow (docs/linear-state.md, the batch flow) ----

  /**
   * Resolves the cache ops of one batch: every restore is matched and pinned
   * first, then each save gets a slot in op order: the slot of an earlier save
   * of the same hash (coalescing), the committed checkpoint of the hash (pinned
   * for the batch), the sequence's own live slot during chunked prefill
   * (promotion; needs a replacement live slot), or a new reservation.
   * `sequences`, when given, is aligned with `ops` (null entries allowed).
   * Settle the result with `commitReservations` (or `abortCacheOps`).
   */
  resolveCacheOps(ops: readonly LinearStateCacheOp[], sequences?: readonly (LinearStateSequence | null | undefined)[]): ResolvedLinearStateOps {
    this.slots.live();
    if (!Array.isArray(ops)) throw new TypeError(`ops must be an array, got ${describe(ops)}`);
    if (sequences !== undefined) {
      if (!Array.isArray(sequences)) throw new TypeError(`sequences must be an array, got ${describe(sequences)}`);
      if (sequences.length !== ops.length) {
        throw new RangeError(`sequences must be aligned with ops: ${sequences.length} sequences for ${ops.length} ops`);
      }
      sequences.forEach((seq, i) => this.checkSequence(`sequences[${i}]`, seq));
    }
    const restoreHashes: (Uint8Array | null)[] = [];
    const saveHashes: (Uint8Array | null)[] = [];
    ops.forEach((op, i) => {
      checkObject(`ops[${i}]`, op);
      checkInt(`ops[${i}].liveSlot`, op.liveSlot, -1, this.numSlots - 1);
      restoreHashes.push(op.restoreHash == null ? null : checkHash(`ops[${i}].restoreHash`, op.restoreHash));
      saveHashes.push(op.saveHash == null ? null : checkHash(`ops[${i}].saveHash`, op.saveHash));
    });
    const n = ops.length;
    const restoreSrcSlots = new Int32Array(n).fill(-1);
    const saveDstSlots = new Int32Array(n).fill(-1);
    const restorePins: LinearStatePin[] = [];
    const savePins: LinearStatePin[] = [];
    const reservations: LinearStateReservation[] = [];
    const promotions: LinearStatePromotion[] = [];
    for (let i = 0; i < n; i++) {
      const h = restoreHashes[i];
      if (!h) continue;
      const pin = this.match(h);
      if (pin) {
        restoreSrcSlots[i] = pin.slot;
        restorePins.push(pin);
      }
    }
    const handled = new Map<string, number>();
    for (let i = 0; i < n; i++) {
      const h = saveHashes[i];
      if (!h) continue;
      const key = hexOf(h);
      const seen = handled.get(key);
      if (seen !== undefined) {
        saveDstSlots[i] = seen;
        continue;
      }
      let slot = -1;
      const seq = sequences?.[i];
      const live = ops[i]!.liveSlot;
      if (this.contains(h)) {
        const r = this.reserveRaw(h, true) as number;
        const pin = Object.freeze({ slot: r, hash: h.slice() });
        this.pins.add(pin);
        savePins.push(pin);
        slot = r;
      } else if (seq && live > 0 && seq.state.linearSlot === live && seq.state.kvCached > 0 && seq.state.kvCached < seq.state.numPromptTokens) {
        const replacement = this.acquireLiveSlot();
        if (replacement !== null) {
          promotions.push(Object.freeze({ hash: h.slice(), sequence: seq, liveSlot: live, replacement }));
          slot = live;
        }
      }
      if (slot < 0) {
        const r = this.reserveRaw(h, false);
        if (typeof r !== 'number') {
          reservations.push(r);
          slot = r.slot;
        }
      }
      saveDstSlots[i] = slot;
      handled.set(key, slot);
    }
    const result: ResolvedLinearStateOps = { restoreSrcSlots, saveDstSlots, restorePins, savePins, reservations, promotions };
    this.batches.add(result);
    return result;
  }

  /**
   * @internal One prefill's batch resolved and committed at once, in one core
   * call and with no handles made: the same as `resolveCacheOps(ops)` then
   * `commitReservations(result)` for ops = a restore from block boundary
   * `restore` (0: none), then a save at every boundary in (restore, last],
   * none of them a promotion. `hashes` holds the prefix hashes at boundaries
   * 1..last, 16 bytes each (what `Sequence.prefixHashes` gives).
   */
  prefillBatch(hashes: Uint8Array, restore: number, last: number): { restoredSlot: number; committed: number } {
    this.slots.live();
    checkInt('restore', restore, 0);
    checkInt('last', last, restore);
    if (!(hashes instanceof Uint8Array) || hashes.length < last * 16) {
      throw new TypeError(`hashes must be a Uint8Array of at least ${last * 16} bytes, got ${describe(hashes)}`);
    }
    const first = restore > 0 ? restore - 1 : 0; // boundary index of the first key staged
    const keyBytes = (last - first) * 16;
    const rt = this.slots.rt;
    const p = rt.staging.byteSpace(keyBytes + prefillScratchBytes(last - restore));
    rt.u8.set(hashes.subarray(first * 16, last * 16), p);
    return this.runPrefillBatch(p, restore, last, p + keyBytes);
  }

  /**
   * @internal prefillBatch of hashes already in this cache's core (a rank
   * left them there: RankManager.prefixHashesIn): boundaries 1..last at
   * `hashes.at`, 16 bytes each, and prefillScratchBytes(last - restore)
   * bytes free right after them. Saves copying them out and back in.
   */
  prefillBatchAt(hashes: CoreBytes, restore: number, last: number): { restoredSlot: number; committed: number } {
    this.slots.live();
    if (hashes.rt !== this.slots.rt) throw new Error('kvpool: internal error: prefix hashes left in another core than the linear-state cache\'s');
    checkInt('restore', restore, 0);
    checkInt('last', last, restore);
    const first = restore > 0 ? restore - 1 : 0;
    return this.runPrefillBatch(hashes.at + first * 16, restore, last, hashes.at + last * 16);
  }

  /** The core call of prefillBatch: keys from boundary max(restore, 1) on at `p`, prefillScratchBytes(last - restore) bytes at `scratch`. */
  private runPrefillBatch(p: number, restore: number, last: number, scratch: number): { restoredSlot: number; committed: number } {
    const n = last - restore;
    const setCap = prefillSetCap(n);
    const rt = this.slots.rt;
    const set = scratch + (3 * n + 1) * 4;
    rt.u8.fill(0, set, set + setCap * 4);
    const keys = restore > 0 ? p + 16 : p;
    const committed = this.core().ls_prefill_batch(this.ptr, restore > 0 ? p : 0, keys, n, scratch, setCap - 1);
    return { restoredSlot: rt.i32[(scratch >>> 2) + n]!, committed };
  }

  /**
   * After the worker copied the states: every reservation is committed, every
   * promotion whose sequence still holds the promoted live slot turns that
   * slot into the checkpoint and gives the sequence its replacement (the
   * sequence restores from the checkpoint on its next forward); a promotion
   * whose sequence's slot changed meanwhile gives the replacement back. The
   * batch's pins are released. Returns how many promotions were applied.
   */
  commitReservations(result: ResolvedLinearStateOps): number {
    this.slots.live();
    if (!this.batches.has(result)) throw new Error(`result is not an open batch of this cache (already settled?), got ${describe(result)}`);
    // All or nothing: a reservation of the batch settled by hand leaves the batch open for abortCacheOps.
    for (const r of result.reservations) {
      if (!this.reservations.has(r)) {
        throw new Error(`reservation of slot ${r.slot} in this batch was already committed or aborted by itself; settle the batch with abortCacheOps`);
      }
    }
    this.takeBatch(result);
    for (const r of result.reservations) this.commit(r);
    let applied = 0;
    for (const p of result.promotions) {
      const seq = p.sequence.state;
      if (seq.linearSlot === p.liveSlot && this.liveSet.has(p.liveSlot)) {
        const code = this.core().ls_promote(this.ptr, p.liveSlot, this.stageHash(p.hash));
        if (code < 0) throw new Error(`kvpool: internal error promoting slot ${p.liveSlot} (core code ${code})`);
        this.liveSet.delete(p.liveSlot);
        // The sequence's new live slot is the pool's to give back, as the old one was.
        const holder = this.poolHeld.get(p.liveSlot);
        if (holder !== undefined) {
          this.poolHeld.delete(p.liveSlot);
          this.poolHeld.set(p.replacement, holder);
        }
        seq.linearSlot = p.replacement;
        seq.linearInit = false;
        applied++;
      } else {
        this.releaseLiveSlot(p.replacement);
      }
    }
    this.releasePins(result);
    return applied;
  }

  /** Settles a batch whose states were not copied: reservations aborted, replacements given back, pins released. */
  abortCacheOps(result: ResolvedLinearStateOps): void {
    this.slots.live();
    this.takeBatch(result);
    // Reservations already settled by hand are left as they are.
    for (const r of result.reservations) if (this.reservations.has(r)) this.abort(r);
    for (const p of result.promotions) this.releaseLiveSlot(p.replacement);
    this.releasePins(result);
  }

  // ---- figures and audits ----

  /** The state of one slot (the padding slot 0 reports 'live': it is never handed out). */
  slotState(slot: number): LinearSlotState {
    this.slots.live();
    checkInt('slot', slot, 0, this.numSlots - 1);
    if (slot === 0) return 'live';
    return STATE_NAMES[this.core().ls_state(this.ptr, slot)]!;
  }

  numFreeSlots(): number {
    this.slots.live();
    return this.slots.numFreeBlocks();
  }

  numCheckpoints(): number {
    this.slots.live();
    return this.slots.numBlocksInPrefixCache();
  }

  /** Committed checkpoints from least to most recently used (eviction order, pinned ones skipped). */
  lruOrder(): Int32Array {
    this.slots.live();
    return this.slots.lruOrder();
  }

  /** Live slots handed out (ascending). */
  liveSlots(): Int32Array {
    this.slots.live();
    return Int32Array.from([...this.liveSet].sort((a, b) => a - b));
  }

  /** Replacement live slots held by promotions of unsettled batches (for audits). */
  inFlightReplacements(): number[] {
    this.slots.live();
    const out: number[] = [];
    for (const b of this.batches) for (const p of b.promotions) out.push(p.replacement);
    return out;
  }

  /** Open reservations and pins (for audits). */
  openReservations(): readonly LinearStateReservation[] {
    this.slots.live();
    return [...this.reservations];
  }

  openPins(): readonly LinearStatePin[] {
    this.slots.live();
    return [...this.pins];
  }

  stats(): LinearStateStats {
    this.slots.live();
    const s = this.slots.stats();
    let pinned = 0;
    const seen = new Set<number>();
    for (const p of this.pins) if (!seen.has(p.slot)) seen.add(p.slot), pinned++;
    return {
      freeSlots: s.numFreeBlocks,
      liveSlots: this.liveSet.size,
      pendingSlots: this.reservations.size,
      committedCheckpoints: s.numBlocksInPrefixCache,
      pinnedCheckpoints: pinned,
      matchCalls: s.matchCalls,
      matchHits: s.blocksHit,
      checkpointsCommitted: s.blocksInserted,
      checkpointsEvicted: s.blocksEvicted,
    };
  }

  /**
   * Full audit: the core's slot pool, table and LRU; every slot in exactly one
   * state; the live slots, reservations and pins JavaScript holds agree with
   * the core's states and reference counts. Throws on any inconsistency.
   */
  check(): void {
    this.slots.live();
    this.slots.check();
    const e = this.core();
    const rt = this.slots.rt;
    const counts = rt.staging.byteSpace(16);
    const code = e.ls_check(this.ptr, counts);
    if (code !== 0) {
      const slot = e.mgr_error_index();
      const what = code === CHECK_SLOT_STATE ? 'a slot is in no single state' : (CHECK_MESSAGES[code] ?? `code ${code}`);
      throw new Error(`kvpool: linear-state cache is inconsistent: ${what} (slot ${slot})`);
    }
    const c = rt.i32.subarray(counts >>> 2, (counts >>> 2) + 4);
    const [live, pending, pinned, pins] = [c[0]!, c[1]!, c[2]!, c[3]!];
    const fail = (what: string) => {
      throw new Error(`kvpool: linear-state cache is inconsistent: ${what}`);
    };
    if (live !== this.liveSet.size) fail(`${live} live slots in the core, ${this.liveSet.size} handed out`);
    for (const s of this.liveSet) if (e.ls_state(this.ptr, s) !== SLOT_LIVE) fail(`live slot ${s} is not live in the core`);
    if (pending !== this.reservations.size) fail(`${pending} pending slots in the core, ${this.reservations.size} open reservations`);
    for (const r of this.reservations) if (e.ls_state(this.ptr, r.slot) !== SLOT_PENDING) fail(`reserved slot ${r.slot} is not pending`);
    if (pins !== this.pins.size) fail(`${pins} pins in the core, ${this.pins.size} open pins`);
    const perSlot = new Map<number, number>();
    for (const p of this.pins) perSlot.set(p.slot, (perSlot.get(p.slot) ?? 0) + 1);
    if (pinned !== perSlot.size) fail(`${pinned} pinned checkpoints in the core, ${perSlot.size} pinned slots held`);
    for (const [s, k] of perSlot) {
      if (e.ls_state(this.ptr, s) !== SLOT_COMMITTED || e.mgr_ref(this.ptr, s) !== k + 1) fail(`slot ${s} is pinned ${k} times but the core disagrees`);
      if (e.ls_contains(this.ptr, this.stageHash([...this.pins].find((p) => p.slot === s)!.hash)) !== s) {
        fail(`pinned slot ${s} is not the checkpoint of its hash`);
      }
    }
    const lru = this.slots.lruOrder();
    if (lru.length !== this.numCheckpoints()) fail('LRU and table sizes differ');
  }

  /** Gives the cache's memory back to the core; unusable afterwards: every call throws. */
  dispose(): void {
    this.slots.dispose();
  }

  /** True once `dispose()` ran. */
  get isDisposed(): boolean {
    return this.slots.isDisposed;
  }

  // ---- internals ----

  /** @internal a committed slot (number, negated by the core) or a new reservation */
  private reserveRaw(hash: Uint8Array, pinExisting: boolean): number | LinearStateReservation {
    const r = this.core().ls_reserve(this.ptr, this.stageHash(hash), pinExisting ? 1 : 0);
    if (r < 0) return -r;
    if (r === 0) return -1;
    const res = Object.freeze({ slot: r, hash: hash.slice() });
    this.reservations.add(res);
    return res;
  }

  private takeReservation(res: LinearStateReservation): void {
    if (!this.reservations.has(res)) {
      throw new Error(`reservation ${describe(res)} is not an open reservation of this cache (already committed or aborted?)`);
    }
    this.reservations.delete(res);
  }

  private takeBatch(result: ResolvedLinearStateOps): void {
    if (!this.batches.has(result)) throw new Error(`result is not an open batch of this cache (already settled?), got ${describe(result)}`);
    this.batches.delete(result);
  }

  /** Releases the batch's pins (those not already released by hand). */
  private releasePins(result: ResolvedLinearStateOps): void {
    for (const p of result.restorePins) if (this.pins.has(p)) this.unpin(p);
    for (const p of result.savePins) if (this.pins.has(p)) this.unpin(p);
  }

  private checkSlot(name: string, slot: number, state: number): void {
    checkInt(name, slot, 1, this.numSlots - 1);
    const have = this.core().ls_state(this.ptr, slot);
    if (have !== state) {
      throw new RangeError(`${name} = ${slot} is ${STATE_NAMES[have]}, not ${STATE_NAMES[state]}`);
    }
  }
}

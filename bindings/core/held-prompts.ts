// Prompts the core wrote into its own memory, each standing for the first
// tokens of a JS array: a staging of that array reads them there instead of
// copying the array in (Staging.holdPrompt).
//
// The replay holds a prompt per running sequence and ends the holds in the
// order it made them (oldest sequence first), so the holds live in one ring
// of core memory: a hold takes the bytes after the newest, and the bytes of
// the oldest come free when it ends. A region per hold cost an allocation,
// its zeroing and a release per request (~2% of a plain replay), and areas
// kept per slot grew to the longest prompt each had held (16 MiB over the
// conversation trace, against ~2.6 MiB live at most). A hold that does not
// fit makes the ring twice as large, the live holds copied over in order.

import { MAX_REGION_BYTES } from './abi.js';

/** What the ring needs of its core instance (a Staging's memory). */
export interface RingMemory {
  readonly u8: Uint8Array;
  /** A region of `bytes` bytes (unsigned pointer), 0 when memory is exhausted. */
  alloc(bytes: number): number;
  release(ptr: number): void;
  /** Throws when the instance can no longer be used. */
  live(): void;
}

/** Bytes kept free before each hold: the core may borrow the 16 bytes before a staged block. */
const GAP = 16;
const MIN_RING = 1 << 16;
/** The largest ring. */
const MAX_RING = MAX_REGION_BYTES - GAP;

/** Where one hold's tokens are: `bytes` bytes from byte `off` of the ring. */
interface Placement {
  /** null once the hold ended (or moved): the bytes come free when every older placement's have. */
  owner: HeldPrompt | null;
  off: number;
  bytes: number;
}

/** One held prompt. */
export interface HeldPrompt {
  /** The array whose tokens [0, end) the ring holds. */
  readonly tokens: Int32Array;
  end: number;
  place: Placement;
}

export class HeldPrompts {
  /** The ring's region (0: none yet) and its usable bytes. */
  private region = 0;
  private cap = 0;
  /** Placements oldest first, from `first` on (ended ones included until every older one ended). */
  private readonly queue: Placement[] = [];
  private first = 0;
  /** Byte offset of the next placement; `wrapped` when it is below the oldest live one. */
  private head = 0;
  private wrapped = false;
  private readonly holds: HeldPrompt[] = [];

  constructor(private readonly mem: RingMemory) {}

  /** Holds now. */
  get count(): number {
    return this.holds.length;
  }

  /** The hold standing for `tokens`, or null. */
  of(tokens: ArrayLike<number>): HeldPrompt | null {
    // A handful (one per running replay sequence): a scan.
    const holds = this.holds;
    for (let i = 0; i < holds.length; i++) if (holds[i]!.tokens === tokens) return holds[i]!;
    return null;
  }

  /** A new hold for `tokens[0, n)` with room for `room` tokens; the caller writes the tokens at ptr(hold). */
  add(tokens: Int32Array, n: number, room: number): HeldPrompt {
    const h: HeldPrompt = { tokens, end: n, place: this.place(Math.max(n, room, 1) * 4) };
    h.place.owner = h;
    this.holds.push(h);
    return h;
  }

  /** Byte pointer of the hold's token 0. */
  ptr(h: HeldPrompt): number {
    return this.region + GAP + h.place.off;
  }

  /** Makes room for `tokens` tokens in `h`, its first `h.end` kept; returns ptr(h). */
  reserve(h: HeldPrompt, tokens: number): number {
    const bytes = tokens * 4;
    if (bytes > h.place.bytes) {
      const old = h.place;
      const moved = this.place(bytes); // may move `old` too (the ring grows)
      this.mem.u8.copyWithin(this.region + GAP + moved.off, this.region + GAP + old.off, this.region + GAP + old.off + h.end * 4);
      moved.owner = h;
      h.place = moved;
      this.free(old);
    }
    return this.ptr(h);
  }

  /** Ends the hold standing for `tokens`, if there is one. */
  drop(tokens: Int32Array): void {
    const holds = this.holds;
    for (let i = 0; i < holds.length; i++) {
      const h = holds[i]!;
      if (h.tokens !== tokens) continue;
      holds[i] = holds[holds.length - 1]!;
      holds.pop();
      this.free(h.place);
      return;
    }
  }

  /** Ends every hold. */
  dropAll(): void {
    for (const h of this.holds) h.place.owner = null;
    this.holds.length = 0;
    this.queue.length = 0;
    this.first = 0;
    this.head = 0;
    this.wrapped = false;
  }

  /** Gives the ring back to the core (no hold may be left). */
  release(): void {
    this.dropAll();
    if (this.region !== 0) this.mem.release(this.region);
    this.region = 0;
    this.cap = 0;
  }

  /**
   * Audit (tests): every hold's bytes lie inside the ring, apart from every
   * other hold's, with room for its tokens, and in the queue. Throws on the
   * first fault.
   */
  check(): void {
    const live = this.queue.slice(this.first).filter((p) => p.owner !== null);
    for (const h of this.holds) {
      const p = h.place;
      if (p.owner !== h || !live.includes(p)) throw new Error('held prompts: a hold is not live in the queue');
      if (p.off < 0 || p.off + GAP + p.bytes > this.cap) throw new Error(`held prompts: a hold at ${p.off} (+${GAP + p.bytes}) is outside a ring of ${this.cap}`);
      if (h.end * 4 > p.bytes) throw new Error('held prompts: a hold has less room than its tokens');
    }
    if (live.length !== this.holds.length) throw new Error('held prompts: a live placement has no hold');
    const byOff = [...live].sort((a, b) => a.off - b.off);
    for (let i = 1; i < byOff.length; i++) {
      if (byOff[i - 1]!.off + GAP + byOff[i - 1]!.bytes > byOff[i]!.off) throw new Error('held prompts: two holds overlap');
    }
  }

  private free(p: Placement): void {
    p.owner = null;
    const q = this.queue;
    // The oldest placements that ended give their bytes back.
    while (this.first < q.length && q[this.first]!.owner === null) {
      const off = q[this.first]!.off;
      this.first++;
      if (this.first < q.length && q[this.first]!.off < off) this.wrapped = false; // the tail passed the ring's end
    }
    if (this.first === q.length) {
      q.length = 0;
      this.first = 0;
      this.head = 0;
      this.wrapped = false;
    } else if (this.first > 64 && this.first * 2 > q.length) {
      q.splice(0, this.first);
      this.first = 0;
    }
  }

  /** A placement of `bytes` (plus the gap before it), growing the ring when it does not fit. */
  private place(bytes: number): Placement {
    const need = GAP + ((bytes + 15) & ~15);
    let at = this.fit(need);
    if (at < 0) {
      this.grow(need);
      at = this.fit(need);
      if (at < 0) throw new Error(`kvpool: internal error: ${need} bytes do not fit in a prompt ring of ${this.cap}`);
    }
    const p: Placement = { owner: null, off: at, bytes: need - GAP };
    this.queue.push(p);
    this.head = at + need;
    return p;
  }

  /** Offset where `need` bytes fit after the newest placement, or -1. */
  private fit(need: number): number {
    const tail = this.first < this.queue.length ? this.queue[this.first]!.off : this.head;
    if (this.wrapped) return this.head + need <= tail ? this.head : -1;
    if (this.head + need <= this.cap) return this.head;
    if (need <= tail) {
      this.wrapped = true;
      return 0;
    }
    return -1;
  }

  /** A ring at least twice the live bytes plus `need`, the live placements copied to its start in order. */
  private grow(need: number): void {
    this.mem.live();
    const q = this.queue;
    let live = 0;
    for (let i = this.first; i < q.length; i++) if (q[i]!.owner !== null) live += GAP + q[i]!.bytes;
    let cap = Math.max(MIN_RING, this.cap * 2);
    while (cap < 2 * (live + need)) cap *= 2;
    if (live + need > MAX_RING) {
      throw new RangeError(
        `kvpool: cannot hold ${need} more bytes of prompt tokens in Wasm memory (at most ${MAX_RING} in all); ` +
          'the request is too large for a 32-bit core',
      );
    }
    if (cap > MAX_RING) cap = MAX_RING;
    const region = this.mem.alloc(cap + GAP);
    if (region === 0) throw new RangeError(`kvpool: Wasm memory exhausted while holding ${need} bytes of prompt tokens`);
    const u8 = this.mem.u8;
    const kept: Placement[] = [];
    let off = 0;
    for (let i = this.first; i < q.length; i++) {
      const p = q[i]!;
      if (p.owner === null) continue;
      const from = this.region + GAP + p.off;
      u8.copyWithin(region + GAP + off, from, from + p.owner.end * 4);
      p.off = off;
      off += GAP + p.bytes;
      kept.push(p);
    }
    if (this.region !== 0) this.mem.release(this.region);
    this.region = region;
    this.cap = cap;
    q.length = 0;
    for (const p of kept) q.push(p);
    this.first = 0;
    this.head = off;
    this.wrapped = false;
  }
}

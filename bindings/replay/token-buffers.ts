// The token buffers of the replay's sequences, kept for reuse. A buffer is
// fresh memory until its pages are first written, and on the machines we
// measure on each first write of a 4 KiB page costs ~13 us (a page fault in
// a VM): a replay that made a buffer for every request whose prompt outgrew
// the last one returned spent a tenth of its loop there. So a request takes
// the smallest kept buffer that fits it, and a new buffer is made only when
// none does.
//
// A replay that ends hands its buffers on (retire) to the next one made in
// this process, up to SPARE_BYTES: a sweep or a benchmark runs replay after
// replay, and each started on fresh pages again (~1,100 faults, 1-4% of a
// plain replay of the conversation trace in one process).

/** At most this many bytes of buffers wait between replays. */
export const SPARE_BYTES = 32 << 20;

/** Buffers of replays that ended, for the next TokenBuffers made. */
const spare: Int32Array[] = [];
let spareBytes = 0;

export class TokenBuffers {
  private readonly kept: Int32Array[];
  private readonly limit: number;

  /**
   * Keeps at most `maxRunning + 8` buffers (the smallest go first): a replay
   * of the conversation trace never had more than ~35 kept, and a fleet has
   * a loop per engine. Starts with the buffers earlier replays retired.
   */
  constructor(maxRunning: number) {
    this.limit = maxRunning + 8;
    this.kept = spare.splice(0, this.limit); // the largest: retire keeps `spare` largest first
    for (const b of this.kept) spareBytes -= b.byteLength;
  }

  /**
   * The loop is over: the kept buffers wait for the next TokenBuffers of this
   * process, the largest first while they fit in SPARE_BYTES (the rest are
   * dropped). This object keeps none.
   */
  retire(): void {
    const kept = this.kept.sort((a, b) => a.length - b.length);
    while (kept.length > 0) {
      const b = kept.pop()!;
      if (spareBytes + b.byteLength > SPARE_BYTES) continue;
      spare.push(b);
      spareBytes += b.byteLength;
    }
    // Several loops retire (a fleet's engines): the next one takes the largest of all.
    spare.sort((a, b) => b.length - a.length);
  }

  /** A buffer of at least `need` tokens: the smallest kept one that fits, else a new one with a quarter to spare. */
  take(need: number): Int32Array {
    const kept = this.kept;
    let best = -1;
    for (let i = 0; i < kept.length; i++) {
      const len = kept[i]!.length;
      if (len >= need && (best < 0 || len < kept[best]!.length)) best = i;
    }
    if (best < 0) return new Int32Array(need + Math.floor(need / 4));
    const buf = kept[best]!;
    kept[best] = kept[kept.length - 1]!;
    kept.pop();
    return buf;
  }

  /** Keeps a buffer the loop is done with (past the limit, the smallest kept one is dropped). */
  give(buf: Int32Array): void {
    const kept = this.kept;
    kept.push(buf);
    if (kept.length <= this.limit) return;
    let smallest = 0;
    for (let i = 1; i < kept.length; i++) if (kept[i]!.length < kept[smallest]!.length) smallest = i;
    kept[smallest] = kept[kept.length - 1]!;
    kept.pop();
  }
}

// The token buffers of the replay's sequences, kept for reuse. A buffer is
// fresh memory until its pages are first written, and on the machines we
// measure on each first write of a 4 KiB page costs ~13 us (a page fault in
// a VM): a replay that made a buffer for every request whose prompt outgrew
// the last one returned spent a tenth of its loop there. So a request takes
// the smallest kept buffer that fits it, and a new buffer is made only when
// none does.

export class TokenBuffers {
  private readonly kept: Int32Array[] = [];
  private readonly limit: number;

  /**
   * Keeps at most `maxRunning + 8` buffers (the smallest go first): a replay
   * of the conversation trace never had more than ~35 kept, and a fleet has
   * a loop per engine.
   */
  constructor(maxRunning: number) {
    this.limit = maxRunning + 8;
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

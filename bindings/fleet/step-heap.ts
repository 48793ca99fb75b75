// The engines of a timed fleet by the time their next step event falls due
// (a step's end, or the start of an idle engine's step): a binary min-heap,
// ties to the lowest engine index, so that equal times run in a fixed order.

export class StepHeap {
  private readonly at: Float64Array;
  private readonly heap: Int32Array;
  private size = 0;

  constructor(engines: number) {
    this.at = new Float64Array(engines);
    this.heap = new Int32Array(engines);
  }

  get length(): number {
    return this.size;
  }

  /** The earliest due time (Infinity when empty). */
  peekTime(): number {
    return this.size === 0 ? Infinity : this.at[this.heap[0]!]!;
  }

  private before(a: number, b: number): boolean {
    const ta = this.at[a]!;
    const tb = this.at[b]!;
    return ta < tb || (ta === tb && a < b);
  }

  /** Engine `e` (not in the heap) falls due at `time`. */
  push(e: number, time: number): void {
    this.at[e] = time;
    const h = this.heap;
    let i = this.size++;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.before(e, h[p]!)) break;
      h[i] = h[p]!;
      i = p;
    }
    h[i] = e;
  }

  /** The engine due first, removed. */
  pop(): number {
    const h = this.heap;
    const top = h[0]!;
    const last = h[--this.size]!;
    let i = 0;
    for (;;) {
      let c = 2 * i + 1;
      if (c >= this.size) break;
      if (c + 1 < this.size && this.before(h[c + 1]!, h[c]!)) c++;
      if (!this.before(h[c]!, last)) break;
      h[i] = h[c]!;
      i = c;
    }
    if (this.size > 0) h[i] = last;
    return top;
  }
}

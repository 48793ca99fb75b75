// The load imbalance of a timed fleet, weighted by time: the integrals of
// the largest and of the total engine load over the run, kept as loads
// change (a count of engines per load value finds the largest in O(1)
// amortised, where scanning the engines at every event would cost K).

export class LoadArea {
  private readonly loads: Int32Array;
  private counts: number[] = [];
  private max = 0;
  private sum = 0;
  private t = 0;
  /** Integral over time of the largest engine load. */
  areaMax = 0;
  /** Integral over time of the total load. */
  areaSum = 0;

  constructor(engines: number, start: number) {
    this.loads = new Int32Array(engines);
    this.counts[0] = engines;
    this.t = start;
  }

  /** The clock moves to `now` (never back): the loads held since the last change are integrated. */
  advance(now: number): void {
    const dt = now - this.t;
    if (dt <= 0) return;
    this.areaMax += dt * this.max;
    this.areaSum += dt * this.sum;
    this.t = now;
  }

  set(e: number, load: number): void {
    const old = this.loads[e]!;
    if (old === load) return;
    this.loads[e] = load;
    this.counts[old]!--;
    this.counts[load] = (this.counts[load] ?? 0) + 1;
    this.sum += load - old;
    if (load > this.max) this.max = load;
    else while (this.max > 0 && (this.counts[this.max] ?? 0) === 0) this.max--;
  }
}

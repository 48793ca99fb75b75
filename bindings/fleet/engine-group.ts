// A group of a fleet's engines run apart from the router (on a worker
// thread: bindings/node/fleet-threads.ts). The router's side sees the group
// only through these calls and their plain, cloneable answers: the engines'
// loads, the requests admitted and each engine's encoded event batches. The
// rules are the in-thread fleet's (docs/fleet.md); a test checks that both
// give identical results.

import { drainInto, parseWireOptions, VllmWireEncoder, type VllmEncodeOptions } from '../events/vllm.js';
import type { ParsedReplayOptions } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';
import { FleetEngine } from './engine.js';
import type { FleetConfig } from './fleet-options.js';
import { engineFigures, type FleetEngineFigures } from './fleet-result.js';

export interface GroupLoads {
  running: number[];
  queued: number[];
}

export interface GroupStepReply {
  /** Each engine's load after the step. */
  loads: number[];
  /** (request, admission step) of every request admitted in the step. */
  admitted: number[];
  /** Event batches of the step, by engine (global index), engines in order; only with events on. */
  events: Array<[number, Uint8Array[]]>;
}

export class EngineGroup {
  private readonly engines: FleetEngine[] = [];
  private readonly encoder: VllmWireEncoder;

  /** `indices`: the global indices of this group's engines, ascending; `wire`: the form of the event batches. */
  constructor(
    replay: ParsedReplayOptions,
    readonly indices: readonly number[],
    private readonly events: boolean,
    private readonly trace: readonly TraceRequest[],
    private readonly stepMs: number,
    wire: Omit<VllmEncodeOptions, 'ts'> = {},
  ) {
    this.encoder = new VllmWireEncoder(parseWireOptions({ ...wire, ts: 0 }));
    try {
      for (let i = 0; i < indices.length; i++) this.engines.push(new FleetEngine(replay, events));
    } catch (e) {
      this.dispose();
      throw e;
    }
  }

  /** Start of step `t` (decoding ended), then the loads the router sees. */
  tick(t: number): GroupLoads {
    for (const e of this.engines) e.tick(t);
    return { running: this.engines.map((e) => e.running), queued: this.engines.map((e) => e.queued) };
  }

  /**
   * The rest of step `t`: `assigned` (engine, request pairs, flattened, in
   * routing order) joins the queues, then every engine admits and finishes,
   * and the step's events are drained.
   */
  step(t: number, assigned: readonly number[]): GroupStepReply {
    for (let i = 0; i < assigned.length; i += 2) this.engines[this.indices.indexOf(assigned[i]!)]!.enqueue(assigned[i + 1]!);
    const admitted: number[] = [];
    for (const e of this.engines) e.admit(t, this.trace, (r) => admitted.push(r, t));
    return { loads: this.engines.map((e) => e.load), admitted, events: this.drain(t) };
  }

  /**
   * Steps `from` to `until - 1` with no arrivals and no events wanted (the
   * router's thread runs ahead to the next arrival): per step, this group's
   * largest and total load after the step; with `until` Infinity, until the
   * group is idle (it stays idle: nothing arrives any more), `idleAt` being
   * that step (the last one run).
   */
  runAhead(from: number, until: number): { max: number[]; sum: number[]; admitted: number[]; idleAt: number } {
    const max: number[] = [];
    const sum: number[] = [];
    const admitted: number[] = [];
    let t = from;
    for (; t < until; t++) {
      let m = 0;
      let total = 0;
      for (const e of this.engines) e.tick(t);
      for (const e of this.engines) {
        e.admit(t, this.trace, (r) => admitted.push(r, t));
        const l = e.load;
        if (l > m) m = l;
        total += l;
      }
      max.push(m);
      sum.push(total);
      if (until === Infinity && m === 0) break;
    }
    return { max, sum, admitted, idleAt: t };
  }

  /** After the last step: the kernel's final drain, its events, and every engine's figures. */
  finish(lastStep: number, config: FleetConfig): { events: Array<[number, Uint8Array[]]>; figures: FleetEngineFigures[] } {
    for (const e of this.engines) e.drain();
    const events = this.drain(lastStep);
    return { events, figures: this.engines.map((e, i) => engineFigures(this.indices[i]!, e.result(config), e.finishedEarly)) };
  }

  private drain(t: number): Array<[number, Uint8Array[]]> {
    if (!this.events) return [];
    const out: Array<[number, Uint8Array[]]> = [];
    const enc = this.encoder;
    this.engines.forEach((e, i) => {
      const batches: Uint8Array[] = [];
      enc.reset();
      drainInto(e.pool, enc, (t * this.stepMs) / 1000, (_rank, start) => batches.push(enc.bytes().slice(start)));
      if (batches.length > 0) out.push([this.indices[i]!, batches]);
    });
    return out;
  }

  dispose(): void {
    for (const e of this.engines) e.dispose();
  }
}

// Hands an engine's KV events of a step to the router and the sink. One
// encoder for the run: a fresh one per step and engine allocates a megabyte
// each time. The precise router reads the records in place; batches are
// encoded only for a sink or another router.

import type { CoreInstance } from '../core/core-instance.js';
import { drainInto, parseWireOptions, VllmWireEncoder, type VllmEncodeOptions } from '../events/vllm.js';
import type { KVEventSource } from '../managers/kv-events.js';
import type { BlockManagerPool } from '../pool/block-manager-pool.js';
import type { VllmKvCacheManager, VllmKvEvent } from '../vllm/kv-cache-manager.js';
import { PrecisePrefixRouter } from './precise-prefix.js';
import type { Router } from './router.js';

/** Called with each engine's KV events of a step, as vLLM batches (the CLI publishes them). */
export type FleetEventSink = (engine: number, batches: readonly Uint8Array[], step: number) => void;

export class EngineEvents {
  /** Whether anyone listens: without, the engines need not record events. */
  readonly wanted: boolean;
  private encoder: VllmWireEncoder | undefined;
  private readonly wire: ReturnType<typeof parseWireOptions>;
  private readonly direct: PrecisePrefixRouter | null;

  constructor(private readonly router: Router, private readonly sink: FleetEventSink | undefined, wire: Omit<VllmEncodeOptions, 'ts'> = {}) {
    if (sink !== undefined && typeof sink !== 'function') throw new TypeError('sink must be a function');
    this.wire = parseWireOptions({ ...wire, ts: 0 });
    this.wanted = sink !== undefined || typeof router.onEvents === 'function';
    this.direct = router instanceof PrecisePrefixRouter && router.onEvents === PrecisePrefixRouter.prototype.onEvents ? router : null;
  }

  /**
   * A vLLM engine `i`'s events since its last flush (`kvs`: its ranks'
   * managers, rank r's at index r), in vLLM's order: one batch per rank with
   * events, as each of vLLM's engine cores publishes its own.
   */
  flushVllm(i: number, kvs: readonly VllmKvCacheManager[], ts: number, step: number): void {
    if (!this.wanted) return;
    const { router, sink, direct } = this;
    let all: VllmKvEvent[] | null = null;
    const enc = direct !== null && sink === undefined ? null : (this.encoder ??= new VllmWireEncoder(this.wire));
    const batches: Uint8Array[] = [];
    enc?.reset();
    for (const kv of kvs) {
      const events = kv.drainEvents();
      if (events.length === 0) continue;
      if (direct !== null) {
        if (all === null) all = events;
        else for (const e of events) all.push(e);
      }
      if (enc !== null) {
        const start = enc.bytes().length;
        enc.beginBatch(ts);
        enc.events(events);
        enc.endBatch(kv.dpRank);
        batches.push(enc.bytes().slice(start));
      }
    }
    if (all !== null) direct!.onEventObjects(i, all);
    if (batches.length === 0) return;
    if (direct === null) router.onEvents?.(i, batches);
    sink?.(i, batches, step);
  }

  /** Engine `i`'s events since its last flush, stamped `ts` seconds, of step `step`. */
  flush(i: number, pool: BlockManagerPool, ts: number, step: number): void {
    if (!this.wanted) return;
    const { router, sink, direct } = this;
    const records = direct === null ? undefined : (rank: number, source: KVEventSource, rt: CoreInstance, ptr: number, len: number) => direct.onEventRecords(i, rank, source, rt, ptr, len, pool.saltNames);
    if (records !== undefined && sink === undefined) {
      pool.drainEventRecords(records);
      return;
    }
    const enc = (this.encoder ??= new VllmWireEncoder(this.wire));
    const batches: Uint8Array[] = [];
    enc.reset();
    drainInto(pool, enc, ts, (_rank, start) => batches.push(enc.bytes().slice(start)), records);
    if (batches.length === 0) return;
    if (direct === null) router.onEvents?.(i, batches);
    sink?.(i, batches, step);
  }
}

// Precise prefix routing (llm-d's precise prefix-cache scorer, Dynamo's KV
// router): the engines' real KV-cache events, as vLLM batches, feed a
// KVEventIndex; a request goes where the longest prefix of its prompt is
// cached, weighed against load. Knows exactly what each engine caches as of
// the end of the previous step.

import type { CoreInstance } from '../core/core-instance.js';
import { KVEventIndex } from '../events/kv-event-index.js';
import type { KVEvent, KVEventSource, SaltNames } from '../managers/kv-events.js';
import { checkInt } from '../validate.js';
import { bestByPrefixAndLoad, parseWeights, type ParsedWeights, type PrefixScoreWeights } from './prefix-score.js';
import type { FleetView, RouteRequest, Router } from './router.js';

export interface PrecisePrefixOptions extends PrefixScoreWeights {
  /** The engines' tokens per block. */
  blockSize: number;
  /** The index counts a block's copies (vLLM engines announce each copy of a key: KVEventIndexOptions.countCopies). */
  countCopies?: boolean;
}

/** The instance name engine `e` publishes its events as. */
export function engineInstance(e: number): string {
  return `engine-${e}`;
}

export class PrecisePrefixRouter implements Router {
  readonly name = 'precise-prefix';
  /** The router-side index the events build (inspect it: `index.blocks(engineInstance(e))`). */
  readonly index: KVEventIndex;
  private readonly weights: ParsedWeights;

  constructor(options: PrecisePrefixOptions) {
    this.index = new KVEventIndex({ blockSize: checkInt('options.blockSize', options.blockSize, 1), ...(options.countCopies !== undefined && { countCopies: options.countCopies }) });
    this.weights = parseWeights(options);
  }

  onEvents(e: number, batches: readonly Uint8Array[]): void {
    for (const b of batches) this.index.applyBatch(engineInstance(e), b);
  }

  /**
   * @internal Engine `e`'s raw event records, as an in-thread fleet drains
   * them: the same events as `onEvents`' batches, read in place (no msgpack
   * encoding and decoding, which was a quarter of a precise fleet's time).
   */
  onEventRecords(e: number, dpRank: number, source: KVEventSource, rt: CoreInstance, ptr: number, len: number, salts: SaltNames | null): void {
    this.index.applyRecords(engineInstance(e), dpRank, source, rt, ptr, len, salts);
  }

  /**
   * @internal A vLLM engine `e`'s event objects, as an in-thread fleet drains
   * them from its managers: the same events as `onEvents`' batches.
   */
  onEventObjects(e: number, events: readonly KVEvent[]): void {
    this.index.apply(engineInstance(e), events);
  }

  route(req: RouteRequest, fleet: FleetView): number {
    const held = req.fullBlocks > 0 ? this.index.longestPrefix(req.tokens()) : new Map<string, number>();
    return bestByPrefixAndLoad(fleet, req.fullBlocks, (e) => held.get(engineInstance(e)) ?? 0, this.weights);
  }
}

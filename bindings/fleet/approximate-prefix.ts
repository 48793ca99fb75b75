// Approximate prefix routing (llm-d's "approximate" prefix-cache scorer):
// the router remembers, per engine, the block keys of the prompts it sent
// there, in an LRU of the engine's capacity, and assumes the engine still
// holds them. It needs no events, and it is wrong where the engine evicted
// earlier than the LRU guess or cached differently.

import { checkInt } from '../validate.js';
import { bestByPrefixAndLoad, parseWeights, type ParsedWeights, type PrefixScoreWeights } from './prefix-score.js';
import type { FleetView, RouteRequest, Router } from './router.js';

export interface ApproximatePrefixOptions extends PrefixScoreWeights {
  /** Block keys remembered per engine (the fleet passes its blocks per engine, padding excluded). */
  capacity: number;
}

/** A 16-byte key as an 8-character string (Map keys). */
export function keyString(hashes: Uint8Array, b: number): string {
  const o = b * 16;
  const h = hashes;
  return String.fromCharCode(
    h[o]! | (h[o + 1]! << 8), h[o + 2]! | (h[o + 3]! << 8), h[o + 4]! | (h[o + 5]! << 8), h[o + 6]! | (h[o + 7]! << 8),
    h[o + 8]! | (h[o + 9]! << 8), h[o + 10]! | (h[o + 11]! << 8), h[o + 12]! | (h[o + 13]! << 8), h[o + 14]! | (h[o + 15]! << 8),
  );
}

export class ApproximatePrefixRouter implements Router {
  readonly name = 'approximate-prefix';
  private readonly memory: Map<string, true>[] = [];
  private readonly weights: ParsedWeights;
  readonly capacity: number;

  constructor(options: ApproximatePrefixOptions) {
    this.capacity = checkInt('options.capacity', options.capacity, 1);
    this.weights = parseWeights(options);
  }

  route(req: RouteRequest, fleet: FleetView): number {
    while (this.memory.length < fleet.engines) this.memory.push(new Map());
    const n = req.fullBlocks;
    const hashes = n > 0 ? req.blockHashes() : new Uint8Array(0);
    const keys: string[] = [];
    for (let b = 0; b < n; b++) keys.push(keyString(hashes, b));
    const matched = (e: number): number => {
      const m = this.memory[e]!;
      let i = 0;
      while (i < n && m.has(keys[i]!)) i++;
      return i;
    };
    const e = bestByPrefixAndLoad(fleet, n, matched, this.weights);
    this.remember(e, keys);
    return e;
  }

  /** Refreshes the keys in order (the last one most recent), then forgets the least recent beyond capacity. */
  private remember(e: number, keys: readonly string[]): void {
    const m = this.memory[e]!;
    for (const k of keys) {
      m.delete(k);
      m.set(k, true);
    }
    for (const k of m.keys()) {
      if (m.size <= this.capacity) break;
      m.delete(k);
    }
  }

  /** Keys remembered for engine `e` (tests). */
  remembered(e: number): number {
    return this.memory[e]?.size ?? 0;
  }
}

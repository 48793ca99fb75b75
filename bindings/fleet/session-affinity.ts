// Session affinity: consistent hashing of a request's leading block key onto
// a ring of engines, so the turns of one conversation (which share their
// leading blocks) land on one engine, and adding an engine moves only the
// sessions of its arcs. Blind to load and to what the caches hold.

import { xxh3_128 } from '../hash.js';
import { checkInt } from '../validate.js';
import type { FleetView, RouteRequest, Router } from './router.js';

/** Points each engine has on the ring. */
export const AFFINITY_VNODES = 64;

const utf8 = new TextEncoder();

function u32(bytes: Uint8Array, at = 0): number {
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
}

/** Ring point of virtual node `v` of engine `e`: the first 4 bytes (LE) of XXH3-128 of "engine-e#v", seed 0. */
export function ringPoint(e: number, v: number): number {
  return u32(xxh3_128(utf8.encode(`engine-${e}#${v}`)));
}

export class SessionAffinityRouter implements Router {
  readonly name = 'session-affinity';
  private ring: { point: number; engine: number }[] = [];
  private ringFor = -1;
  readonly affinityBlocks: number;

  /** `affinityBlocks`: hash the key of the min(affinityBlocks, full blocks)-th block (default 1: the first block). */
  constructor(affinityBlocks = 1) {
    this.affinityBlocks = checkInt('affinityBlocks', affinityBlocks, 1);
  }

  route(req: RouteRequest, fleet: FleetView): number {
    if (this.ringFor !== fleet.engines) this.build(fleet.engines);
    const x = this.point(req);
    const ring = this.ring;
    let lo = 0;
    let hi = ring.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (ring[mid]!.point < x) lo = mid + 1;
      else hi = mid;
    }
    return ring[lo === ring.length ? 0 : lo]!.engine;
  }

  /** The request's point: its chosen block key's first 4 bytes; a prompt without a full block hashes its tokens. */
  private point(req: RouteRequest): number {
    const k = Math.min(this.affinityBlocks, req.fullBlocks);
    if (k > 0) return u32(req.blockHashes(), (k - 1) * 16);
    const t = req.tokens();
    return u32(xxh3_128(new Uint8Array(t.buffer, t.byteOffset, t.byteLength)));
  }

  private build(engines: number): void {
    const ring: { point: number; engine: number; v: number }[] = [];
    for (let e = 0; e < engines; e++) for (let v = 0; v < AFFINITY_VNODES; v++) ring.push({ point: ringPoint(e, v), engine: e, v });
    ring.sort((a, b) => a.point - b.point || a.engine - b.engine || a.v - b.v);
    this.ring = ring;
    this.ringFor = engines;
  }
}

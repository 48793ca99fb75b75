// How many engines fit (docs/fleet.md, how large a fleet fits): every
// engine's pool lives in the linear memory of its thread's Wasm core, which
// is 32-bit (at most 4 GiB). A fleet that cannot fit is refused before its
// first engine is built, with the ceiling for its options, instead of
// failing on Wasm memory after building a thousand engines.

import { MAX_PAGES } from '../core/abi.js';
import { plainCore } from '../core/plain-core.js';
import { openReplay, type ParsedReplayOptions } from '../replay/replay.js';
import { openVllmEngine } from '../vllm/open-engine.js';
import type { ParsedVllmReplayOptions } from '../vllm/replay.js';
import type { ParsedFleetOptions } from './fleet-options.js';

/** A core's whole memory: 4 GiB. */
export const CORE_BYTES = MAX_PAGES * 65536;

/** What a worker thread's fresh core keeps for itself (staging areas, the events' buffers), set aside before its engines. */
export const WORKER_CORE_RESERVE = 64 << 20;

function inUse(): number {
  const ex = plainCore().ex;
  return (ex.heapTop() >>> 0) - ex.heapFreeBytes();
}

const measured = new Map<string, number>();

/**
 * Bytes of core memory one engine of these replay options takes: measured
 * by building one (in this thread's core) and giving it back; what the core
 * kept after (staging areas grown once) is not the engine's.
 */
export function engineCoreBytes(p: ParsedReplayOptions, vllm?: ParsedVllmReplayOptions): number {
  const key = JSON.stringify(vllm ?? p, (k, v) => (k === 'onProgress' || k === 'trace' ? undefined : v)) + (vllm === undefined ? '' : ' vllm');
  const known = measured.get(key);
  if (known !== undefined) return known;
  const before = inUse();
  let dispose: () => void;
  try {
    if (vllm !== undefined) dispose = openVllmEngine(vllm).dispose;
    else {
      const open = openReplay(p);
      dispose = () => open.pool.dispose();
    }
  } catch {
    return 0; // not measurable here (one engine alone does not fit, say): building the fleet says why
  }
  const built = inUse();
  dispose();
  const bytes = Math.max(0, built - before - (inUse() - before));
  measured.set(key, bytes);
  return bytes;
}

function gib(n: number): string {
  return n >= 1 << 30 ? `${(n / (1 << 30)).toFixed(2)} GiB` : `${(n / (1 << 20)).toFixed(1)} MiB`;
}

/** The most engines of `perEngine` bytes that fit in `room` bytes. */
function ceiling(room: number, perEngine: number): number {
  return perEngine === 0 ? Infinity : Math.max(0, Math.floor(room / perEngine));
}

/**
 * Throws a RangeError, before any engine is built, when the fleet's engines
 * cannot fit their thread's core: in this thread (threads 0, what is left of
 * its core), or per worker thread (threads > 0, or `onWorker`: a fleet run
 * whole on one worker thread, as a sweep runs it; a fresh core each).
 */
export function checkFleetFits(p: ParsedFleetOptions, onWorker = false): void {
  const per = engineCoreBytes(p.replay, p.vllm);
  const threads = p.threads > 0 ? Math.min(p.threads, p.engines) : 1;
  const inThisThread = p.threads === 0 && !onWorker;
  const room = inThisThread ? CORE_BYTES - inUse() : CORE_BYTES - WORKER_CORE_RESERVE;
  const perThread = Math.ceil(p.engines / threads);
  if (perThread * per <= room) return;
  const most = ceiling(room, per);
  const r = p.replay;
  const what = `${p.engines.toLocaleString('en-US')} engines of ${r.numBlocks.toLocaleString('en-US')} blocks${r.dpSize > 1 ? ` x ${r.dpSize} dp ranks` : ''}`;
  const need = threads > 1
    ? `${perThread.toLocaleString('en-US')} engines on each of ${threads} worker threads need ${gib(perThread * per)} of Wasm memory each (${gib(per)} an engine)`
    : `${what} need ${gib(p.engines * per)} of Wasm memory (${gib(per)} each)`;
  const holds = inThisThread ? `a thread's core holds at most 4 GiB, ${gib(room)} of it free here` : "a thread's core holds at most 4 GiB";
  const fix = p.timed !== undefined
    ? 'a timed fleet runs in one thread: give each engine fewer blocks'
    : onWorker
      ? 'a sweep runs each fleet in one worker thread: give each engine fewer blocks'
      : `give options.threads ${Math.ceil(p.engines / Math.max(1, ceiling(CORE_BYTES - WORKER_CORE_RESERVE, per)))} or more (each worker thread has a core of its own), or give each engine fewer blocks`;
  throw new RangeError(`options.engines ${p.engines}: ${need}; ${holds}: at most ${most.toLocaleString('en-US')} such engines fit in one thread; ${fix}`);
}

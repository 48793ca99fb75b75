// The sweep's worker pool: jobs handed out longest first to a fixed set of
// worker threads that share one trace; progress summed over every job;
// results in job order. Used by `sweep()` (replays) and `fleetSweep()` (fleets).

import type { Worker } from 'node:worker_threads';
import type { TraceRequest } from '../replay/trace.js';
import { startWorker } from './worker.js';
import type { SweepJob, SweepReply } from './sweep-worker.js';

export interface SweepProgress {
  /** Requests replayed so far, over every configuration. */
  requestsDone: number;
  requestsTotal: number;
  runsDone: number;
  runsTotal: number;
}

export interface PoolPlan {
  jobs: SweepJob[];
  /** Requests each job replays (for the progress totals). */
  lengths: number[];
  /** Job indices in the order they are handed out. */
  order: number[];
  workers: number;
  requests: readonly TraceRequest[] | null;
  onProgress?: ((p: SweepProgress) => void) | undefined;
  /** "numBlocks=4096 eviction=lfu": names a job in an error. */
  describe: (id: number) => string;
}

/**
 * A sweep's error in configuration `i` of `n` (`what` names it), of the
 * same class: a RangeError stays one.
 */
export function configurationError(e: unknown, i: number, n: number, what: string): Error {
  const message = `configuration ${i + 1} of ${n} (${what}): ${(e as Error).message}`;
  return e instanceof RangeError ? new RangeError(message) : new TypeError(message);
}

/**
 * Runs every job on `plan.workers` threads; the results by job id. A
 * progress callback that throws ends the sweep: the promise rejects with
 * its error.
 */
export async function runOnWorkers<R>(plan: PoolPlan): Promise<R[]> {
  const { jobs, lengths, order, requests, onProgress } = plan;
  const n = Math.min(plan.workers, jobs.length);
  const progress: SweepProgress = { requestsDone: 0, requestsTotal: lengths.reduce((a, b) => a + b, 0), runsDone: 0, runsTotal: jobs.length };
  const doneOf = new Array<number>(jobs.length).fill(0);
  const results = new Array<R>(jobs.length);
  const pool: Worker[] = [];
  let next = 0;
  try {
    await new Promise<void>((resolve, reject) => {
      let idle = 0;
      let failed = false;
      const report = () => {
        try {
          onProgress?.({ ...progress });
        } catch (e) {
          failed = true;
          reject(e);
        }
      };
      const give = (w: Worker) => {
        if (failed) return;
        if (next >= jobs.length) {
          if (++idle === n) resolve();
          return;
        }
        w.postMessage(jobs[order[next++]!]!);
      };
      for (let i = 0; i < n; i++) {
        const w = startWorker('sweep-worker', { workerData: { trace: requests } });
        pool.push(w);
        w.on('message', (m: SweepReply) => {
          if (m.type === 'progress') {
            progress.requestsDone += m.done - doneOf[m.id]!;
            doneOf[m.id] = m.done;
            report();
          } else if (m.type === 'result') {
            results[m.id] = m.result as R;
            progress.requestsDone += lengths[m.id]! - doneOf[m.id]!;
            doneOf[m.id] = lengths[m.id]!;
            progress.runsDone++;
            report();
            give(w);
          } else {
            failed = true;
            // The class it had in the worker: fleet() and replay() throw a RangeError for a bad value, and so does the sweep.
            const E = m.name === 'RangeError' ? RangeError : m.name === 'TypeError' ? TypeError : Error;
            reject(new E(`configuration ${m.id + 1} (${plan.describe(m.id)}): ${m.message}`));
          }
        });
        w.on('error', (e) => {
          failed = true;
          reject(e);
        });
        w.on('exit', (code) => {
          if (!failed && code !== 0 && progress.runsDone < jobs.length) {
            failed = true;
            reject(new Error(`a sweep worker exited with code ${code}`));
          }
        });
        give(w);
      }
    });
  } finally {
    await Promise.all(pool.map((w) => w.terminate()));
  }
  return results;
}

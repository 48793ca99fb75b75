// A fleet engine under scheduler 'continuous' (docs/fleet-time.md): a
// vLLM-v1-style continuous-batching step on kvpool's exact pool. Each step
// has a token budget: the running sequences first, in admission order (a
// decode takes one token, a prefill the rest of its prompt or what the
// budget leaves: chunked prefill), then waiting requests while a sequence
// slot and budget remain. When the pool cannot give a running sequence its
// blocks, the latest admitted one on its dp rank is preempted: its blocks go
// back (cached blocks stay in the prefix cache) and it waits at the head of
// the queue, to recompute its prompt and the tokens it had given.
//
// Every run ends: the oldest running sequence is never preempted (victims
// come after it on its rank) and computes at least one token each step, so
// it finishes, or is truncated when alone on its rank and still short; a
// recompute whose prompt no longer fits a rank is truncated at once.

import { nextOutputToken, outputToken, promptTokens, type ReplaySequence, type ReplayTarget } from '../replay/kernel.js';
import { namedRequestError } from '../replay/stepper.js';
import { openReplay, type OpenReplay, type ParsedReplayOptions, type ReplayConfig, type ReplayRun } from '../replay/replay.js';
import type { TraceRequest } from '../replay/trace.js';
import { addChunk, addDecode, clearStepBatch, type StepBatch } from '../timing/timing-model.js';
import type { EngineEvents } from './engine-events.js';
import type { RequestClock, TimedEngineFigures } from './fleet-latency.js';
import type { FleetConfig } from './fleet-options.js';
import { hostLoaded, type TimedEngine } from './timed-engine.js';

/** The dp rank a replay sequence runs on (0 where the target's sequences have none). */
function rankOf(s: ReplaySequence): number {
  return (s as { dpRank?: number }).dpRank ?? 0;
}

/** A request the engine holds, running or waiting. */
interface Job {
  r: number;
  seq: ReplaySequence | null;
  /** Tokens its (re)prefill computes: the prompt, plus on a recompute the tokens given before. */
  promptLen: number;
  /** Of those, tokens whose KV is computed (or was found cached). */
  computed: number;
  /** Output tokens given so far. */
  given: number;
  /** The next output token it gives. */
  tok: number;
  /** Output tokens it gives in all: max(outputLength, 1). */
  total: number;
  /** Tokens this step computes for it (-1: not scheduled; 0: an empty prompt's step, which still gives its first token). */
  now: number;
  admitted: boolean;
}

export class ContinuousEngine implements TimedEngine {
  readonly open: OpenReplay;
  private readonly target: ReplayTarget<ReplaySequence>;
  private readonly B: number;
  private readonly maxSeqs: number;
  private readonly rankBlocks: number;
  private runningJobs: Job[] = [];
  private waiting: Job[] = [];
  private wHead = 0;
  private k = 0;
  private stepMs = 0;
  private early = 0;
  private preempted = 0;
  private prefill = 0;
  private cached = 0;
  private host = 0;
  private hostSeen = 0;
  private readonly hostTier: boolean;
  // The engine's replay figures, as the kernel counts them (docs/fleet-time.md, engine figures).
  private requests = 0;
  private rejected = 0;
  private promptBlocks = 0;
  private matchedBlocks = 0;
  private allocatedBlocks = 0;
  private idChecksum = 0;
  private readonly evictedBefore: number;

  constructor(
    p: ParsedReplayOptions,
    events: boolean,
    private readonly trace: readonly TraceRequest[],
    private readonly clock: RequestClock,
    private readonly maxTokens: number,
    private readonly queueDelay: (r: number, steps: number) => void,
  ) {
    this.open = openReplay(p);
    if (events) this.open.pool.recordEvents(true);
    this.target = this.open.target;
    this.B = p.blockSize;
    this.maxSeqs = p.maxRunning;
    this.rankBlocks = p.numBlocks - 1;
    this.hostTier = p.hostBlocks > 0;
    this.evictedBefore = this.target.blocksEvicted();
  }

  get pool(): OpenReplay['pool'] {
    return this.open.pool;
  }
  get running(): number {
    return this.runningJobs.length;
  }
  get queued(): number {
    return this.waiting.length - this.wHead;
  }
  get load(): number {
    return this.running + this.queued;
  }
  get steps(): number {
    return this.k;
  }
  get finishedEarly(): number {
    return this.early;
  }

  enqueue(r: number): void {
    this.clock.queuedStep[r] = this.k;
    const total = Math.max(this.trace[r]!.outputLength, 1);
    this.waiting.push({ r, seq: null, promptLen: this.trace[r]!.inputLength, computed: 0, given: 0, tok: outputToken(r, 0), total, now: -1, admitted: false });
  }

  /** Records the blocks `s` holds from `from` on as allocated (the kernel's id checksum fold). */
  private recordNew(s: ReplaySequence, from: number): void {
    const table = this.target.blockIds?.(s) ?? s.blockTable;
    let h = this.idChecksum | 0;
    for (let i = from; i < s.numBlocks; i++) h = (Math.imul(h, 31) + table[i]!) | 0;
    this.idChecksum = h >>> 0;
    this.allocatedBlocks += Math.max(0, s.numBlocks - from);
  }

  /**
   * Grows `s` to `tokens` tokens' blocks (none given: its whole prompt, as a
   * prefill attempt, which a KV-cache store prefetches for first); false
   * (nothing changed) when the pool is short. Prefix hits are not new blocks.
   */
  private grow(s: ReplaySequence, tokens?: number): boolean {
    const before = s.numBlocks;
    if (!this.target.allocate(s, tokens)) return false;
    const from = Math.max(before, s.sharedBlocks);
    if (s.numBlocks > from) this.recordNew(s, from);
    return true;
  }

  /** Gives `j`'s blocks back and puts it at the head of the queue, to recompute. */
  private preempt(j: Job): void {
    this.target.deallocate(j.seq!);
    j.seq = null;
    j.computed = 0;
    j.now = -1;
    j.promptLen = this.trace[j.r]!.inputLength + j.given;
    this.preempted++;
    if (this.wHead > 0) this.waiting[--this.wHead] = j;
    else this.waiting.unshift(j);
  }

  /** The sequence a waiting job (re)starts with: its prompt, and on a recompute the tokens it gave. */
  private newSequence(j: Job): ReplaySequence {
    const req = this.trace[j.r]!;
    const buf = new Int32Array(req.inputLength + j.total + 1);
    try {
      promptTokens(req, buf);
    } catch (e) {
      throw namedRequestError(e, j.r);
    }
    for (let i = 0, t = outputToken(j.r, 0); i < j.given; i++, t = nextOutputToken(t)) buf[req.inputLength + i] = t;
    // Its generated tokens begin after the trace's prompt, a recompute's included (the 'priority' replay marks them).
    return this.target.newSequence(buf, j.promptLen, req.inputLength);
  }

  /** The latest running sequence after index `i` on dp rank `rank` (its index; -1: none). */
  private latestOnRank(i: number, rank: number): number {
    const run = this.runningJobs;
    for (let v = run.length - 1; v > i; v--) if (rankOf(run[v]!.seq!) === rank) return v;
    return -1;
  }

  /** Whether a running sequence before index `i` holds blocks on dp rank `rank`. */
  private olderOnRank(i: number, rank: number): boolean {
    const run = this.runningJobs;
    for (let v = 0; v < i; v++) if (rankOf(run[v]!.seq!) === rank) return true;
    return false;
  }

  begin(ms: number, batch: StepBatch): void {
    clearStepBatch(batch);
    this.stepMs = ms;
    let budget = this.maxTokens;
    let preemptedNow = false;
    const run = this.runningJobs;
    for (let i = 0; i < run.length && budget > 0; i++) {
      const j = run[i]!;
      const s = j.seq!;
      const rank = rankOf(s);
      const prefilling = j.computed < j.promptLen;
      const n = prefilling ? Math.min(j.promptLen - j.computed, budget) : 1;
      const tokens = prefilling ? j.computed + n : s.numTokens;
      let ok = this.grow(s, tokens);
      // Short: the latest sequence on its rank gives its blocks back (vLLM's recompute preemption), until this one fits.
      while (!ok) {
        const v = this.latestOnRank(i, rank);
        if (v < 0) break;
        const victim = run[v]!;
        run.splice(v, 1);
        this.preempt(victim);
        preemptedNow = true;
        ok = this.grow(s, tokens);
      }
      if (!ok) {
        run.splice(i, 1);
        if (this.olderOnRank(i, rank)) {
          // It is the latest on its rank: it waits for the older ones' blocks, and the step schedules no more.
          this.preempt(j);
          preemptedNow = true;
          break;
        }
        // Alone on its rank and still short: it never fits; it stops here with the tokens it gave.
        this.truncate(j);
        i--;
        continue;
      }
      j.now = n;
      budget -= n;
      if (prefilling) addChunk(batch, n, j.computed, rank);
      else addDecode(batch, s.numTokens, rank);
    }
    // vLLM admits no new request in a step that had to preempt.
    while (!preemptedNow && this.wHead < this.waiting.length && run.length < this.maxSeqs && budget > 0) {
      const j = this.waiting[this.wHead]!;
      const req = this.trace[j.r]!;
      // A prompt (or a recompute's prompt and the tokens it gave) that needs more blocks than a rank has never fits.
      if (Math.ceil(j.promptLen / this.B) > this.rankBlocks) {
        this.wHead++;
        if (j.admitted) this.truncate(j);
        else this.reject(j);
        continue;
      }
      const s = this.newSequence(j);
      // The first allocation matches the prefix cache (one token's block; the match covers the whole prompt).
      // With a host tier it covers the whole prompt: the host's hits are loaded into blocks the sequence must hold;
      // it is the replay's prefill attempt, so a KV-cache store behind the host prefetches for it first.
      let placed = this.grow(s, this.hostTier ? undefined : 1);
      const hit = placed ? s.kvCachedTokens : 0;
      const n = Math.min(j.promptLen - hit, budget);
      if (placed && !this.hostTier && !this.grow(s, hit + n)) {
        this.target.deallocate(s);
        placed = false;
      }
      if (!placed) {
        if (run.length > 0) break; // it waits for blocks the running ones give back
        // Nothing runs and the pool is still short: it never fits a rank.
        this.wHead++;
        if (j.admitted) this.truncate(j);
        else this.reject(j);
        continue;
      }
      this.wHead++;
      if (!j.admitted) {
        j.admitted = true;
        this.requests++;
        this.promptBlocks += Math.floor(req.inputLength / this.B);
        this.matchedBlocks += s.sharedBlocks;
        this.clock.admittedMs[j.r] = ms;
        this.queueDelay(j.r, this.k - this.clock.queuedStep[j.r]!);
      }
      j.seq = s;
      j.computed = hit;
      j.now = n;
      run.push(j);
      budget -= n;
      addChunk(batch, n, hit, rankOf(s));
      batch.cachedTokens += hit;
    }
    if (this.wHead > 1024 && this.wHead * 2 > this.waiting.length) {
      this.waiting = this.waiting.slice(this.wHead);
      this.wHead = 0;
    }
    if (this.hostTier) {
      const h = hostLoaded(this.open.pool);
      batch.hostLoadedBlocks = h - this.hostSeen;
      this.hostSeen = h;
    }
    this.prefill += batch.prefillTokens;
    this.cached += batch.cachedTokens;
    this.host += batch.hostLoadedBlocks;
    this.k++;
  }

  private reject(j: Job): void {
    this.requests++;
    this.rejected++;
    this.clock.admittedMs[j.r] = this.stepMs;
    this.queueDelay(j.r, this.k - this.clock.queuedStep[j.r]!);
    this.clock.finish(j.r, this.stepMs, 0);
  }

  private truncate(j: Job): void {
    this.early++;
    if (j.seq !== null) this.target.deallocate(j.seq);
    j.seq = null;
    this.clock.finish(j.r, this.stepMs, j.given);
  }

  end(ms: number): void {
    this.stepMs = ms;
    const run = this.runningJobs;
    let w = 0;
    for (let i = 0; i < run.length; i++) {
      const j = run[i]!;
      if (j.now >= 0 && this.give(j, ms)) continue;
      run[w++] = j;
    }
    while (run.length > w) run.pop(); // inlined, where setting length calls into the runtime every step
  }

  /** `j`'s step is computed: true when it finished. */
  private give(j: Job, ms: number): boolean {
    const s = j.seq!;
    const prefilling = j.computed < j.promptLen;
    j.computed += j.now;
    j.now = -1;
    if (prefilling && j.computed < j.promptLen) {
      s.kvCachedTokens = j.computed;
      return false;
    }
    s.kvCachedTokens = s.numTokens;
    // The prompt's blocks are published once its prefill is whole, before its first token is out.
    if (prefilling) this.target.cache(s);
    else j.computed = s.numTokens;
    if (j.given === 0) this.clock.firstTokenMs[j.r] = ms;
    this.clock.token(j.r, this.k - 1);
    j.given++;
    if (j.given >= j.total) {
      j.tok = nextOutputToken(j.tok);
      this.target.deallocate(s);
      j.seq = null;
      this.clock.finish(j.r, ms, j.given);
      return true;
    }
    // The token just given is the next step's input.
    s.appendToken(j.tok);
    j.tok = nextOutputToken(j.tok);
    return false;
  }

  drain(): void {
    for (const j of this.runningJobs) if (j.seq !== null) this.target.deallocate(j.seq);
    this.runningJobs = [];
  }

  flushEvents(events: EngineEvents, i: number, ts: number, step: number): void {
    events.flush(i, this.open.pool, ts, step);
  }

  result(config: ReplayConfig | FleetConfig): ReplayRun {
    const t = this.target;
    return this.open.finish({
      requests: this.requests,
      rejected: this.rejected,
      truncated: this.early,
      promptBlocks: this.promptBlocks,
      matchedBlocks: this.matchedBlocks,
      hitRate: this.promptBlocks === 0 ? 0 : Math.round((this.matchedBlocks / this.promptBlocks) * 1e6) / 1e6,
      evictedBlocks: t.blocksEvicted() - this.evictedBefore,
      allocatedBlocks: this.allocatedBlocks,
      idChecksum: this.idChecksum,
      freeBlocksAtEnd: t.numFreeBlocks(),
      cachedBlocksAtEnd: t.numBlocksInPrefixCache(),
      seconds: 0,
      allocateCallsPerSecond: 0,
    }, config as ReplayConfig);
  }

  figures(engine: number): Omit<TimedEngineFigures, 'utilisation'> {
    return { engine, steps: this.k, busyMs: 0, prefillTokens: this.prefill, cachedTokens: this.cached, hostLoadedBlocks: this.host, preemptions: this.preempted };
  }

  dispose(): void {
    this.open.pool.dispose();
  }
}

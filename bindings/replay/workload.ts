// The built-in workload: multi-turn chats that share system prompts, in the
// trace's own format, deterministic from a seed. Each turn's prompt is the
// conversation so far (its system prompt, earlier turns and answers) plus a
// new user message, so turns reuse their conversation's prefix and
// conversations reuse their system prompt.

import type { TraceRequest } from './trace.js';
import { mulberry32 as prng } from './prng.js';

export interface WorkloadOptions {
  /** Requests to generate (default 2000). */
  requests?: number;
  /** PRNG seed (default 1024). */
  seed?: number;
  /** Distinct system prompts (default 8). */
  systemPrompts?: number;
  /** Conversations in flight at once (default 48). */
  concurrentChats?: number;
}

interface Chat {
  /** Content ids of the full 512-token chunks so far. */
  chunks: number[];
  turnsLeft: number;
}

export function generateWorkload(options: WorkloadOptions = {}): TraceRequest[] {
  const n = options.requests ?? 2000;
  const rand = prng(options.seed ?? 1024);
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  let nextId = 0;
  const systems: number[][] = [];
  for (let i = 0; i < (options.systemPrompts ?? 8); i++) {
    systems.push(Array.from({ length: int(1, 6) }, () => nextId++));
  }
  const newChat = (): Chat => ({ chunks: [...systems[int(0, systems.length - 1)]!], turnsLeft: int(1, 10) });
  const chats = Array.from({ length: options.concurrentChats ?? 48 }, newChat);
  const out: TraceRequest[] = [];
  for (let r = 0; r < n; r++) {
    const k = int(0, chats.length - 1);
    const chat = chats[k]!;
    // The new user message: whole chunks plus a partial one at the end.
    const userChunks = int(0, 3);
    const partial = int(1, 511);
    const ids = [...chat.chunks];
    for (let j = 0; j <= userChunks; j++) ids.push(nextId++);
    const inputLength = (ids.length - 1) * 512 + partial;
    const outputLength = int(16, 600);
    out.push({ inputLength, outputLength, hashIds: Int32Array.from(ids), timestamp: r });
    // The next turn sees this prompt and its answer; only whole chunks keep their ids.
    chat.chunks = ids.slice(0, ids.length - 1);
    const answerChunks = Math.floor((partial + outputLength) / 512);
    for (let j = 0; j < answerChunks; j++) chat.chunks.push(nextId++);
    if (--chat.turnsLeft === 0) chats[k] = newChat();
  }
  return out;
}

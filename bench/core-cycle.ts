// The replay's core cycle through a core build's raw exports, for
// bench/builds.ts (builds side by side) and bench/native.ts (the same build
// under Node and compiled natively): allocate K blocks (evicting K once the
// cache is full), insert K fresh blocks, release them. No bindings: each
// subject is an instance of its own.

import { readFileSync } from 'node:fs';

/** The exports the cycle and the hash measurement use. */
export interface CoreRaw {
  memory: WebAssembly.Memory;
  alloc(bytes: number): number;
  mgr_create(numBlocks: number, blockSize: number, prefixOn: number, seedLo: number, seedHi: number): number;
  mgr_allocate(m: number, n: number, out: number): number;
  mgr_insert(m: number, tokens: number, ids: number, n: number, parentId: number, parentPtr: number): number;
  mgr_release(m: number, ids: number, n: number): number;
  hash_blocks(tokens: number, numTokens: number, blockSize: number, seedLo: number, seedHi: number, out: number): number;
}

/** Tokens per block in every cycle. */
export const CYCLE_BLOCK_SIZE = 16;

/** One core instance and manager of `n` blocks, with room for rounds of `k` blocks. */
export class CycleSubject {
  readonly e: CoreRaw;
  readonly m: number;
  private readonly tokens: number;
  private readonly ids: number;
  private next = 1;
  /** Per-block nanoseconds of each timed round: allocate, insert, release. */
  readonly ns: [number[], number[], number[]] = [[], [], []];

  constructor(
    readonly file: string,
    n: number,
    readonly k: number,
  ) {
    this.e = new WebAssembly.Instance(new WebAssembly.Module(readFileSync(file)), {}).exports as unknown as CoreRaw;
    this.m = this.e.mgr_create(n, CYCLE_BLOCK_SIZE, 1, 1024, 0);
    if (this.m === 0) throw new Error(`${file}: could not create a manager of ${n} blocks`);
    this.tokens = this.e.alloc(16 + k * CYCLE_BLOCK_SIZE * 4) + 16;
    this.ids = this.e.alloc(k * 4);
  }

  /** One round; its times are kept when `timed`. */
  round(timed: boolean): void {
    const { e, m, k } = this;
    const i32 = new Int32Array(e.memory.buffer);
    for (let i = 0, p = this.tokens >> 2; i < k * CYCLE_BLOCK_SIZE; i++) i32[p + i] = this.next++;
    const t0 = performance.now();
    if (e.mgr_allocate(m, k, this.ids) !== k) throw new Error(`${this.file}: allocate failed`);
    const t1 = performance.now();
    if (e.mgr_insert(m, this.tokens, this.ids, k, 0, 0) < 0) throw new Error(`${this.file}: insert failed`);
    const t2 = performance.now();
    if (e.mgr_release(m, this.ids, k) !== 0) throw new Error(`${this.file}: release failed`);
    const t3 = performance.now();
    if (timed) {
      this.ns[0].push(((t1 - t0) * 1e6) / k);
      this.ns[1].push(((t2 - t1) * 1e6) / k);
      this.ns[2].push(((t3 - t2) * 1e6) / k);
    }
  }
}

/** The median (a round another process slowed down moves a sum, not a median). */
export function median(xs: readonly number[]): number {
  return [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
}

// The waiting queue: a ring of requests that takes new ones at the back and
// preempted ones at the front (vLLM's FCFS deque). It grows by doubling and
// allocates nothing otherwise.

import type { VllmRequest } from './request.js';

export class RequestQueue {
  private ring: Array<VllmRequest | undefined> = new Array(16);
  private head = 0;
  private size = 0;

  get length(): number {
    return this.size;
  }

  /** The request at the front, or undefined. */
  peek(): VllmRequest | undefined {
    return this.size === 0 ? undefined : this.ring[this.head];
  }

  /** The request at position `i` from the front. */
  at(i: number): VllmRequest | undefined {
    return i < 0 || i >= this.size ? undefined : this.ring[(this.head + i) & (this.ring.length - 1)];
  }

  push(r: VllmRequest): void {
    if (this.size === this.ring.length) this.grow();
    this.ring[(this.head + this.size) & (this.ring.length - 1)] = r;
    this.size++;
  }

  /** Puts `r` at the front (a preempted request, vLLM's prepend_request). */
  pushFront(r: VllmRequest): void {
    if (this.size === this.ring.length) this.grow();
    this.head = (this.head - 1) & (this.ring.length - 1);
    this.ring[this.head] = r;
    this.size++;
  }

  shift(): VllmRequest | undefined {
    if (this.size === 0) return undefined;
    const r = this.ring[this.head];
    this.ring[this.head] = undefined;
    this.head = (this.head + 1) & (this.ring.length - 1);
    this.size--;
    return r;
  }

  private grow(): void {
    const next: Array<VllmRequest | undefined> = new Array(this.ring.length * 2);
    for (let i = 0; i < this.size; i++) next[i] = this.ring[(this.head + i) & (this.ring.length - 1)];
    this.ring = next;
    this.head = 0;
  }
}

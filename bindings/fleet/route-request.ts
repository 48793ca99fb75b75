// The request a router is shown: its prompt tokens and block keys made on
// first use, so that routers that look at neither cost nothing.

import { hashBlocks } from '../hash.js';
import { promptTokens } from '../replay/kernel.js';
import { namedRequestError } from '../replay/stepper.js';
import type { TraceRequest } from '../replay/trace.js';
import type { RouteRequest } from './router.js';

export class LazyRequest implements RouteRequest {
  private t: Int32Array | undefined;
  private h: Uint8Array | undefined;
  readonly fullBlocks: number;
  constructor(readonly index: number, readonly request: TraceRequest, readonly step: number, private readonly blockSize: number, private readonly seed: number) {
    this.fullBlocks = Math.floor(request.inputLength / blockSize);
  }
  tokens(): Int32Array {
    if (this.t === undefined) {
      try {
        this.t = promptTokens(this.request);
      } catch (e) {
        throw namedRequestError(e, this.index);
      }
    }
    return this.t;
  }
  blockHashes(): Uint8Array {
    return (this.h ??= hashBlocks(this.tokens(), this.blockSize, this.seed));
  }
}

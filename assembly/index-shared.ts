// Entry of the shared-memory build (build/kvpool-shared.wasm): the same core,
// compiled with threads over an imported shared memory, one instance per
// thread. See heap.ts for what differs.
export * from "./index";
export { nextThreadId } from "./heap";

import { release } from "./heap";
import { prefixScratch } from "./prefix";
import { derivedSecret } from "./xxh3";

/** Gives this instance's own regions back; the instance must not be called afterwards. */
export function threadRelease(): void {
  release(prefixScratch());
  release(derivedSecret());
}

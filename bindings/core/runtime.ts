// What a core-backed manager runs on: one Wasm core instance (its exports,
// memory views and staging areas). The plain single-threaded core is the
// default; a shared-memory manager runs on this thread's instance of the
// shared build (shared-instance.ts).

import type { CoreExports } from './exports.js';
import { core, growing, mem, views } from './instance.js';
import { plainStaging, type MemViews, type Staging } from './staging.js';

export interface CoreRuntime {
  /** The raw exports (loads the core synchronously where the platform allows). */
  core(): CoreExports;
  /** Views of linear memory; the same object, refreshed in place after growth. */
  readonly mem: MemViews;
  /** Runs a call that may grow memory, then refreshes the views. */
  growing<T>(fn: (e: CoreExports) => T): T;
  /** The views, refreshed now (after calls made outside `growing`). */
  views(): MemViews;
  /** This instance's staging areas. */
  readonly staging: Staging;
}

/** The plain core (bindings/core/instance.ts). */
export const plainRuntime: CoreRuntime = { core, mem, growing, views, staging: plainStaging };

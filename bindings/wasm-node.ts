// Node-only: finds build/kvpool.wasm (and kvpool-shared.wasm) next to the
// package and loads it synchronously on first use, so constructors work
// without an `await`.

import { readFileSync } from 'node:fs';
import { setDefaultSource, setSyncLoader } from './core/plain-core.js';
import { setSharedSyncLoader } from './core/shared-core.js';

const wasmUrl = new URL('../build/kvpool.wasm', import.meta.url);

setSyncLoader(() => new WebAssembly.Module(readFileSync(wasmUrl)));
setDefaultSource(() => readFileSync(wasmUrl));

// The shared-memory build behind ConcurrentBlockManagerImpl.
const sharedWasmUrl = new URL('../build/kvpool-shared.wasm', import.meta.url);
setSharedSyncLoader(() => new WebAssembly.Module(readFileSync(sharedWasmUrl)));

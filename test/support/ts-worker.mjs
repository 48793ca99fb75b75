// Starts a TypeScript worker: Node 20 workers do not inherit the parent's
// loader hooks (`--import tsx` in execArgv is not enough), so the worker
// loads its entry (workerData.entry, a file URL) through tsx's API.
import { workerData } from 'node:worker_threads';
import { tsImport } from 'tsx/esm/api';

await tsImport(workerData.entry, import.meta.url);

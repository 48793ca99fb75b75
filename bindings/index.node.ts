// The Node entry: everything in index.ts, with the core loaded synchronously
// from the package's build/kvpool.wasm on first use, plus trace files.

import './wasm-node.js';

export * from './index.js';
export { readTraceFile } from './node/trace-file.js';
export { ZmqEventPublisher, type ZmqPublisherOptions } from './node/zmq-publisher.js';

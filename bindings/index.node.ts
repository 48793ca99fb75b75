// The Node entry: everything in index.ts, with the core loaded synchronously
// from the package's build/kvpool.wasm on first use, plus trace files, GPU
// profiles by preset name or folder, measured runs and calibrations from
// files, a `replay` that also takes a trace by name, and sweeps on worker
// threads.

import './wasm-node.js';
import './node/profile-files.js';

export * from './index.js';
export { readTraceFile, resolveTrace, BUILTIN_TRACES, MAX_TRACE_LINE_BYTES, type ReadTraceOptions } from './node/trace-file.js';
export { readTraceFileSync } from './node/trace-file-sync.js';
export { readTimingFile, readTimingSpecFile, MAX_TIMING_FILE_BYTES } from './node/timing-file.js';
export { readProfileBundle, readProfileDir, PROFILE_PRESETS, MAX_PROFILE_FILE_BYTES } from './node/profile-files.js';
// Shadows the platform-neutral replay of index.js (an explicit export wins over `export *`).
export { replay } from './node/replay-file.js';
export { fleet } from './node/fleet-file.js';
export { sloSearch } from './node/slo-search-file.js';
export { sweep, sweepConfigurations, SWEEP_GRID_KEYS, type SweepOptions, type SweepGrid, type SweepGridKey, type SweepProgress } from './node/sweep.js';
export { writeReport, reportHtml, reportSvg } from './node/report.js';
export { fleetSweep, fleetSweepConfigurations, FLEET_GRID_KEYS, type FleetSweepOptions, type FleetSweepGrid, type FleetGridKey } from './node/fleet-sweep.js';
export { writeFleetReport, fleetReportHtml } from './node/fleet-report.js';
export { readMeasuredRun, MEASURED_RUNS, MAX_RUN_FILE_BYTES } from './node/measured-files.js';
export { readCalibrationFile, writeCalibrationFile, MAX_CALIBRATION_FILE_BYTES } from './node/calibration-file.js';
export { writeValidationReport, validationReportHtml } from './node/validation-report.js';
export { ZmqEventPublisher, rankEndpoint, type ZmqPublisherOptions, type ZmqRankPublishersOptions, type ReplayFrames } from './node/zmq-publisher.js';

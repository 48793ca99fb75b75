#!/usr/bin/env node
// `kvpool`: the command line (replay, sweep, fleet, validate, calibrate). Node only.

import { realpathSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Command } from 'commander';
import '../wasm-node.js';
import { replayCommand } from './replay-command.js';
import { sweepCommand } from './sweep-command.js';
import { fleetCommand } from './fleet-command.js';
import { validateCommand } from './validate-command.js';
import { calibrateCommand } from './calibrate-command.js';
import { packageVersion } from './version.js';
import { flagNames } from './flag-names.js';
import { guardOptionValues, typedOptionDescription } from './option-values.js';

export { packageVersion };

export async function main(argv: string[]): Promise<number> {
  const program = new Command();
  program
    .name('kvpool')
    .description('KV-cache block manager with a WebAssembly core: replay traces, sweep configurations, route a fleet, check its time against measured vLLM runs and calibrate it')
    .addHelpText(
      'after',
      '\nEngines: `kvpool replay --engine xllm` (the default) replays xLLM\'s BlockManagerPool under the replay kernel;\n' +
        '`--engine vllm` runs vLLM v1\'s scheduler and block pool step by step, as vLLM does (token budget, chunked prefill,\n' +
        'preemption). Choose vllm to predict a vLLM deployment, xllm for xLLM and the modes only it has\n' +
        '(kvpool replay --help, docs/engines.md). kvpool fleet --engine vllm runs a fleet of vLLM engines, and\n' +
        'kvpool sweep --engine xllm,vllm compares the two as an axis.',
    )
    .version(packageVersion(), '-V, --version', 'print the version')
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) })
    .showHelpAfterError('(kvpool <command> --help lists the options)');
  for (const cmd of [replayCommand(), sweepCommand(), fleetCommand(), validateCommand(), calibrateCommand()]) {
    guardOptionValues(cmd);
    cmd.configureHelp({ optionDescription: typedOptionDescription });
    cmd.exitOverride();
    cmd.configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) });
    program.addCommand(cmd);
  }
  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    const ce = e as { code?: string; exitCode?: number };
    // commander printed its own message (help and version exit with 0)
    if (typeof ce.code === 'string' && ce.code.startsWith('commander.')) return ce.exitCode ?? 1;
    // The library's own errors start with its name already.
    const message = flagNames(program, (e as Error).message);
    process.stderr.write(message.startsWith('kvpool: ') ? `${message}\n` : `kvpool: ${message}\n`);
    return 1;
  }
  return 0;
}

// Run when executed directly (also through npm's bin symlink), not when imported by tests.
function isMain(): boolean {
  try {
    return !!process.argv[1] && realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}
if (isMain()) {
  // `kvpool replay --format csv | head`: a reader that stops early ends the command quietly, not with a stack trace.
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code !== 'EPIPE') throw e;
      process.exit(process.exitCode ?? 0);
    });
  }
  main(process.argv.slice(2)).then((c) => {
    process.exitCode = c;
  });
}

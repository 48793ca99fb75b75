// The library's errors name an option as the API spells it
// (options.hostBlocks, slidingWindow, scheduler 'continuous', timing: true);
// on the command line the same option is a flag (--host-blocks,
// --sliding-window, --scheduler continuous, --timing default), and a
// message should say what the user types.

import type { Command } from 'commander';

const kebab = (key: string) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/**
 * What the command line spells differently from the library: the default
 * timing model is `timing: true` in a program, `--timing default` here; a
 * profile's field `timing.gpuMemoryGib` is the flag `--gpu-memory-gib`.
 */
const VALUES: ReadonlyArray<[RegExp, string]> = [
  [/options\.timing \(true for the default model\)/g, 'options.timing default'],
  // A field of the profile spec that --profile's flags set.
  [/options\.timing\.gpuMemoryGib/g, '--gpu-memory-gib'],
];

/**
 * `message` in the command line's words: each option that a command of
 * `program` takes as a flag written as that flag -- `options.<name>`, a
 * quoted value after it (`options.eviction 'lfu'`, `scheduler 'xllm'`:
 * `--eviction lfu`, `--scheduler xllm`), a sweep's `name=value`, and
 * camelCase names alone (`slidingWindow`: `--sliding-window`).
 */
export function flagNames(program: Command, message: string): string {
  const flags = new Set(program.commands.flatMap((c) => c.options.map((o) => o.long)));
  const flagOf = (key: string) => (flags.has(kebab(key)) ? kebab(key) : undefined);
  let out = message;
  for (const [from, to] of VALUES) out = out.replace(from, to);
  // A name with a quoted value: options.eviction 'lfu', options.scheduler "xllm", and scheduler 'continuous'
  // (single quotes only without options.: a double-quoted value is the user's own, as in trace "x.jsonl").
  out = out.replace(/(?<![\w.-])(options\.)?([a-z][A-Za-z0-9]*) (['"])([^'"\s]*)\3/g, (whole, o: string | undefined, key: string, q: string, value: string) => {
    const f = flagOf(key);
    return f === undefined || (o === undefined && q === '"') ? whole : `${f} ${value}`;
  });
  // A sweep's configuration, name=value: numBlocks=4096 engines=8 as --num-blocks 4096 --engines 8.
  out = out.replace(/(?<![\w.-])([a-z][A-Za-z0-9]*)=([^\s)]+)/g, (whole, key: string, value: string) => {
    const f = flagOf(key);
    return f === undefined ? whole : `${f} ${value}`;
  });
  out = out.replace(/options\.([a-z][A-Za-z0-9]*)/g, (whole, key: string) => flagOf(key) ?? whole);
  // camelCase names alone (slidingWindow), not a part of a longer name or path (req.hashIds, --x).
  out = out.replace(/(?<![\w.-])([a-z]+[A-Z][A-Za-z0-9]*)\b/g, (whole, key: string) => flagOf(key) ?? whole);
  return out;
}

// What every command does with its options' values, whatever the option:
// a value that is itself a flag is refused, naming both (`--timing
// --scheduler continuous` took "--scheduler" as the file and then found two
// traces); a value outside an option's choices gets a "did you mean"; and
// `--help` prints choices and defaults as a user types them (4, lru), not as
// JavaScript values ([4], "lru", false).

import { InvalidArgumentError, type Command, type Option } from 'commander';
import { didYouMean } from './did-you-mean.js';

/** A value that is a flag: --name or -x (a negative number such as -1 is a value, and so is - for stdin). */
const FLAG = /^--?[A-Za-z]/;

/** Wraps the parser of each of `cmd`'s options that takes a value with the checks above. */
export function guardOptionValues(cmd: Command): void {
  for (const o of cmd.options as Option[]) {
    if (!o.required && !o.optional) continue;
    const inner = o.parseArg;
    const choices = o.argChoices;
    const name = o.long ?? o.short ?? o.flags;
    o.parseArg = <T>(value: string, previous: T): T => {
      if (FLAG.test(value)) throw new InvalidArgumentError(`${name} needs a value, and ${value} is a flag: give the value right after ${name}`);
      if (choices !== undefined && !choices.includes(value)) {
        throw new InvalidArgumentError(`${name} must be one of ${choices.join(', ')}, got ${JSON.stringify(value)}${didYouMean(value, choices)}`);
      }
      return (inner ? inner(value, previous) : value) as T;
    };
  }
}

/** A default or a choice as it is typed: 4 for [4], lru for "lru", 1,4 for [1, 4]. */
function typed(v: unknown): string {
  return Array.isArray(v) ? v.map(typed).join(',') : String(v);
}

/** An option's `--help` description: its choices and default as they are typed, no default for a switch (it is off unless given). */
export function typedOptionDescription(o: Option): string {
  const extra: string[] = [];
  if (o.argChoices) extra.push(`choices: ${o.argChoices.join(', ')}`);
  const isSwitch = !o.required && !o.optional;
  const shown = o.defaultValueDescription ?? (o.defaultValue === undefined || isSwitch ? undefined : typed(o.defaultValue));
  if (shown !== undefined && !isSwitch) extra.push(`default: ${shown}`);
  return extra.length > 0 ? `${o.description} (${extra.join(', ')})` : o.description;
}

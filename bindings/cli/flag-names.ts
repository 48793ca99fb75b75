// The library's errors name an option as the API spells it
// (options.hostBlocks); on the command line the same option is a flag
// (--host-blocks), and the message should say what the user typed.

import type { Command } from 'commander';

/** `message` with each `options.<name>` that a command of `program` takes as a flag written as that flag. */
export function flagNames(program: Command, message: string): string {
  const flags = new Set(program.commands.flatMap((c) => c.options.map((o) => o.long)));
  return message.replace(/options\.([a-z][A-Za-z0-9]*)/g, (whole, key: string) => {
    const flag = `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
    return flags.has(flag) ? flag : whole;
  });
}

// Ctrl-C during a long command whose main thread stays free (a sweep: the
// work is on worker threads): put the progress bar away, say the command
// was interrupted, and exit with 130 (128 + SIGINT), as a shell expects.
// A command that runs in the main thread (replay, fleet) cannot run code on
// a signal until it is done, so it keeps Node's default: the process ends at
// once. No bar changes the terminal's settings (progress-bar.ts), so neither
// way leaves it altered.

/** Runs `fn`; a SIGINT meanwhile calls `cleanup`, writes "kvpool: interrupted" and exits with 130. */
export async function interruptible<T>(cleanup: () => void, fn: () => Promise<T>): Promise<T> {
  const onSigint = () => {
    try {
      cleanup();
    } finally {
      process.stderr.write('\nkvpool: interrupted\n');
      process.exit(130);
    }
  };
  process.once('SIGINT', onSigint);
  try {
    return await fn();
  } finally {
    process.removeListener('SIGINT', onSigint);
  }
}

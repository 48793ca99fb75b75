// How a concurrent manager covers every call of the manager it extends:
// each method and accessor inherited from the base classes is redefined on
// the concurrent class to run under its lock. A method added to a base class
// later is covered without a line of its own.

/** What the wrappers need of a concurrent manager. */
export interface WithLock {
  withLock<T>(fn: () => T): T;
}

/**
 * Redefines on `proto` every method and accessor of its base classes, but
 * those it defines itself and those named in `unlocked` (nothing to protect,
 * they take the lock themselves, or private helpers reached only from a
 * locked method), to run inside `withLock`.
 */
export function lockEveryMethod(proto: WithLock, unlocked: ReadonlySet<string>): void {
  const own = proto as unknown as Record<string, unknown>;
  for (let p = Object.getPrototypeOf(own); p && p !== Object.prototype; p = Object.getPrototypeOf(p)) {
    for (const [name, d] of Object.entries(Object.getOwnPropertyDescriptors(p))) {
      if (name === 'constructor' || unlocked.has(name) || Object.prototype.hasOwnProperty.call(own, name)) continue;
      const wrap = (fn: (...a: unknown[]) => unknown) =>
        function (this: WithLock, ...args: unknown[]) {
          return this.withLock(() => fn.apply(this, args));
        };
      if (typeof d.value === 'function') Object.defineProperty(own, name, { ...d, value: wrap(d.value) });
      else if (d.get) Object.defineProperty(own, name, { ...d, get: wrap(d.get), set: d.set && wrap(d.set) });
    }
  }
}

// The 2-D block table of one sequence on a composite manager (docs/composite.md, tables): one
// table per sub-manager, each in that sub-manager's own id space and block
// size. A sliding-window table keeps the positions that slid out of the
// window as -1 placeholders, always a leading run, so logical positions
// never shift. Tables grow by doubling; reads are views, not copies.

import { checkInt } from '../validate.js';

/** A slid-out position of a sliding-window table. */
export const RELEASED = -1;

export class CompositeBlockTables {
  /** @internal the composite manager that made these tables */
  readonly _owner: object;
  /** @internal one table per sub-manager; entries [0, _lengths[i]) are in use */
  _tables: Int32Array[];
  /** @internal entries per table, placeholders included */
  readonly _lengths: Int32Array;
  /** @internal leading entries that slid out of the window (-1) */
  readonly _released: Int32Array;
  /** Tokens per block of each table. */
  readonly blockSizes: readonly number[];

  /** @internal made by `CompositeBlockManager.newTables()` */
  constructor(owner: object, blockSizes: readonly number[]) {
    this._owner = owner;
    this.blockSizes = blockSizes;
    this._tables = blockSizes.map(() => new Int32Array(8));
    this._lengths = new Int32Array(blockSizes.length);
    this._released = new Int32Array(blockSizes.length);
  }

  /** Number of tables (one per sub-manager). */
  get count(): number {
    return this._tables.length;
  }

  /** Table `i` (a view; valid until the table changes), -1 at slid-out positions. */
  table(i: number): Int32Array {
    this.index(i);
    return this._tables[i]!.subarray(0, this._lengths[i]!);
  }

  /** Every table (views). */
  views(): Int32Array[] {
    return this._tables.map((t, i) => t.subarray(0, this._lengths[i]!));
  }

  /** Logical blocks of table `i`, placeholders included. */
  length(i: number): number {
    this.index(i);
    return this._lengths[i]!;
  }

  /** Leading positions of table `i` that slid out of the window. */
  released(i: number): number {
    this.index(i);
    return this._released[i]!;
  }

  private index(i: number): void {
    checkInt('i', i, 0, this._tables.length - 1);
  }

  /** True when no table holds an id. */
  get empty(): boolean {
    for (let i = 0; i < this._lengths.length; i++) if (this._lengths[i]! > this._released[i]!) return false;
    return true;
  }

  /** @internal room for `n` more entries in table `i` */
  reserve(i: number, n: number): void {
    const t = this._tables[i]!;
    const need = this._lengths[i]! + n;
    if (need <= t.length) return;
    let cap = t.length * 2;
    while (cap < need) cap *= 2;
    const g = new Int32Array(cap);
    g.set(t.subarray(0, this._lengths[i]!));
    this._tables[i] = g;
  }

  /** @internal forgets every entry (the manager released them) */
  clear(): void {
    this._lengths.fill(0);
    this._released.fill(0);
  }

  /** @internal a copy with the same entries (the caller adds the references) */
  clone(): CompositeBlockTables {
    const c = new CompositeBlockTables(this._owner, this.blockSizes);
    c._tables = this._tables.map((t) => t.slice());
    c._lengths.set(this._lengths);
    c._released.set(this._released);
    return c;
  }
}

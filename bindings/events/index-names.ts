// Engine hashes of the bytes form (hex strings: vLLM's bytes hashes are not
// always 16 bytes) as small integer ids, so that the index's slots hold every
// hash as numbers. Counted references: an id lives while something holds it
// (a slot naming it as its hash or its parent's, or an event being applied).

export class HashNames {
  private readonly ids = new Map<string, number>();
  private readonly names: Array<string | undefined> = [];
  private readonly refs: number[] = [];
  private readonly free: number[] = [];

  /** Names held. */
  get size(): number {
    return this.ids.size;
  }

  /** The id of `name` (made if new), with one more reference. */
  acquire(name: string): number {
    let id = this.ids.get(name);
    if (id === undefined) {
      id = this.free.pop() ?? this.names.length;
      this.ids.set(name, id);
      this.names[id] = name;
      this.refs[id] = 0;
    }
    this.refs[id]!++;
    return id;
  }

  /** The id of `name` if something holds it, else -1. */
  known(name: string): number {
    return this.ids.get(name) ?? -1;
  }

  name(id: number): string {
    return this.names[id]!;
  }

  ref(id: number): void {
    this.refs[id]!++;
  }

  release(id: number): void {
    if (--this.refs[id]! > 0) return;
    this.ids.delete(this.names[id]!);
    this.names[id] = undefined;
    this.free.push(id);
  }
}

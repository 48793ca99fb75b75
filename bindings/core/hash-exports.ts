// Raw hash exports of the core (see assembly/hash-exports.ts).
export interface HashExports {}

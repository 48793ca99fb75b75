// Hash exports (XXH3-128 and block chains) -- filled in with xxh3.ts.

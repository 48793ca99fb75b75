// The ABI between the Wasm core and the TypeScript bindings: every number
// both sides must agree on, in one file that both compile. The AssemblyScript
// core imports it (assembly/*.ts: `from "../bindings/core/abi"`) and so do
// the bindings, so a code or an offset cannot differ between the two.
// Only plain numeric constants may live here: AssemblyScript infers them as
// i32 and emits no data for them (a string or an array would become a data
// segment, which the shared-memory build re-applies on every instantiation).
// `abi_check` in assembly/abi-exports.ts verifies at run time what a constant
// cannot pin by itself (the header's field offsets), and a test calls it.

// ---- object headers ----
// Every manager (and linear-state cache) header sits in a fixed-size slot of
// a handle table that is never returned to the general allocator: a stale or
// forged pointer to a slot can only ever reach another header, whose magic
// word and generation then tell it apart.

/** Bytes per header slot. */
export const SLOT_SIZE = 512;
/** Header slots per chunk of the handle table. */
export const SLOTS_PER_CHUNK = 256;
/** Chunks the handle table can have (so at most SLOTS_PER_CHUNK * MAX_CHUNKS live objects). */
export const MAX_CHUNKS = 4096;
/** Offset of the magic word (the object's kind; 0 once destroyed). */
export const HDR_MAGIC = 0;
/** Offset of the generation (unique per object in a memory; 0 once destroyed). */
export const HDR_GEN = 4;
/** Offset of the slot's lock (two i32: owner word, depth); the lock belongs to the slot and survives reuse. */
export const HDR_LOCK = 8;
/** Bytes of the lock. */
export const LOCK_BYTES = 8;
/** Magic of a KV block manager ("kvpM"). */
export const MAGIC_MANAGER = 0x4d70766b;
/** Magic of a linear-state checkpoint cache ("kvpL"). */
export const MAGIC_LINEAR_STATE = 0x4c70766b;
/** Magic of a vLLM block pool ("kvpV"). */
export const MAGIC_VLLM_POOL = 0x5670766b;

// ---- regions ----

/** Alignment of every region. */
export const REGION_ALIGN = 16;
/** Largest region the allocator hands out, in bytes (a request past it is refused, never wrapped). */
export const MAX_REGION_BYTES = 0xfff00000;
/** Wasm pages (64 KiB) of the largest memory: 4 GiB. */
export const MAX_PAGES = 65536;

// ---- errors returned by exports (negative; mgr_error_index names the element) ----

export const ERR_UNSTAMPED_PARENT = -2;
export const ERR_OUT_OF_RANGE = -3;
export const ERR_PADDING = -4;
export const ERR_NOT_HELD = -5;
export const ERR_FREE = -6;
/** Linear-state cache: the slot is not in the state the call needs. */
export const LS_ERR_STATE = -7;
/** An insert needs tokens of a block it was not given (a `known` block without its hash stamped, or events on). */
export const ERR_TOKENS_MISSING = -8;
/** A call that records no events was made on a manager recording them. */
export const ERR_EVENTS_ON = -9;

/** A vLLM pool: a block given twice in one list of hits. */
export const ERR_DUPLICATE = -31;
/** A vLLM pool: a block to cache has a key already. */
export const ERR_CACHED = -32;
/** A vLLM pool: a count past what the call's table holds. */
export const ERR_COUNT = -33;
/** A vLLM pool's allocation that does not fit the free queue (nothing changed): an answer, not an error. */
export const VP_NO_ROOM = -1;

// ---- audit codes (mgr_check, ls_check) ----

export const CHECK_FREE_SIZE = -10;
export const CHECK_FREE_RANGE = -11;
export const CHECK_FREE_TWICE = -12;
export const CHECK_FREE_HELD = -13;
export const CHECK_LOST = -14;
export const CHECK_PADDING = -15;
export const CHECK_USED = -16;
export const CHECK_CACHED = -17;
export const CHECK_TABLE = -18;
export const CHECK_HEADER = -19;
export const CHECK_ORDER = -20;
export const CHECK_ORDER_MEMBERS = -21;
export const CHECK_FUTURE = -22;
export const CHECK_NO_CACHE = -23;
export const CHECK_TOLD = -24;
export const CHECK_RETENTION = -25;
export const CHECK_SLOT_STATE = -30;
/** A vLLM pool's free queue: broken links, or not the length counted. */
export const CHECK_QUEUE = -34;
/** A vLLM pool: a block with no reference outside the queue, or one with references in it. */
export const CHECK_QUEUE_MEMBERS = -35;
/** A vLLM pool: blocks of one key that do not chain, or a key's oldest block not where the table says. */
export const CHECK_KEYS = -36;
/** A vLLM pool: a block's references are not the holders the caller counted. */
export const CHECK_HOLDERS = -37;

// ---- per-id flag bits ----

export const FLAG_CACHED = 1;
export const FLAG_STAMPED = 2;
/** In the recency ring (its newest entry for the id is live). */
export const FLAG_LINKED = 4;
/** Announced in a stored event. */
export const FLAG_TOLD = 8;
/** A linear-state slot held live by a sequence. */
export const FLAG_LIVE = 16;
/** A linear-state slot reserved for a checkpoint. */
export const FLAG_PENDING = 32;
/** In the side heap. */
export const FLAG_IN_HEAP = 64;
/** Set and cleared within one audit. */
export const FLAG_AUDIT_MARK = 0x80;

// ---- a manager's per-id record (META_SIZE bytes per id) ----
// The fields an operation reads together sit together: eviction reads an
// entry's references, stamp and fingerprint, an insert writes its key and
// fingerprint next to the references it takes, and in one record they are
// one cache line and one page where five arrays made five (a host tier's
// hundreds of thousands of ids are megabytes; each access lands at random,
// and on this machine its page lookup costs as much as its cache miss).

/** Bytes per id (a power of two: 1 << META_SHIFT). */
export const META_SIZE = 32;
export const META_SHIFT = 5;
/** i32: every reference, the cache's included. */
export const META_REFS = 0;
/** u32: recency of a cached entry. */
export const META_STAMP = 4;
/** u32: a cached entry's table fingerprint. */
export const META_FP = 8;
/** i32: index + 1 in the side heap, 0 when absent. */
export const META_HEAP_POS = 12;
/** 16 bytes: the chain hash stamped on the block (caching on only). */
export const META_HASH = 16;

// ---- the priority policy's per-id fields (AUX_SIZE bytes per id) ----

export const AUX_SIZE = 16;
/** f64: when a priority's retention ends. */
export const AUX_EXPIRY = 0;
/** i32: index + 1 in the expiry heap, 0 when absent. */
export const AUX_EXP_POS = 8;

// ---- eviction policies ----

export const POLICY_LRU = 0;
export const POLICY_LFU = 1;
export const POLICY_PRIORITY = 2;

// ---- match flags ----

/** Re-append the hits now. */
export const MATCH_TOUCH = 1;
/** Count this call in the statistics. */
export const MATCH_COUNT = 2;

// ---- mgr_stats: f64 counters, in this order ----

export const STAT_FREE = 0;
export const STAT_USED = 1;
export const STAT_CACHED = 2;
export const STAT_TOTAL = 3;
export const STAT_EVICTABLE = 4;
export const STAT_MATCH_CALLS = 5;
export const STAT_BLOCKS_QUERIED = 6;
export const STAT_BLOCKS_HIT = 7;
export const STAT_BLOCKS_INSERTED = 8;
export const STAT_BLOCKS_EVICTED = 9;
export const STAT_BLOCKS_ALLOCATED = 10;
export const STAT_ALLOCATION_FAILURES = 11;
export const STAT_PEAK_USED = 12;
export const STAT_COUNT = 13;

// ---- vp_stats: f64 figures of a vLLM pool, in this order ----

/** Free-queue length. */
export const VP_STAT_FREE = 0;
/** Blocks with a key (cached), held or not. */
export const VP_STAT_CACHED = 1;
/** Distinct keys. */
export const VP_STAT_KEYS = 2;
/** Ids popped from the queue. */
export const VP_STAT_ALLOCATED = 3;
/** Keys dropped when their block was popped. */
export const VP_STAT_EVICTED = 4;
/** Blocks cached. */
export const VP_STAT_STORED = 5;
/** h = (h * 31 + id) mod 2^32 over the ids popped. */
export const VP_STAT_CHECKSUM = 6;
/** Free blocks without a key. */
export const VP_STAT_FREE_UNCACHED = 7;
export const VP_STAT_COUNT = 8;

/** Bytes of a vLLM pool's eviction record: block id (i32), 12 bytes unused, its key (16 bytes). */
export const VP_EVENT_SIZE = 32;
export const VP_EVENT_KEY = 16;

// ---- KV-cache event records ----
// A record: kind, block id, parent kind, token count (i32 each), the block's
// hash (16 bytes), its parent's (16 bytes, EV_PARENT_NONE: zeros), then the
// tokens (stored records only).

export const EV_STORED = 1;
export const EV_REMOVED = 2;
export const EV_CLEARED = 3;
/** Bytes of a record before its tokens (stored events only carry tokens). */
export const EV_HEADER = 48;
export const EV_KIND = 0;
export const EV_BLOCK_ID = 4;
export const EV_PARENT = 8;
export const EV_NUM_TOKENS = 12;
export const EV_HASH = 16;
export const EV_PARENT_HASH = 32;
/** The block starts its sequence (block 0) and hashes its tokens alone. */
export const EV_PARENT_NONE = 0;
/** The parent hash is the previous block's chain hash. */
export const EV_PARENT_CHAIN = 1;
/** The block starts a salted sequence: the parent hash is the salt's digest. */
export const EV_PARENT_SALT = 2;
/**
 * `parentId` of an insert whose `parentPtr` is a cache salt's digest: the
 * chain starts at block 0 of a salted sequence (hashing is the same as for
 * parentId 0; events say the block has no parent but a salt).
 */
export const PARENT_SALT_ROOT = -1;
/** Bytes per id of the record of what announced it (parent kind i32, parent hash 16, then the tokens): snapshots read it. */
export const EV_MIRROR_HEADER = 20;

// ---- linear-state slot states (ls_state) ----

export const SLOT_FREE = 0;
export const SLOT_LIVE = 1;
export const SLOT_PENDING = 2;
export const SLOT_COMMITTED = 3;

// ---- staging ----

/** Bytes kept writable in front of every staging area (a parent hash goes right before a block's tokens). */
export const STAGING_HEADROOM = 16;

// The replay modes the benchmarks compare (replay() options; the CLI's
// flags in the comments), shared by bench:replays and bench:instructions.

/** The modes of the replay (replay() options; the CLI's --flags in the comments). */
export const REPLAY_MODES: Readonly<Record<string, Record<string, unknown>>> = {
  plain: {},
  'sliding-window': { slidingWindow: 4096 }, // --sliding-window 4096
  lfu: { eviction: 'lfu' }, // --eviction lfu
  priority: { eviction: 'priority' }, // --eviction priority
  'host-tier': { hostBlocks: 262144 }, // --host-blocks 262144
  'host-store': { hostBlocks: 262144, storeBlocks: 100000 }, // --host-blocks 262144 --store-blocks 100000
  'linear-state': { linearStateSlots: 256 }, // --linear-state-slots 256
  '16k-publish': { numBlocks: 16384, publishAfterPrefill: true }, // --num-blocks 16384 --publish-after-prefill
  '262k': { numBlocks: 262144 }, // --num-blocks 262144
};

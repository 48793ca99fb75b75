// The Wasm core compiled to C by wasm2c, run natively (bench/native.ts builds
// and runs it). Two measurements, each printed as one JSON line:
//
// - the replay's core cycle of bench/builds.ts through the same exports:
//   allocate K blocks (evicting K), insert K fresh blocks, release them; ns
//   per block of each phase, the median of the timed rounds;
// - per-block XXH3: the chained hash of NB blocks of B int32 tokens
//   (hash_blocks: each block XXH3-128 of the parent's 16 bytes ++ its 64
//   bytes), through the wasm2c'd export and, with -DWITH_XXHASH, the xxHash
//   C library's XXH3_128bits_withSeed on the same bytes (checked equal).
//
// usage: core-cycle <N> <K> <ROUNDS> <NB> <HASH_ROUNDS>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvpool.h"

#ifdef WITH_XXHASH
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

#define B 16

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

static double median(double* xs, int n) {
  qsort(xs, (size_t)n, sizeof(double), cmp);
  return xs[n >> 1];
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s N K ROUNDS NB HASH_ROUNDS\n", argv[0]);
    return 2;
  }
  const u32 N = (u32)atoi(argv[1]);
  const u32 K = (u32)atoi(argv[2]);
  const int ROUNDS = atoi(argv[3]);
  const u32 NB = (u32)atoi(argv[4]);
  const int HASH_ROUNDS = atoi(argv[5]);
  const int WARMUP = ROUNDS / 4 < 200 ? ROUNDS / 4 : 200;

  wasm_rt_init();
  w2c_kvpool core;
  wasm2c_kvpool_instantiate(&core);
  wasm_rt_memory_t* mem = w2c_kvpool_memory(&core);

  // ---- the core cycle ----
  const u32 m = w2c_kvpool_mgr_create(&core, N, B, 1, 1024, 0);
  if (m == 0) {
    fprintf(stderr, "could not create a manager of %u blocks\n", N);
    return 1;
  }
  const u32 tokens = w2c_kvpool_alloc(&core, 16 + K * B * 4) + 16;
  const u32 ids = w2c_kvpool_alloc(&core, K * 4);
  int32_t next = 1;
  const int timed = ROUNDS - WARMUP;
  double* ms[3];
  for (int p = 0; p < 3; p++) ms[p] = malloc(sizeof(double) * (size_t)(timed > 0 ? timed : 1));
  for (int r = 0; r < ROUNDS; r++) {
    // The memory may grow (and move) during a call: its base is read again each round.
    int32_t* tok = (int32_t*)(mem->data + tokens);
    for (u32 i = 0; i < K * B; i++) tok[i] = next++;
    const double t0 = now_ns();
    if (w2c_kvpool_mgr_allocate(&core, m, K, ids) != K) return fprintf(stderr, "allocate failed\n"), 1;
    const double t1 = now_ns();
    if ((int32_t)w2c_kvpool_mgr_insert(&core, m, tokens, ids, K, 0, 0, 0, 0) < 0) return fprintf(stderr, "insert failed\n"), 1;
    const double t2 = now_ns();
    if (w2c_kvpool_mgr_release(&core, m, ids, K) != 0) return fprintf(stderr, "release failed\n"), 1;
    const double t3 = now_ns();
    if (r >= WARMUP) {
      ms[0][r - WARMUP] = t1 - t0;
      ms[1][r - WARMUP] = t2 - t1;
      ms[2][r - WARMUP] = t3 - t2;
    }
  }
  printf("{\"what\":\"cycle\",\"allocate\":%.2f,\"insert\":%.2f,\"release\":%.2f}\n", median(ms[0], timed) / K,
         median(ms[1], timed) / K, median(ms[2], timed) / K);

  // ---- per-block XXH3 ----
  const u32 htok = w2c_kvpool_alloc(&core, 16 + NB * B * 4) + 16;
  const u32 hout = w2c_kvpool_alloc(&core, NB * 16);
  {
    int32_t* tok = (int32_t*)(mem->data + htok);
    for (u32 i = 0; i < NB * B; i++) tok[i] = (int32_t)(i * 2654435761u);
  }
  double* hs = malloc(sizeof(double) * (size_t)HASH_ROUNDS);
  for (int r = 0; r < HASH_ROUNDS; r++) {
    const double t0 = now_ns();
    w2c_kvpool_hash_blocks(&core, htok, NB * B, B, 1024, 0, hout);
    hs[r] = (now_ns() - t0) / NB;
  }
  printf("{\"what\":\"hash\",\"wasm2c\":%.2f}\n", median(hs, HASH_ROUNDS));

#ifdef WITH_XXHASH
  // The same chain through the library: block 0 alone, block b on block b - 1's hash.
  uint8_t* buf = malloc(16 + (size_t)NB * B * 4);
  memcpy(buf + 16, mem->data + htok, (size_t)NB * B * 4);
  uint8_t* out = malloc((size_t)NB * 16);
  int same = 1;
  for (int r = 0; r < HASH_ROUNDS; r++) {
    const double t0 = now_ns();
    XXH128_hash_t h = XXH3_128bits_withSeed(buf + 16, B * 4, 1024);
    memcpy(out, &h.low64, 8);
    memcpy(out + 8, &h.high64, 8);
    for (u32 b = 1; b < NB; b++) {
      uint8_t* head = buf + 16 + (size_t)b * B * 4 - 16;
      uint8_t saved[16];
      memcpy(saved, head, 16);
      memcpy(head, out + (size_t)(b - 1) * 16, 16);
      h = XXH3_128bits_withSeed(head, 16 + B * 4, 1024);
      memcpy(head, saved, 16);
      memcpy(out + (size_t)b * 16, &h.low64, 8);
      memcpy(out + (size_t)b * 16 + 8, &h.high64, 8);
    }
    hs[r] = (now_ns() - t0) / NB;
  }
  same = memcmp(out, mem->data + hout, (size_t)NB * 16) == 0;
  printf("{\"what\":\"xxhash\",\"library\":%.2f,\"same\":%s}\n", median(hs, HASH_ROUNDS), same ? "true" : "false");
#endif

  wasm2c_kvpool_free(&core);
  wasm_rt_free();
  return 0;
}

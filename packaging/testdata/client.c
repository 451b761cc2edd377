/* A program outside the source tree: it includes the installed header as
 * <quickreduce/quickreduce.h>, links the installed library, and all-reduces
 * on the host backend through whatever broker QR_BROKER_SOCKET names.
 *   client GROUP RANK    (world size 2; exit 0 when the sums are exact) */
#include <quickreduce/quickreduce.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kCount = 4096 };

/* fp16 bits of an integer in [1, 1024] (exact). */
static uint16_t fp16_from_int(int v) {
  int e = 0;
  while ((v >> e) > 1) ++e;
  return (uint16_t)(((e + 15) << 10) | (((unsigned)v << (10 - e)) & 0x3ff));
}

int main(int argc, char** argv) {
  static uint16_t in[kCount], out[kCount];
  qr_join_options o;
  qr_comm* c = NULL;
  int rank, i, bad = 0;
  if (argc != 3) {
    fprintf(stderr, "usage: %s GROUP RANK\n", argv[0]);
    return 2;
  }
  rank = atoi(argv[2]);
  for (i = 0; i < kCount; ++i) in[i] = fp16_from_int((i % 8) + 1 + rank);
  memset(&o, 0, sizeof o);
  o.group = argv[1];
  o.rank = rank;
  o.world_size = 2;
  o.device = QR_DEVICE_HOST;
  o.timeout_ms = 30000;
  if (qr_join(&o, &c) != QR_OK) {
    fprintf(stderr, "rank %d: join: %s\n", rank, qr_last_error());
    return 1;
  }
  if (qr_all_reduce_ex(c, in, out, kCount, QR_FLOAT16, QR_REGIME_FP, 0, NULL) != QR_OK) {
    fprintf(stderr, "rank %d: all_reduce: %s\n", rank, qr_last_error());
    qr_leave(c);
    return 1;
  }
  /* rank 0 holds v, rank 1 v + 1: the sum is 2v + 1. */
  for (i = 0; i < kCount; ++i) bad += out[i] != fp16_from_int(2 * ((i % 8) + 1) + 1);
  qr_leave(c);
  if (bad) {
    fprintf(stderr, "rank %d: %d wrong sums\n", rank, bad);
    return 1;
  }
  printf("rank %d: %d sums exact (quickreduce %s)\n", rank, kCount, qr_version());
  return 0;
}

/* One rank's loop of qr_all_reduce_ex calls, timed in C: the baseline for the
 * Python layer's per-call overhead (python/bench/overhead.py starts one per
 * rank). Host buffers for the host backend; device buffers from the CUDA
 * driver API (loaded at run time, so this builds and runs without CUDA) for
 * a GPU. Prints one line: "c_loop <mean us per call>".
 *   qr_call_loop <group> <rank> <world size> <device|-1> <bytes> <regime 0..4> <iters>
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm/quickreduce.h"

typedef int (*CuInit)(unsigned);
typedef int (*CuDeviceGet)(int*, int);
typedef int (*CuPrimaryCtxRetain)(void**, int);
typedef int (*CuCtxSetCurrent)(void*);
typedef int (*CuMemAlloc)(unsigned long long*, size_t);
typedef int (*CuCtxSynchronize)(void);

static CuCtxSynchronize ctx_sync;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int die(const char* what) {
  fprintf(stderr, "qr_call_loop: %s: %s\n", what, qr_last_error());
  return 1;
}

/* Device buffers through the driver API; the library's static cudart uses the
 * same primary context. */
static int device_buffers(int device, size_t bytes, void** in, void** out) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW);
  if (h == NULL) return fprintf(stderr, "qr_call_loop: no libcuda.so.1\n"), 1;
  CuInit init = (CuInit)dlsym(h, "cuInit");
  CuDeviceGet get = (CuDeviceGet)dlsym(h, "cuDeviceGet");
  CuPrimaryCtxRetain retain = (CuPrimaryCtxRetain)dlsym(h, "cuDevicePrimaryCtxRetain");
  CuCtxSetCurrent set = (CuCtxSetCurrent)dlsym(h, "cuCtxSetCurrent");
  CuMemAlloc alloc = (CuMemAlloc)dlsym(h, "cuMemAlloc_v2");
  ctx_sync = (CuCtxSynchronize)dlsym(h, "cuCtxSynchronize");
  int dev = 0;
  void* ctx = NULL;
  unsigned long long a = 0, b = 0;
  if (!init || !get || !retain || !set || !alloc || !ctx_sync || init(0) || get(&dev, device) ||
      retain(&ctx, dev) || set(ctx) || alloc(&a, bytes) || alloc(&b, bytes)) {
    return fprintf(stderr, "qr_call_loop: CUDA driver setup failed\n"), 1;
  }
  *in = (void*)(uintptr_t)a;
  *out = (void*)(uintptr_t)b;
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 8) {
    fprintf(stderr, "usage: %s group rank world_size device bytes regime iters\n", argv[0]);
    return 2;
  }
  qr_join_options o;
  memset(&o, 0, sizeof(o));
  o.group = argv[1];
  o.rank = atoi(argv[2]);
  o.world_size = atoi(argv[3]);
  o.device = atoi(argv[4]);
  const size_t bytes = strtoull(argv[5], NULL, 10);
  const qr_regime regime = (qr_regime)atoi(argv[6]);
  const int iters = atoi(argv[7]);
  void *in = NULL, *out = NULL;
  /* bytes == 0 times the call itself (a no-op after the argument checks). */
  const size_t alloc = bytes < 64 ? 64 : (bytes + 63) / 64 * 64;
  if (o.device == QR_DEVICE_HOST) {
    in = aligned_alloc(64, alloc);
    out = aligned_alloc(64, alloc);
    if (in == NULL || out == NULL) return 1;
    memset(in, 0, alloc);
  } else if (device_buffers(o.device, alloc, &in, &out)) {
    return 1;
  }
  qr_comm* c = NULL;
  if (qr_join(&o, &c) != QR_OK) return die("qr_join");
  for (int i = 0; i < 20; ++i) {
    if (qr_all_reduce_ex(c, in, out, bytes / 2, QR_FLOAT16, regime, 0, NULL) != QR_OK) {
      return die("warm-up");
    }
  }
  if (ctx_sync) ctx_sync();
  const double t0 = now_us();
  for (int i = 0; i < iters; ++i) {
    if (qr_all_reduce_ex(c, in, out, bytes / 2, QR_FLOAT16, regime, 0, NULL) != QR_OK) {
      return die("qr_all_reduce_ex");
    }
  }
  if (ctx_sync) ctx_sync();
  const double t1 = now_us();
  printf("c_loop %.3f\n", (t1 - t0) / iters);
  if (qr_leave(c) != QR_OK) return die("qr_leave");
  return 0;
}

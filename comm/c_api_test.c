/* The C ABI used from plain C (compiled as C99, linked against
 * libquickreduce.so): argument errors come back as codes with
 * qr_last_error() text, and a two-process group on the host backend
 * all-reduces exactly. argv[1] is the qr-broker binary; the test runs its own
 * broker on a private socket and stops it at the end. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "comm/quickreduce.h"

static int failures = 0;

#define EXPECT(cond)                                                                      \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      fprintf(stderr, "%s:%d: expected %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              qr_last_error());                                                           \
      ++failures;                                                                         \
    }                                                                                     \
  } while (0)

static int contains(const char* hay, const char* needle) { return strstr(hay, needle) != NULL; }

/* fp16 bit patterns of small integers are exact, so sums are exact. */
static uint16_t fp16_from_int(int v) {
  /* v in [0, 1024]: normal numbers, exponent from the highest bit. */
  int e = 0;
  if (v == 0) return 0;
  while ((v >> e) > 1) ++e;
  return (uint16_t)(((e + 15) << 10) | (((unsigned)v << (10 - e)) & 0x3ff));
}

static int run_rank(const char* group, int rank) {
  qr_join_options o;
  qr_comm* c = NULL;
  enum { kCount = 4096 };
  static uint16_t in[kCount], out[kCount];
  int i;
  memset(&o, 0, sizeof o);
  o.group = group;
  o.rank = rank;
  o.world_size = 2;
  o.device = QR_DEVICE_HOST;
  o.timeout_ms = 30000;
  if (qr_join(&o, &c) != QR_OK) {
    fprintf(stderr, "rank %d: join: %s\n", rank, qr_last_error());
    return 2;
  }
  EXPECT(qr_comm_rank(c) == rank);
  EXPECT(qr_comm_world_size(c) == 2);
  EXPECT(qr_check(c) == QR_OK);
  for (i = 0; i < kCount; ++i) in[i] = fp16_from_int((i % 100) + rank * 7);
  EXPECT(qr_all_reduce_ex(c, in, out, kCount, QR_FLOAT16, QR_REGIME_FP, 0, NULL) == QR_OK);
  for (i = 0; i < kCount; ++i) {
    if (out[i] != fp16_from_int(2 * (i % 100) + 7)) {
      fprintf(stderr, "rank %d: out[%d] = 0x%04x, want 0x%04x\n", rank, i, out[i],
              fp16_from_int(2 * (i % 100) + 7));
      ++failures;
      break;
    }
  }
  /* In place. */
  EXPECT(qr_all_reduce_ex(c, out, out, kCount, QR_FLOAT16, QR_REGIME_FP, 0, NULL) == QR_OK);
  EXPECT(out[5] == fp16_from_int(2 * (2 * 5 + 7)));
  /* Argument errors never touch the group. */
  EXPECT(qr_all_reduce_ex(c, NULL, out, kCount, QR_FLOAT16, QR_REGIME_FP, 0, NULL) ==
         QR_INVALID_ARGUMENT);
  EXPECT(contains(qr_last_error(), "NULL"));
  EXPECT(qr_all_reduce_ex(c, in, out, 7, QR_FLOAT16, QR_REGIME_FP, 0, NULL) == QR_INVALID_ARGUMENT);
  EXPECT(contains(qr_last_error(), "16 bytes"));
  EXPECT(qr_all_reduce_ex(c, in, out, kCount, (qr_dtype)7, QR_REGIME_FP, 0, NULL) ==
         QR_INVALID_ARGUMENT);
  EXPECT(contains(qr_last_error(), "dtype"));
  EXPECT(qr_all_reduce_ex(c, in, out, kCount, QR_FLOAT16, QR_REGIME_NONE, 0, NULL) ==
         QR_UNSUPPORTED);
  EXPECT(qr_all_reduce_ex(c, in, out, kCount, QR_FLOAT16, (qr_regime)9, 0, NULL) ==
         QR_INVALID_ARGUMENT);
  EXPECT(qr_all_reduce_ex(c, in, out, 0, QR_FLOAT16, QR_REGIME_FP, 0, NULL) == QR_OK);
  /* Misaligned (a view at element 1) or partially overlapping pointers. */
  EXPECT(qr_all_reduce_ex(c, in + 1, out, 64, QR_FLOAT16, QR_REGIME_FP, 0, NULL) ==
         QR_INVALID_ARGUMENT);
  EXPECT(contains(qr_last_error(), "not 16-byte aligned"));
  {
    char address[32];
    snprintf(address, sizeof address, "in (%p)", (void*)(in + 1));
    EXPECT(contains(qr_last_error(), address));
  }
  EXPECT(qr_all_reduce(c, in, out + 4, 64, QR_BFLOAT16, NULL) == QR_INVALID_ARGUMENT);
  EXPECT(contains(qr_last_error(), "out ("));
  EXPECT(qr_all_reduce_ex(c, out, out + 8, 64, QR_FLOAT16, QR_REGIME_FP, 0, NULL) ==
         QR_INVALID_ARGUMENT);
  EXPECT(contains(qr_last_error(), "overlap without being equal"));
  EXPECT(qr_check(c) == QR_OK);
  EXPECT(qr_should_all_reduce(c, 15, QR_FLOAT16) == 0);
  /* Nothing set (main clears the QR_* policy variables): the configured
   * regime is FP with no floor on the host backend, so small calls are taken
   * and qr_all_reduce runs them exactly. */
  EXPECT(qr_should_all_reduce(c, 16384, QR_FLOAT16) == 1);
  EXPECT(qr_should_all_reduce(c, 16384, QR_BFLOAT16) == 1);
  for (i = 0; i < kCount; ++i) in[i] = fp16_from_int(i % 50 + rank);
  EXPECT(qr_all_reduce(c, in, out, 8192 / 2, QR_FLOAT16, NULL) == QR_OK);
  EXPECT(out[9] == fp16_from_int(2 * 9 + 1));
  EXPECT(out[4095] == fp16_from_int(2 * (4095 % 50) + 1));
  /* The fused call with the FP8 output: the reference's bytes (both ranks'
   * inputs are known here), and NULL FP8 buffers refused. */
  {
    enum { kTokens = 4, kHidden = 64, kN = kTokens * kHidden };
    static uint16_t x[2][kN], res[kN], w[kHidden], ro[kN], no[kN], want_ro[kN], want_no[kN];
    static uint8_t q[kN], want_q[kN];
    const void* inputs[2] = {x[0], x[1]};
    const float scale = 0.125f;
    int r;
    for (r = 0; r < 2; ++r) {
      for (i = 0; i < kN; ++i) x[r][i] = fp16_from_int((i * 7 + r * 3) % 40);
    }
    for (i = 0; i < kN; ++i) res[i] = fp16_from_int(i % 9);
    for (i = 0; i < kHidden; ++i) w[i] = fp16_from_int(1 + i % 3);
    EXPECT(qr_all_reduce_residual_rmsnorm_fp8(c, x[rank], res, w, ro, no, q, &scale, kTokens,
                                              kHidden, 1e-5f, QR_FLOAT16, QR_REGIME_FP, 0,
                                              NULL) == QR_OK);
    EXPECT(qr_reference_all_reduce_residual_rmsnorm_fp8(inputs, 2, res, w, kTokens, kHidden, 1e-5f,
                                                        &scale, QR_FLOAT16, QR_REGIME_FP, 0,
                                                        want_ro, want_no, want_q) == QR_OK);
    EXPECT(memcmp(ro, want_ro, sizeof ro) == 0);
    EXPECT(memcmp(no, want_no, sizeof no) == 0);
    EXPECT(memcmp(q, want_q, sizeof q) == 0);
    /* Norms of 1..3 times 8 (1 / scale) are normal e4m3 values: not all zero. */
    EXPECT(want_q[5] != 0 && want_q[5] != 0x7E);
    EXPECT(qr_all_reduce_residual_rmsnorm_fp8(c, x[rank], res, w, ro, no, q, NULL, kTokens, kHidden,
                                              1e-5f, QR_FLOAT16, QR_REGIME_FP, 0,
                                              NULL) == QR_INVALID_ARGUMENT);
    EXPECT(contains(qr_last_error(), "quant_out and scale"));
  }
  EXPECT(qr_leave(c) == QR_OK);
  return failures == 0 ? 0 : 1;
}

static pid_t start_broker(const char* binary, const char* socket_path) {
  struct sockaddr_un addr;
  int tries, fd;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execl(binary, binary, "--socket", socket_path, (char*)NULL);
    _exit(127);
  }
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, socket_path, sizeof addr.sun_path - 1);
  for (tries = 0; tries < 1000; ++tries) {
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr*)&addr, sizeof addr) == 0) {
      close(fd);
      return pid;
    }
    if (fd >= 0) close(fd);
    usleep(10000);
  }
  kill(pid, SIGKILL);
  return -1;
}

int main(int argc, char** argv) {
  char group[64], socket_path[108], token[40];
  pid_t pids[2], broker;
  int r, status, rc = 0;
  qr_comm* c = (qr_comm*)&rc;
  qr_join_options o;

  if (argc < 2) {
    fprintf(stderr, "usage: %s <qr-broker>\n", argv[0]);
    return 2;
  }
  /* Sandboxed tests share /tmp and /dev/shm and see the same small pids. */
  {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(token, sizeof token, "%d-%lx", (int)getpid(), (long)ts.tv_nsec);
  }
  snprintf(socket_path, sizeof socket_path, "/tmp/qr-c-api-test-%s.sock", token);
  setenv("QR_BROKER_SOCKET", socket_path, 1);
  setenv("QR_BROKER_AUTOSTART", "0", 1);
  {
    static const char* const kPolicyVars[] = {
        "QR_QUANTIZATION", "VLLM_ROCM_QUICK_REDUCE_QUANTIZATION", "QR_MIN_SIZE_BYTES_MB",
        "VLLM_ROCM_QUICK_REDUCE_MIN_SIZE_BYTES_MB", "QR_MIN_SIZE_TABLE"};
    size_t v;
    for (v = 0; v < sizeof kPolicyVars / sizeof kPolicyVars[0]; ++v) unsetenv(kPolicyVars[v]);
  }

  /* Process-independent checks first. */
  EXPECT(strcmp(qr_status_name(QR_OK), "QR_OK") == 0);
  EXPECT(strcmp(qr_status_name(QR_PEER_FAILED), "QR_PEER_FAILED") == 0);
  EXPECT(strcmp(qr_status_name((qr_status)42), "QR_UNKNOWN") == 0);
  EXPECT(qr_join(NULL, &c) == QR_INVALID_ARGUMENT);
  EXPECT(c == NULL);
  EXPECT(contains(qr_last_error(), "opts"));
  memset(&o, 0, sizeof o);
  o.group = "c-api";
  o.world_size = 3;
  o.device = QR_DEVICE_HOST;
  EXPECT(qr_join(&o, &c) == QR_INVALID_ARGUMENT);
  EXPECT(contains(qr_last_error(), "world"));
  o.world_size = 2;
  o.group = "bad name!";
  EXPECT(qr_join(&o, &c) == QR_INVALID_ARGUMENT);
  EXPECT(qr_check(NULL) == QR_INVALID_ARGUMENT);
  EXPECT(qr_abort(NULL, "x") == QR_INVALID_ARGUMENT);
  EXPECT(qr_leave(NULL) == QR_OK);
  EXPECT(qr_should_all_reduce(NULL, 1 << 20, QR_FLOAT16) == 0);
  EXPECT(qr_comm_rank(NULL) == -1);
  if (failures) return 1;

  broker = start_broker(argv[1], socket_path);
  if (broker < 0) {
    fprintf(stderr, "could not start %s\n", argv[1]);
    return 2;
  }
  snprintf(group, sizeof group, "c-api-%s", token);
  for (r = 0; r < 2; ++r) {
    pids[r] = fork();
    if (pids[r] < 0) return 2;
    if (pids[r] == 0) _exit(run_rank(group, r));
  }
  for (r = 0; r < 2; ++r) {
    if (waitpid(pids[r], &status, 0) != pids[r] || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status 0x%x)\n", r, status);
      rc = 1;
    }
  }
  kill(broker, SIGTERM);
  waitpid(broker, &status, 0);
  unlink(socket_path);
  {
    char lock[128];
    snprintf(lock, sizeof lock, "%s.lock", socket_path);
    unlink(lock);
  }
  if (rc == 0) printf("c_api_test: OK\n");
  return rc;
}

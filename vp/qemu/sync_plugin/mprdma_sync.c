/*
 * mprdma-qemu-sync: a QEMU TCG plugin (plugin API version 1, as Debian's
 * QEMU 7.2 loads) that keeps a guest in lock-step with the SystemC
 * simulator of the NIC.
 *
 *   -icount shift=S,sleep=off
 *   -plugin libmprdma-qemu-sync.so,fd=<socket>,shm=<counter memfd>
 *
 * Both fds are inherited from the simulator, which launches QEMU.
 *
 * It counts guest instructions per translated block (the count is added
 * when a block starts executing), publishes the running count as a u64 at
 * offset 0 of the shared page, and whenever the count reaches the current
 * grant it blocks the vCPU: it sends the count (u64, host byte order) on
 * the socket and waits for the next grant (u64). The simulator answers once
 * SystemC has reached the time of that count (see vp/qemu/qemu_time.h), so
 * the grant is the quantum. The first block blocks at once (grant 0): the
 * guest starts only when the simulator is ready.
 *
 * If the socket closes (the simulator is gone) the plugin stops blocking
 * and says so on QEMU's log; the guest then runs free.
 *
 * Debian installs no qemu-plugin.h, so the few v1 entry points used are
 * declared below from QEMU's plugin documentation (docs/devel/tcg-plugins).
 * One vCPU is assumed (the simulator passes -smp 1 in this mode); with
 * more, a mutex keeps the socket protocol intact but the count is the sum
 * over vCPUs.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- QEMU plugin API, version 1 (the subset used here) ---- */
typedef uint64_t qemu_plugin_id_t;
typedef struct qemu_info_t qemu_info_t; /* not inspected */
struct qemu_plugin_tb;
enum qemu_plugin_cb_flags {
  QEMU_PLUGIN_CB_NO_REGS,
  QEMU_PLUGIN_CB_R_REGS,
  QEMU_PLUGIN_CB_RW_REGS,
};
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_tb_exec_cb(struct qemu_plugin_tb *tb,
                                          qemu_plugin_vcpu_udata_cb_t cb,
                                          enum qemu_plugin_cb_flags flags, void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb,
                                    void *userdata);
void qemu_plugin_outs(const char *string);

#define MPR_EXPORT __attribute__((visibility("default")))

MPR_EXPORT int qemu_plugin_version = 1;

/* ---- state ---- */
static int sync_fd = -1;
static volatile uint64_t *shared_count;
static uint64_t count; /* instructions dispatched so far */
static uint64_t grant; /* block when count reaches this */
static bool detached;
static uint64_t syncs;
static pthread_mutex_t sync_mu = PTHREAD_MUTEX_INITIALIZER;

/* QEMU's plugin log is only shown with -d plugin; stderr reaches the
 * simulator's supervisor (and its exit report) in any case. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  qemu_plugin_outs(buf);
  fputs(buf, stderr);
}

static bool write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= (size_t)w;
  }
  return true;
}

static bool read_all(int fd, void *p, size_t n) {
  char *c = p;
  while (n > 0) {
    ssize_t r = read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= (size_t)r;
  }
  return true;
}

/* Blocks this vCPU until the simulator grants more instructions. */
static void synchronise(uint64_t now) {
  uint64_t next;
  if (!write_all(sync_fd, &now, sizeof now) || !read_all(sync_fd, &next, sizeof next)) {
    detached = true;
    say("mprdma-sync: the simulator closed the socket after %llu syncs; the guest runs free\n",
        (unsigned long long)syncs);
    return;
  }
  ++syncs;
  grant = next;
}

static void on_tb_exec(unsigned int vcpu_index, void *userdata) {
  const uint64_t n = (uint64_t)(uintptr_t)userdata;
  pthread_mutex_lock(&sync_mu);
  count += n;
  __atomic_store_n(shared_count, count, __ATOMIC_RELEASE);
  if (!detached && count >= grant) synchronise(count);
  pthread_mutex_unlock(&sync_mu);
}

static void on_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb) {
  const size_t n = qemu_plugin_tb_n_insns(tb);
  qemu_plugin_register_vcpu_tb_exec_cb(tb, on_tb_exec, QEMU_PLUGIN_CB_NO_REGS,
                                       (void *)(uintptr_t)n);
}

static void on_exit_cb(qemu_plugin_id_t id, void *userdata) {
  say("mprdma-sync: %llu instructions, %llu syncs\n", (unsigned long long)count,
      (unsigned long long)syncs);
  if (sync_fd >= 0) close(sync_fd);
  sync_fd = -1;
}

static bool parse_fd(const char *arg, const char *key, int *out) {
  const size_t k = strlen(key);
  if (strncmp(arg, key, k) != 0 || arg[k] != '=') return false;
  char *end;
  const long v = strtol(arg + k + 1, &end, 10);
  if (*end != '\0' || v < 0 || v > 1 << 20) return false;
  *out = (int)v;
  return true;
}

MPR_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc,
                                   char **argv) {
  int fd = -1, shm = -1;
  for (int i = 0; i < argc; ++i) {
    if (parse_fd(argv[i], "fd", &fd) || parse_fd(argv[i], "shm", &shm)) continue;
    say("mprdma-sync: unknown argument '%s' (expected fd=N,shm=M)\n", argv[i]);
    return -1;
  }
  if (fd < 0 || shm < 0) {
    say("mprdma-sync: needs fd=<socket> and shm=<counter memfd>\n");
    return -1;
  }
  void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, shm, 0);
  if (p == MAP_FAILED) {
    say("mprdma-sync: cannot map the counter (fd %d): %s\n", shm, strerror(errno));
    return -1;
  }
  close(shm); /* the mapping keeps the page */
  shared_count = p;
  sync_fd = fd;
  count = 0;
  grant = 0;
  qemu_plugin_register_vcpu_tb_trans_cb(id, on_tb_trans);
  qemu_plugin_register_atexit_cb(id, on_exit_cb, NULL);
  return 0;
}

/* Lab (built by hand, not by CMake): what cross memory attach costs against
 * memcpy, the floor of the host direct collectives on plain buffers
 * (docs/design.md, "Direct collectives in host mode"). A child process reads
 * its parent's buffer with process_vm_readv in 128 KiB chunks (the library's
 * chunk), and copies a buffer of its own of the same size with memcpy; best
 * of 200 runs each, the extra time of the former spread over its 4 KiB pages.
 *   cc -O2 perf/lab/cma_lab.c -o /tmp/cma_lab && /tmp/cma_lab [KiB ...]   */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static int measure(size_t bytes) {
  const size_t chunk = bytes < (128 << 10) ? bytes : (128 << 10);
  char* theirs = aligned_alloc(4096, bytes);
  memset(theirs, 7, bytes);
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    char* dst = aligned_alloc(4096, bytes);
    char* mine = aligned_alloc(4096, bytes);
    memset(dst, 0, bytes);
    memset(mine, 1, bytes);
    double attach = 1e9, copy = 1e9;
    for (int it = 0; it < 200; ++it) {
      double t0 = now();
      for (size_t at = 0; at < bytes; at += chunk) {
        struct iovec local = {dst + at, chunk}, remote = {theirs + at, chunk};
        if (process_vm_readv(parent, &local, 1, &remote, 1, 0) != (ssize_t)chunk) {
          perror("process_vm_readv");
          _exit(1);
        }
      }
      double t = now() - t0;
      attach = t < attach ? t : attach;
      t0 = now();
      memcpy(dst, mine, bytes);
      t = now() - t0;
      copy = t < copy ? t : copy;
    }
    printf("%8zu KiB: process_vm_readv %6.2f GB/s (%8.1f us), memcpy %6.2f GB/s (%8.1f us): %.3f us more a page\n",
           bytes >> 10, bytes / attach / 1e9, attach * 1e6, bytes / copy / 1e9, copy * 1e6,
           (attach - copy) * 1e6 / (double)(bytes / 4096));
    fflush(stdout);
    _exit(0);
  }
  int status = 1;
  waitpid(child, &status, 0);
  free(theirs);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const size_t kib[] = {256, 1024, 4096, 16384};
  int failed = 0;
  if (argc > 1) {
    for (int i = 1; i < argc; ++i) failed |= measure((size_t)atoi(argv[i]) << 10);
  } else {
    for (size_t i = 0; i < sizeof(kib) / sizeof(kib[0]); ++i) failed |= measure(kib[i] << 10);
  }
  return failed;
}

// The clocks of the floor benches (connect_floor, route_floor), read before
// and after a part: wall time, this process's CPU, the VM's busy time over
// all CPUs (/proc/stat: every process, softirqs and kernel threads) and this
// process's context switches. Header-only: each bench is one binary.
#ifndef USCM_TESTS_VM_BENCH_FLOOR_CLOCKS_H_
#define USCM_TESTS_VM_BENCH_FLOOR_CLOCKS_H_

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

namespace uscm::floor_bench {

struct Clocks {
  double wall_ms, self_cpu_ms, vm_busy_ms;
  long switches;  // voluntary + involuntary, this process's threads
};

// The first line of /proc/stat: all CPUs, in USER_HZ ticks, not idle or iowait.
inline double VmBusyMs() {
  FILE* f = fopen("/proc/stat", "r");
  unsigned long long v[8] = {};
  if (f == nullptr || fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
                             &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) != 8) {
    fprintf(stderr, "floor bench: /proc/stat: unexpected first line: %s\n", strerror(errno));
    exit(1);
  }
  fclose(f);
  const unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
  return 1000.0 * static_cast<double>(busy) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

inline Clocks Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& t) { return t.tv_sec * 1e3 + t.tv_usec / 1e3; };
  return {ts.tv_sec * 1e3 + ts.tv_nsec / 1e6, ms(ru.ru_utime) + ms(ru.ru_stime), VmBusyMs(),
          ru.ru_nvcsw + ru.ru_nivcsw};
}

}  // namespace uscm::floor_bench

#endif  // USCM_TESTS_VM_BENCH_FLOOR_CLOCKS_H_

// Local transport for uscmd (issue 10): the router's Unix SOCK_SEQPACKET
// socket against a single-producer / single-consumer ring in shared memory,
// moving real router frames (cm/router/frame.h: EncodeMad of a 256-byte MAD,
// 8-byte header + 38-byte address + 256 = 302 bytes) between two threads, or
// two processes (fork), in the same run.
//
//   PingPong/<impl>/<mode>  one frame there, the same frame back: real time per
//                           round trip (two one-way crossings, each a copy in
//                           and a copy out).
//   Stream/<impl>/<mode>    one-way: batches of 64 frames, the consumer acks
//                           each batch with one frame and the producer keeps
//                           at most 2 batches in flight: frames/s.
//
//   impl  socket      socketpair(AF_UNIX, SOCK_SEQPACKET), blocking send/recv,
//                     SO_SNDBUF 4 MiB (what cm/router/server.cc sets).
//         ring_spin   memfd + mmap(MAP_SHARED) ring per direction, 256 fixed
//                     slots of 320 bytes, head/tail atomics (acquire/release);
//                     the consumer spins kSpin pause iterations, then sleeps
//                     in FUTEX_WAIT; the producer calls FUTEX_WAKE only when
//                     the consumer said it sleeps (seq_cst flag, Dekker-style
//                     re-check, so no wakeup is lost). A full ring makes the
//                     producer wait the same way.
//         ring_futex  the same ring without the spin (sleep at once).
//   mode  thread | process (the peer is a std::thread or a forked child).
//
//   Inline/<impl>   send and receive one frame in the same thread: the CPU
//                   cost of one crossing without any wakeup.
//   Syscall/getppid a trivial syscall, for this machine's syscall cost.
//
// At the end the binary prints ring/socket ratios from the medians (or the
// single run) of this run. The router itself uses the socket only; the ring
// exists in this file only.
//
//   bazel build -c opt //tests/bench:local_transport_bench
//   bazel-bin/tests/bench/local_transport_bench --benchmark_repetitions=3
//       --benchmark_report_aggregates_only=true   (one command line)
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "benchmark/benchmark.h"
#include "cm/router/frame.h"
#include "mad/transport.h"

namespace uscm::router {
namespace {

constexpr int kBatch = 64;
constexpr int kWindow = 2;  // batches in flight in Stream
constexpr uint32_t kSlots = 256;
constexpr size_t kSlotBytes = 320;  // 4-byte length + 302-byte frame, rounded to 64
constexpr int kSpin = 2000;
constexpr int kSocketBuffer = 4 << 20;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "local_transport_bench: %s: %s\n", what, std::strerror(errno));
  std::abort();
}

// A real MAD frame, as RouterTransport::Send builds it.
std::vector<uint8_t> MakeFrame() {
  std::vector<uint8_t> mad(mad::kMadSize);
  for (size_t i = 0; i < mad.size(); ++i) mad[i] = static_cast<uint8_t>(i * 7 + 1);
  mad::MadAddress a;
  a.lid = 3;
  std::vector<uint8_t> out;
  EncodeMad(a, mad, &out);
  return out;
}

// Frame types used by the benchmark's peer: kMad = data, kReply = ack /
// echo, kRelease = stop.
void SetType(std::vector<uint8_t>& f, FrameType t) { f[3] = static_cast<uint8_t>(t); }

// ---------------------------------------------------------------- socket
class SocketEnd {
 public:
  explicit SocketEnd(int fd) : fd_(fd) {}
  void Send(const uint8_t* p, size_t n) {
    for (;;) {
      if (send(fd_, p, n, MSG_NOSIGNAL) == static_cast<ssize_t>(n)) return;
      if (errno != EINTR) Die("send");
    }
  }
  size_t Recv(uint8_t* p, size_t cap) {
    for (;;) {
      const ssize_t got = recv(fd_, p, cap, 0);
      if (got > 0) return static_cast<size_t>(got);
      if (got < 0 && errno == EINTR) continue;
      Die("recv");
    }
  }

 private:
  int fd_;
};

// ---------------------------------------------------------------- ring
long Futex(std::atomic<uint32_t>* word, int op, uint32_t val) {
  // Not FUTEX_PRIVATE_FLAG: the word lives in a MAP_SHARED mapping that a
  // forked child shares.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, nullptr, nullptr, 0);
}

struct RingCtl {
  alignas(64) std::atomic<uint32_t> head{0};  // written by the producer
  alignas(64) std::atomic<uint32_t> tail{0};  // written by the consumer
  alignas(64) std::atomic<uint32_t> consumer_sleeps{0};
  alignas(64) std::atomic<uint32_t> producer_sleeps{0};
  alignas(64) std::atomic<uint64_t> waits{0};  // FUTEX_WAIT calls (both sides)
  std::atomic<uint64_t> wakes{0};              // FUTEX_WAKE calls
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);
constexpr size_t kCtlBytes = (sizeof(RingCtl) + 63) / 64 * 64;
constexpr size_t kRingBytes = kCtlBytes + kSlots * kSlotBytes;

// Wait until `value` differs from `seen` (spin, then futex on `sleeps`).
uint32_t WaitChange(RingCtl* c, std::atomic<uint32_t>& value, uint32_t seen,
                    std::atomic<uint32_t>& sleeps, int spin) {
  uint32_t v = value.load(std::memory_order_acquire);
  for (int i = 0; v == seen && i < spin; ++i) {
    __builtin_ia32_pause();
    v = value.load(std::memory_order_acquire);
  }
  bool armed = false;
  while (v == seen) {
    armed = true;
    sleeps.store(1, std::memory_order_seq_cst);
    v = value.load(std::memory_order_seq_cst);
    if (v != seen) break;
    c->waits.fetch_add(1, std::memory_order_relaxed);
    Futex(&sleeps, FUTEX_WAIT, 1);  // EAGAIN if already woken, EINTR: re-check
    v = value.load(std::memory_order_acquire);
  }
  if (armed) sleeps.store(0, std::memory_order_relaxed);
  return v;
}

void WakeIfSleeping(RingCtl* c, std::atomic<uint32_t>& sleeps) {
  if (sleeps.load(std::memory_order_seq_cst) != 0 &&
      sleeps.exchange(0, std::memory_order_seq_cst) != 0) {
    c->wakes.fetch_add(1, std::memory_order_relaxed);
    Futex(&sleeps, FUTEX_WAKE, 1);
  }
}

// One direction. The mapping is shared; each side keeps its own cursor.
class RingEnd {
 public:
  RingEnd(uint8_t* base, int spin)
      : c_(reinterpret_cast<RingCtl*>(base)), slots_(base + kCtlBytes), spin_(spin) {}

  void Send(const uint8_t* p, size_t n) {
    const uint32_t h = c_->head.load(std::memory_order_relaxed);
    uint32_t t = c_->tail.load(std::memory_order_acquire);
    while (h - t == kSlots) t = WaitChange(c_, c_->tail, t, c_->producer_sleeps, spin_);
    uint8_t* s = slots_ + (h % kSlots) * kSlotBytes;
    const uint32_t len = static_cast<uint32_t>(n);
    std::memcpy(s, &len, sizeof len);
    std::memcpy(s + sizeof len, p, n);
    c_->head.store(h + 1, std::memory_order_seq_cst);  // release + Dekker with the sleep flag
    WakeIfSleeping(c_, c_->consumer_sleeps);
  }

  size_t Recv(uint8_t* p, size_t cap) {
    const uint32_t t = c_->tail.load(std::memory_order_relaxed);
    uint32_t h = c_->head.load(std::memory_order_acquire);
    if (h == t) h = WaitChange(c_, c_->head, t, c_->consumer_sleeps, spin_);
    const uint8_t* s = slots_ + (t % kSlots) * kSlotBytes;
    uint32_t len = 0;
    std::memcpy(&len, s, sizeof len);
    if (len > cap) std::abort();
    std::memcpy(p, s + sizeof len, len);
    c_->tail.store(t + 1, std::memory_order_seq_cst);
    WakeIfSleeping(c_, c_->producer_sleeps);
    return len;
  }

  RingCtl* ctl() { return c_; }

 private:
  RingCtl* c_;
  uint8_t* slots_;
  int spin_;
};

// Two rings (A -> B, B -> A) in one memfd mapping.
struct RingPair {
  explicit RingPair(int spin) {
    const int fd = static_cast<int>(syscall(SYS_memfd_create, "uscm-ring", 0));
    if (fd < 0) Die("memfd_create");
    if (ftruncate(fd, 2 * kRingBytes) != 0) Die("ftruncate");
    void* p = mmap(nullptr, 2 * kRingBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) Die("mmap");
    close(fd);
    base = static_cast<uint8_t*>(p);
    new (base) RingCtl();
    new (base + kRingBytes) RingCtl();
    a_to_b = std::make_unique<RingEnd>(base, spin);
    b_to_a = std::make_unique<RingEnd>(base + kRingBytes, spin);
  }
  ~RingPair() { munmap(base, 2 * kRingBytes); }
  uint64_t Waits() const { return a_to_b->ctl()->waits + b_to_a->ctl()->waits; }
  uint64_t Wakes() const { return a_to_b->ctl()->wakes + b_to_a->ctl()->wakes; }

  uint8_t* base;
  std::unique_ptr<RingEnd> a_to_b, b_to_a;
};

// ---------------------------------------------------------------- peer
// Echo: every kMad frame goes back. Sink: one kReply per kBatch kMad frames.
// kRelease ends the loop. Every frame is checked (magic, length).
template <typename In, typename Out>
void PeerLoop(In& in, Out& out, bool echo, size_t frame_bytes) {
  std::vector<uint8_t> buf(kMaxFrameBytes);
  std::vector<uint8_t> ack = MakeFrame();
  SetType(ack, FrameType::kReply);
  int got = 0;
  for (;;) {
    const size_t n = in.Recv(buf.data(), buf.size());
    if (n < kFrameHeaderBytes || buf[0] != 0x55 || buf[1] != 0x52) std::abort();
    if (buf[3] == static_cast<uint8_t>(FrameType::kRelease)) return;
    if (n != frame_bytes) std::abort();
    if (echo) {
      out.Send(buf.data(), n);
    } else if (++got == kBatch) {
      got = 0;
      out.Send(ack.data(), ack.size());
    }
  }
}

enum class Mode { kThread, kProcess };

// Runs `peer` on another thread or in a forked child; Join waits for it.
class Peer {
 public:
  template <typename F>
  Peer(Mode mode, F peer) : mode_(mode) {
    if (mode == Mode::kThread) {
      thread_ = std::thread(std::move(peer));
    } else {
      pid_ = fork();
      if (pid_ < 0) Die("fork");
      if (pid_ == 0) {
        peer();
        _exit(0);
      }
    }
  }
  void Join() {
    if (mode_ == Mode::kThread) {
      thread_.join();
    } else {
      int st = 0;
      if (waitpid(pid_, &st, 0) != pid_ || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        std::fprintf(stderr, "local_transport_bench: peer process failed\n");
        std::abort();
      }
    }
  }

 private:
  Mode mode_;
  std::thread thread_;
  pid_t pid_ = -1;
};

// The measurement, the same for both transports: `me` / `them` are the two
// ends as seen by the benchmark thread and by the peer.
template <typename MyIn, typename MyOut, typename PeerIn, typename PeerOut>
void Run(benchmark::State& state, Mode mode, bool ping_pong, MyIn& my_in, MyOut& my_out,
         PeerIn& peer_in, PeerOut& peer_out) {
  std::vector<uint8_t> frame = MakeFrame();
  const size_t frame_bytes = frame.size();
  std::vector<uint8_t> buf(kMaxFrameBytes);
  Peer peer(mode, [&peer_in, &peer_out, ping_pong, frame_bytes] {
    PeerLoop(peer_in, peer_out, ping_pong, frame_bytes);
  });
  int64_t outstanding = 0;
  for (auto _ : state) {
    if (ping_pong) {
      my_out.Send(frame.data(), frame.size());
      if (my_in.Recv(buf.data(), buf.size()) != frame_bytes) std::abort();
    } else {
      for (int i = 0; i < kBatch; ++i) my_out.Send(frame.data(), frame.size());
      if (++outstanding == kWindow) {
        (void)my_in.Recv(buf.data(), buf.size());
        --outstanding;
      }
    }
  }
  while (outstanding-- > 0) (void)my_in.Recv(buf.data(), buf.size());
  std::vector<uint8_t> stop = MakeFrame();
  SetType(stop, FrameType::kRelease);
  my_out.Send(stop.data(), stop.size());
  peer.Join();
  if (ping_pong) {
    state.SetItemsProcessed(state.iterations());  // round trips / s
  } else {
    state.SetItemsProcessed(state.iterations() * kBatch);  // frames / s
  }
  state.SetBytesProcessed(state.items_processed() * static_cast<int64_t>(frame_bytes));
  state.counters["frame_bytes"] = static_cast<double>(frame_bytes);
}

void BM_Socket(benchmark::State& state, Mode mode, bool ping_pong) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) Die("socketpair");
  for (int fd : sv) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kSocketBuffer, sizeof kSocketBuffer);
  SocketEnd me(sv[0]), them(sv[1]);
  Run(state, mode, ping_pong, me, me, them, them);
  close(sv[0]);
  close(sv[1]);
}

void BM_Ring(benchmark::State& state, Mode mode, bool ping_pong, int spin) {
  RingPair rings(spin);
  // Benchmark thread: sends on a_to_b, receives on b_to_a.
  Run(state, mode, ping_pong, *rings.b_to_a, *rings.a_to_b, *rings.a_to_b, *rings.b_to_a);
  const double per = ping_pong ? 2.0 * state.iterations()
                               : static_cast<double>(state.iterations()) * kBatch;
  state.counters["futex_waits_per_frame"] = rings.Waits() / per;
  state.counters["futex_wakes_per_frame"] = rings.Wakes() / per;
}

// One crossing without any scheduling: send and receive in the same thread
// (the CPU cost of the syscalls / atomics and the two copies alone).
template <typename End>
void Inline(benchmark::State& state, End& end) {
  std::vector<uint8_t> frame = MakeFrame();
  std::vector<uint8_t> buf(kMaxFrameBytes);
  for (auto _ : state) {
    end.Send(frame.data(), frame.size());
    if (end.Recv(buf.data(), buf.size()) != frame.size()) std::abort();
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_SocketInline(benchmark::State& state) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) Die("socketpair");
  // Sending on sv[0] and receiving on sv[1] needs two ends: a tiny adapter.
  struct Pair {
    SocketEnd out, in;
    void Send(const uint8_t* p, size_t n) { out.Send(p, n); }
    size_t Recv(uint8_t* p, size_t cap) { return in.Recv(p, cap); }
  } pair{SocketEnd(sv[0]), SocketEnd(sv[1])};
  Inline(state, pair);
  close(sv[0]);
  close(sv[1]);
}

void BM_RingInline(benchmark::State& state) {
  RingPair rings(0);
  Inline(state, *rings.a_to_b);
}

// A trivial syscall, for scale (this box's syscall entry/exit cost).
void BM_Syscall(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(syscall(SYS_getppid));
}

// ---------------------------------------------------------------- ratios
// Keeps the medians (or single runs) by name and prints ring/socket.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  RatioReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_ColorTabular : OO_Tabular) {}
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool aggregate = r.run_type == Run::RT_Aggregate;
      if (aggregate && r.aggregate_name != "median") continue;
      const std::string name = r.run_name.function_name;
      if (!aggregate && seen_median_.count(name)) continue;
      if (aggregate) seen_median_[name] = true;
      ns_[name] = r.GetAdjustedRealTime();  // time unit is ns
    }
  }
  void Ratios() {
    const auto si = ns_.find("Inline/socket");
    const auto ri = ns_.find("Inline/ring");
    if (si != ns_.end() && ri != ns_.end()) {
      std::printf("\none crossing in one thread (no wakeup): socket %.0f ns, ring %.0f ns, "
                  "ring speed / socket %.2fx\n",
                  si->second, ri->second, si->second / ri->second);
    }
    std::printf("\nring vs socket (medians of this run; speed ratio = socket time / ring time):\n");
    std::printf("%-24s %14s %14s %14s\n", "scenario", "socket", "ring_spin", "ring_futex");
    for (const char* test : {"PingPong", "Stream"}) {
      for (const char* mode : {"thread", "process"}) {
        const std::string key = std::string("/") + mode;
        const auto s = ns_.find(std::string(test) + "/socket" + key);
        const auto rs = ns_.find(std::string(test) + "/ring_spin" + key);
        const auto rf = ns_.find(std::string(test) + "/ring_futex" + key);
        if (s == ns_.end() || rs == ns_.end() || rf == ns_.end()) continue;
        const bool pp = std::string(test) == "PingPong";
        // PingPong: ns per round trip. Stream: ns per iteration of kBatch frames.
        const double div = pp ? 1.0 : kBatch;
        const char* unit = pp ? "ns/rt" : "ns/frame";
        std::printf("%-24s %9.0f %-5s %9.0f %-5s %9.0f %-5s\n",
                    (std::string(test) + key).c_str(), s->second / div, unit, rs->second / div,
                    unit, rf->second / div, unit);
        std::printf("%-24s %14s %13.2fx %13.2fx\n", "  ring speed / socket", "1.00x",
                    s->second / rs->second, s->second / rf->second);
      }
    }
  }

 private:
  std::map<std::string, double> ns_;
  std::map<std::string, bool> seen_median_;
};

void Register() {
  benchmark::RegisterBenchmark("Syscall/getppid", BM_Syscall)->Unit(benchmark::kNanosecond);
  benchmark::RegisterBenchmark("Inline/socket", BM_SocketInline)->Unit(benchmark::kNanosecond);
  benchmark::RegisterBenchmark("Inline/ring", BM_RingInline)->Unit(benchmark::kNanosecond);
  for (const bool pp : {true, false}) {
    for (const Mode mode : {Mode::kThread, Mode::kProcess}) {
      const std::string suffix = mode == Mode::kThread ? "/thread" : "/process";
      const std::string test = pp ? "PingPong" : "Stream";
      benchmark::RegisterBenchmark((test + "/socket" + suffix).c_str(),
                                   [mode, pp](benchmark::State& s) { BM_Socket(s, mode, pp); })
          ->UseRealTime()
          ->Unit(benchmark::kNanosecond);
      benchmark::RegisterBenchmark((test + "/ring_spin" + suffix).c_str(),
                                   [mode, pp](benchmark::State& s) { BM_Ring(s, mode, pp, kSpin); })
          ->UseRealTime()
          ->Unit(benchmark::kNanosecond);
      benchmark::RegisterBenchmark((test + "/ring_futex" + suffix).c_str(),
                                   [mode, pp](benchmark::State& s) { BM_Ring(s, mode, pp, 0); })
          ->UseRealTime()
          ->Unit(benchmark::kNanosecond);
    }
  }
}

}  // namespace
}  // namespace uscm::router

int main(int argc, char** argv) {
  const size_t frame_bytes = uscm::router::MakeFrame().size();
  if (frame_bytes + 4 > uscm::router::kSlotBytes) {
    std::fprintf(stderr, "frame of %zu bytes does not fit a ring slot\n", frame_bytes);
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  uscm::router::Register();
  uscm::router::RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.Ratios();
  benchmark::Shutdown();
  return 0;
}

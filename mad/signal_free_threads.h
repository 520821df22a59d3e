// A thread the library starts for itself takes none of the program's
// signals. The kernel hands a process-directed signal (kill(2) of the pid) to
// any thread that does not block it, so a library thread that left a signal
// unblocked took the program's own: tgt's tgtd blocks SIGUSR2 in its threads
// and reads it from a signalfd (its backing-store threads kill(getpid(),
// SIGUSR2) for each finished I/O), and on uscm's drop-in librdmacm the signal
// went to uscm's progress thread instead, whose default action ended tgtd
// (docs/API.md "iSER: tgt and libiscsi"). The kernel's librdmacm starts no
// thread of its own, so a program meets no such thread there.
//
// Usage: construct one around the thread's creation; the new thread inherits
// the calling thread's mask, which is all-blocked for the scope's lifetime
// and the caller's again afterwards.
//
//   { mad::SignalFreeThreads scope; thread_ = std::thread(...); }
#ifndef USCM_MAD_SIGNAL_FREE_THREADS_H_
#define USCM_MAD_SIGNAL_FREE_THREADS_H_

#include <pthread.h>
#include <signal.h>

namespace uscm::mad {

class SignalFreeThreads {
 public:
  SignalFreeThreads() {
    sigset_t all;
    sigfillset(&all);  // glibc leaves its own (cancellation, setxid) out
    pthread_sigmask(SIG_BLOCK, &all, &old_);
  }
  ~SignalFreeThreads() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalFreeThreads(const SignalFreeThreads&) = delete;
  SignalFreeThreads& operator=(const SignalFreeThreads&) = delete;

 private:
  sigset_t old_;
};

}  // namespace uscm::mad

#endif  // USCM_MAD_SIGNAL_FREE_THREADS_H_

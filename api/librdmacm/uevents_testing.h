// The uscm-ports thread's uevent socket (port_resync.h) replaced, for the
// threads started while a TestUevents lives, by one end of a datagram socket
// pair: the test writes the kernel's messages (uevents.h) to the other end.
// The thread's period is an hour meanwhile, so what it does comes from those
// messages, not from its once-a-second listing.
#ifndef USCM_API_LIBRDMACM_UEVENTS_TESTING_H_
#define USCM_API_LIBRDMACM_UEVENTS_TESTING_H_

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "api/librdmacm/port_resync.h"

namespace uscm::librdmacm {

class TestUevents {
 public:
  TestUevents() {
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, pair) != 0) return;
    ThreadEnd() = pair[0];  // closed by the thread when it stops
    ours_ = pair[1];
    SetUeventSourceForTesting(&TakeThreadEnd);
    SetPortResyncPeriodForTesting(3'600'000);
  }
  ~TestUevents() {
    if (ours_ >= 0) close(ours_);
    SetUeventSourceForTesting(nullptr);
    SetPortResyncPeriodForTesting(0);
  }
  TestUevents(const TestUevents&) = delete;
  TestUevents& operator=(const TestUevents&) = delete;

  // False when the socket pair could not be made (errno says why).
  bool ok() const { return ours_ >= 0; }
  // One uevent datagram to the thread; whether it was sent whole.
  bool Send(const std::string& msg) const {
    return send(ours_, msg.data(), msg.size(), 0) == static_cast<ssize_t>(msg.size());
  }

 private:
  static int& ThreadEnd() {
    static int fd = -1;
    return fd;
  }
  static int TakeThreadEnd() { return ThreadEnd(); }

  int ours_ = -1;
};

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_UEVENTS_TESTING_H_

// The rsocket family (<rdma/rsocket.h>) is exported so that programs linked
// against librdmacm load, and every call fails with errno ENOSYS: rsockets
// are not implemented on uscm (issue 13 leaves them out).
#include <errno.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <stdarg.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "api/librdmacm/fail.h"

namespace {

int NoRsockets(const char* call) {
  return uscm::librdmacm::Fail(ENOSYS, call, "rsockets are not implemented on uscm");
}

}  // namespace

extern "C" {

int rsocket(int domain, int type, int protocol) { return NoRsockets("rsocket"); }
int rbind(int socket, const sockaddr* addr, socklen_t addrlen) { return NoRsockets("rbind"); }
int rlisten(int socket, int backlog) { return NoRsockets("rlisten"); }
int raccept(int socket, sockaddr* addr, socklen_t* addrlen) { return NoRsockets("raccept"); }
int rconnect(int socket, const sockaddr* addr, socklen_t addrlen) { return NoRsockets("rconnect"); }
int rshutdown(int socket, int how) { return NoRsockets("rshutdown"); }
int rclose(int socket) { return NoRsockets("rclose"); }

ssize_t rrecv(int socket, void* buf, size_t len, int flags) { return NoRsockets("rrecv"); }
ssize_t rrecvfrom(int socket, void* buf, size_t len, int flags, sockaddr* src_addr,
                  socklen_t* addrlen) {
  return NoRsockets("rrecvfrom");
}
ssize_t rrecvmsg(int socket, msghdr* msg, int flags) { return NoRsockets("rrecvmsg"); }
ssize_t rsend(int socket, const void* buf, size_t len, int flags) { return NoRsockets("rsend"); }
ssize_t rsendto(int socket, const void* buf, size_t len, int flags, const sockaddr* dest_addr,
                socklen_t addrlen) {
  return NoRsockets("rsendto");
}
ssize_t rsendmsg(int socket, const msghdr* msg, int flags) { return NoRsockets("rsendmsg"); }
ssize_t rread(int socket, void* buf, size_t count) { return NoRsockets("rread"); }
ssize_t rreadv(int socket, const iovec* iov, int iovcnt) { return NoRsockets("rreadv"); }
ssize_t rwrite(int socket, const void* buf, size_t count) { return NoRsockets("rwrite"); }
ssize_t rwritev(int socket, const iovec* iov, int iovcnt) { return NoRsockets("rwritev"); }

int rpoll(pollfd* fds, nfds_t nfds, int timeout) { return NoRsockets("rpoll"); }
int rselect(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) {
  return NoRsockets("rselect");
}

int rgetpeername(int socket, sockaddr* addr, socklen_t* addrlen) {
  return NoRsockets("rgetpeername");
}
int rgetsockname(int socket, sockaddr* addr, socklen_t* addrlen) {
  return NoRsockets("rgetsockname");
}
int rsetsockopt(int socket, int level, int optname, const void* optval, socklen_t optlen) {
  return NoRsockets("rsetsockopt");
}
int rgetsockopt(int socket, int level, int optname, void* optval, socklen_t* optlen) {
  return NoRsockets("rgetsockopt");
}
int rfcntl(int socket, int cmd, ...) { return NoRsockets("rfcntl"); }

// riomap's failure value is (off_t)-1 as in rsocket.c; riowrite returns
// size_t, so its failure is (size_t)-1.
off_t riomap(int socket, void* buf, size_t len, int prot, int flags, off_t offset) {
  return NoRsockets("riomap");
}
int riounmap(int socket, void* buf, size_t len) { return NoRsockets("riounmap"); }
size_t riowrite(int socket, const void* buf, size_t count, off_t offset, int flags) {
  return static_cast<size_t>(NoRsockets("riowrite"));
}

}  // extern "C"

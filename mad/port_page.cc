#include "mad/port_page.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace uscm::mad {

static_assert(sizeof(std::atomic<uint8_t>) == 1 && std::atomic<uint8_t>::is_always_lock_free,
              "a port's state is one lock-free byte, shared with another process");

namespace {

absl::StatusOr<uint8_t*> MapFd(int fd, size_t bytes) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("port page: mmap: ", std::strerror(errno)));
  }
  return static_cast<uint8_t*>(p);
}

}  // namespace

PortPage::PortPage(uint8_t* bytes, size_t size, int fd, size_t map_bytes)
    : bytes_(bytes), size_(size), fd_(fd), map_bytes_(map_bytes) {}

PortPage::~PortPage() {
  if (map_bytes_ != 0) {
    munmap(bytes_, map_bytes_);
    close(fd_);
  } else {
    delete[] reinterpret_cast<std::atomic<uint8_t>*>(bytes_);
  }
}

std::atomic<uint8_t>& PortPage::At(size_t i) const {
  return reinterpret_cast<std::atomic<uint8_t>*>(bytes_)[i];
}

absl::StatusOr<std::shared_ptr<PortPage>> PortPage::CreateShared(size_t ports) {
  const int fd = memfd_create("uscm-ports", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("port page: memfd_create: ", std::strerror(errno)));
  }
  // Sealed at its size: a lessee cannot shrink it under uscmd's mapping
  // (a SIGBUS in the root daemon).
  if (ftruncate(fd, static_cast<off_t>(ports)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int e = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("port page: size / seal: ", std::strerror(e)));
  }
  auto bytes = MapFd(fd, ports);
  if (!bytes.ok()) {
    close(fd);
    return bytes.status();
  }
  return std::shared_ptr<PortPage>(new PortPage(*bytes, ports, fd, ports));
}

absl::StatusOr<std::shared_ptr<PortPage>> PortPage::Map(int fd, size_t ports) {
  struct stat st {};
  if (ports == 0 || fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(ports)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "port page: the file passed is ", st.st_size, " bytes; ", ports, " were leased"));
  }
  const int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return absl::InternalError(absl::StrCat("port page: dup: ", std::strerror(errno)));
  auto bytes = MapFd(own, ports);
  if (!bytes.ok()) {
    close(own);
    return bytes.status();
  }
  return std::shared_ptr<PortPage>(new PortPage(*bytes, ports, own, ports));
}

std::shared_ptr<PortPage> PortPage::CreateLocal(size_t ports) {
  auto* a = new std::atomic<uint8_t>[ports];
  for (size_t i = 0; i < ports; ++i) a[i].store(0, std::memory_order_relaxed);
  return std::shared_ptr<PortPage>(
      new PortPage(reinterpret_cast<uint8_t*>(a), ports, /*fd=*/-1, /*map_bytes=*/0));
}

// "32768\t60999"
void ReadLocalPortRange(uint16_t* low, uint16_t* high) {
  FILE* f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
  if (f == nullptr) return;
  unsigned lo = 0, hi = 0;
  if (fscanf(f, "%u %u", &lo, &hi) == 2 && lo >= 1 && lo <= hi && hi <= 65535) {
    *low = static_cast<uint16_t>(lo);
    *high = static_cast<uint16_t>(hi);
  }
  fclose(f);
}

}  // namespace uscm::mad

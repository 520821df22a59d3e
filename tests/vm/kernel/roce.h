// RoCE v2 addressing for uscm on Soft-RoCE (tests/vm): the IPv4-mapped GID of
// an address, its index in the port's GID table, and a Transport wrapper that
// sends every MAD for an IPv4-mapped destination from that GID.
//
// Why the wrapper: the CM endpoint addresses MADs by the path's GIDs and
// leaves MadAddress.sgid_index at 0, which on RoCE is the fe80:: GID. A MAD
// from the fe80 GID to an IPv4-mapped GID mixes address families: ib_umad's
// address resolution refuses it (umad_send EIO), and a kernel rdma_cm
// listener rejects a REQ that reached it over IPv6 (REJ 28). The wrapper also
// reports the IPv4-mapped GID as the port's GID, so ids bound to the IP carry
// it as their local GID.
#ifndef USCM_TESTS_VM_KERNEL_ROCE_H_
#define USCM_TESTS_VM_KERNEL_ROCE_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "mad/gid.h"
#include "mad/transport.h"

namespace uscm::vmtest {

// ::ffff:a.b.c.d for an IPv4 address in host order.
mad::Gid Ipv4MappedGid(uint32_t ip_host_order);
bool IsIpv4Mapped(const mad::Gid& gid);

// Reads /sys/class/infiniband/<ca>/ports/<port>/gids/N and returns the first
// N whose GID equals `gid`. NotFound names the CA, port and GID.
absl::StatusOr<uint8_t> FindGidIndex(const std::string& ca_name, int port_num,
                                     const mad::Gid& gid);

struct RoceCounters {
  uint64_t sent_from_ipv4_gid = 0;  // sgid_index rewritten
  uint64_t sent_other = 0;          // left alone (not IPv4-mapped)
};

class RoceIpv4Transport final : public mad::Transport {
 public:
  // `inner` must outlive this object. `gid` is the local IPv4-mapped GID and
  // `gid_index` its index.
  RoceIpv4Transport(mad::Transport& inner, const mad::Gid& gid, uint8_t gid_index);

  absl::Status Send(const mad::MadAddress& to, std::span<const uint8_t> mad) override;
  size_t Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink,
               size_t max = SIZE_MAX) override {
    return inner_.Drain(sink, max);
  }
  int fd() const override { return inner_.fd(); }
  const mad::TransportCaps& caps() const override { return inner_.caps(); }
  const mad::LocalPort& port() const override { return port_; }

  const RoceCounters& counters() const { return counters_; }

 private:
  mad::Transport& inner_;
  uint8_t gid_index_;
  mad::LocalPort port_;
  RoceCounters counters_;
};

}  // namespace uscm::vmtest

#endif  // USCM_TESTS_VM_KERNEL_ROCE_H_

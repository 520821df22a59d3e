// Port blocks: the ephemeral range leased to clients block by block, so a
// bind to port 0 takes a port from the client's block without a frame to the
// router (docs/ROUTER.md "Port blocks"). The page's state bytes are written
// by the lessee too: the router reads any value but free and taken as
// claimed, so a lessee that writes garbage only keeps its own ports from
// others.
#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "cm/router/listen_address.h"
#include "cm/router/router.h"
#include "mad/status_errno.h"

namespace uscm::router {

namespace {

using State = mad::PortPage::State;

uint64_t ServiceIdOf(uint16_t port_space, uint16_t port) {
  return uint64_t{port_space} << 16 | port;
}

bool Covers(uint64_t service_id, uint64_t mask, uint64_t sid) {
  return ((service_id ^ sid) & mask) == 0;
}

}  // namespace

Router::PortSpaceBlocks& Router::BlocksOf(uint16_t port_space) {
  PortSpaceBlocks& b = blocks_[port_space];
  if (b.blocks.empty()) {
    const size_t range = size_t{options_.ephemeral_high} - options_.ephemeral_low + 1;
    b.blocks.resize((range + options_.lease_ports - 1) / options_.lease_ports);
  }
  return b;
}

size_t Router::blocks_of(uint8_t slot, uint16_t port_space) const {
  auto it = blocks_.find(port_space);
  if (it == blocks_.end()) return 0;
  return static_cast<size_t>(std::count_if(it->second.blocks.begin(), it->second.blocks.end(),
                                           [slot](const Block& b) { return b.slot == slot; }));
}

void Router::HandleLease(uint8_t slot, const LeaseFrame& lease) {
  LeaseReplyFrame reply;
  reply.request = lease.request;
  auto refuse = [&](absl::Status why) {
    ++counters_.leases_refused;
    reply.status = std::move(why);
    sink_(slot, EncodeLeaseReply(reply));
  };
  if (!lease_hooks_.make_page || !lease_hooks_.send) {
    refuse(absl::UnimplementedError("router: this router leases no port blocks"));
    return;
  }
  if (options_.ephemeral_low == 0 || options_.ephemeral_low > options_.ephemeral_high ||
      options_.lease_ports == 0) {
    refuse(absl::UnimplementedError("router: no ephemeral range to lease from"));
    return;
  }
  if (blocks_of(slot, lease.port_space) >= options_.max_blocks_per_client) {
    refuse(mad::WithErrno(absl::ResourceExhaustedError(absl::StrCat(
                              "router: this process holds ", options_.max_blocks_per_client,
                              " blocks of ", options_.lease_ports,
                              " ephemeral ports, the most uscmd leases one process")),
                          ENOMEM));
    return;
  }
  PortSpaceBlocks& psb = BlocksOf(lease.port_space);
  const size_t n = psb.blocks.size();
  size_t index = n;
  for (size_t i = 0; i < n; ++i) {
    const size_t at = (psb.next + i) % n;
    if (psb.blocks[at].slot == 0) {
      index = at;
      break;
    }
  }
  if (index == n) {
    refuse(mad::WithErrno(absl::ResourceExhaustedError(absl::StrCat(
                              "router: every block of ephemeral ports ",
                              options_.ephemeral_low, "..", options_.ephemeral_high,
                              " is leased")),
                          ENOMEM));
    return;
  }
  const uint32_t first = options_.ephemeral_low + index * uint32_t{options_.lease_ports};
  const uint32_t last = std::min<uint32_t>(first + options_.lease_ports - 1,
                                           options_.ephemeral_high);
  const size_t ports = last - first + 1;
  absl::StatusOr<std::shared_ptr<mad::PortPage>> page = lease_hooks_.make_page(ports);
  if (!page.ok()) {
    refuse(page.status());
    return;
  }
  // Ports other clients hold claims on are not the lessee's.
  for (const Claim& c : claims_) {
    if (c.slot == slot) continue;  // its own: its endpoint keeps them apart
    for (size_t i = 0; i < ports; ++i) {
      if (Covers(c.service_id, c.mask,
                 ServiceIdOf(lease.port_space, static_cast<uint16_t>(first + i)))) {
        (*page)->Take(i);
      }
    }
  }
  psb.blocks[index] = Block{slot, *page};
  psb.next = (index + 1) % n;
  ++counters_.leases;
  reply.first_port = static_cast<uint16_t>(first);
  reply.ports = static_cast<uint16_t>(ports);
  lease_hooks_.send(slot, EncodeLeaseReply(reply), *page);
}

std::vector<Router::LeasedPort> Router::LeasedPortsCovered(uint8_t slot,
                                                           const ClaimFrame& claim) {
  std::vector<LeasedPort> out;
  if (blocks_.empty()) return out;
  const uint32_t low = options_.ephemeral_low;
  if (claim.mask == ~uint64_t{0}) {
    if (claim.service_id >> 32 != 0) return out;
    const uint16_t port = static_cast<uint16_t>(claim.service_id);
    if (port < low || port > options_.ephemeral_high) return out;
    const uint16_t ps = static_cast<uint16_t>(claim.service_id >> 16);
    auto it = blocks_.find(ps);
    if (it == blocks_.end()) return out;
    const size_t at = (port - low) / options_.lease_ports;
    Block& b = it->second.blocks[at];
    if (b.slot != 0 && b.slot != slot) {
      out.push_back(LeasedPort{&b, (port - low) % options_.lease_ports, ps, port});
    }
    return out;
  }
  // A claim of many service IDs at once (a mask): every leased port it covers.
  for (auto& [ps, psb] : blocks_) {
    for (size_t at = 0; at < psb.blocks.size(); ++at) {
      Block& b = psb.blocks[at];
      if (b.slot == 0 || b.slot == slot) continue;
      const uint32_t first = low + at * uint32_t{options_.lease_ports};
      for (size_t i = 0; i < b.page->size(); ++i) {
        const uint16_t port = static_cast<uint16_t>(first + i);
        if (Covers(claim.service_id, claim.mask, ServiceIdOf(ps, port))) {
          out.push_back(LeasedPort{&b, i, ps, port});
        }
      }
    }
  }
  return out;
}

absl::Status Router::TakeLeased(const ClaimFrame& claim, const std::vector<LeasedPort>& ports,
                                std::vector<LeasedPort>* taken) {
  for (const LeasedPort& p : ports) {
    // A lessee racing the router (or flipping the byte on purpose) gets a
    // few tries; then the port counts as claimed.
    bool ok = false;
    for (int tries = 0; tries < 3 && !ok; ++tries) {
      const uint8_t v = p.block->page->Load(p.index);
      if (v == static_cast<uint8_t>(State::kTaken)) {
        ok = true;
      } else if (v == static_cast<uint8_t>(State::kFree)) {
        if (p.block->page->Take(p.index)) {
          ++counters_.leased_taken;
          taken->push_back(p);
          ok = true;
        }
      } else {
        break;  // claimed, or a value only the lessee could have written
      }
    }
    if (ok) continue;
    for (const LeasedPort& t : *taken) t.block->page->GiveBack(t.index);
    taken->clear();
    ++counters_.leased_conflicts;
    ++counters_.claim_conflicts;
    // The block's page says which ports its lessee bound, not on which
    // address: every address of the port conflicts (docs/ROUTER.md).
    const bool wildcard = claim.address.family == mad::ListenAddress::Family::kNone ||
                          std::all_of(claim.address.ip.begin(), claim.address.ip.end(),
                                      [](uint8_t b) { return b == 0; });
    return mad::WithErrno(
        absl::AlreadyExistsError(absl::StrCat(
            "router: port ", p.port, " (service ID 0x", absl::Hex(claim.service_id),
            ") is an ephemeral port that another process (slot ", p.block->slot,
            ") bound from its block of ports; the router holds it on every address (errno ",
            wildcard ? "EADDRNOTAVAIL" : "EADDRINUSE", ")")),
        wildcard ? EADDRNOTAVAIL : EADDRINUSE);
  }
  return absl::OkStatus();
}

void Router::GiveBackLeased(uint8_t slot, const ClaimFrame& released) {
  for (const LeasedPort& p : LeasedPortsCovered(slot, released)) {
    const uint64_t sid = ServiceIdOf(p.port_space, p.port);
    const uint8_t lessee = p.block->slot;
    const bool still = std::any_of(claims_.begin(), claims_.end(), [&](const Claim& c) {
      return c.slot != lessee && Covers(c.service_id, c.mask, sid);
    });
    if (!still && p.block->page->GiveBack(p.index)) ++counters_.leased_given_back;
  }
}

void Router::DropBlocks(uint8_t slot) {
  for (auto& [ps, psb] : blocks_) {
    for (Block& b : psb.blocks) {
      if (b.slot == slot) b = Block{};
    }
  }
}

}  // namespace uscm::router

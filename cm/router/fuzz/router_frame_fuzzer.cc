// libFuzzer target for uscmd's privilege boundary: what any local user can
// send a root router. The input is a sequence of records
//
//   [who: 1 byte] [length: 2 bytes, little-endian] [bytes]
//
// who % 4 = 0..2: a frame from client 0..2 (a hello first, then anything);
// with bit 0x80 the client leaves instead, with 0x40 a client writes byte
// bytes[2] at index bytes[1] of leased page bytes[0] (lessees write their
// pages); 3: a MAD arriving from the wire. Every frame is also given to
// each decoder.
// Whatever arrives, the router must neither crash nor trip a sanitizer, and
// its tables must stay within their bounds.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <utility>
#include <span>
#include <vector>

#include "cm/router/frame.h"
#include "cm/router/router.h"
#include "mad/port_page.h"
#include "mad/transport.h"

namespace {

using uscm::mad::LocalPort;
using uscm::mad::MadAddress;
using uscm::mad::ReceivedMad;
using uscm::mad::TransportCaps;

// A port whose wire is the fuzz input: sends go nowhere, received MADs are
// the input's wire records.
class FuzzWire final : public uscm::mad::Transport {
 public:
  FuzzWire() {
    port_.lid = 3;
    port_.sm_lid = 1;
    port_.pkeys = {0xFFFF};
  }
  absl::Status Send(const MadAddress&, std::span<const uint8_t> mad) override {
    sent_bytes_ += mad.size();
    return absl::OkStatus();
  }
  size_t Drain(absl::FunctionRef<void(const ReceivedMad&)> sink, size_t max) override {
    size_t n = 0;
    while (!in_.empty() && n < max) {
      ReceivedMad m;
      m.from.lid = static_cast<uint16_t>(in_.front().size() > 2 ? in_.front()[0] : 2);
      m.data = in_.front();
      sink(m);
      in_.pop_front();
      ++n;
    }
    return n;
  }
  int fd() const override { return -1; }
  const TransportCaps& caps() const override { return caps_; }
  const LocalPort& port() const override { return port_; }

  std::deque<std::vector<uint8_t>> in_;
  size_t sent_bytes_ = 0;

 private:
  TransportCaps caps_;
  LocalPort port_;
};

void DecodeEverything(std::span<const uint8_t> f) {
  namespace r = uscm::router;
  (void)r::PeekFrame(f);
  (void)r::DecodeHello(f);
  (void)r::DecodeWelcome(f);
  (void)r::DecodeMad(f);
  (void)r::DecodeClaim(f);
  (void)r::DecodeReply(f);
  (void)r::DecodeRefused(f);
  (void)r::DecodeLease(f);
  (void)r::DecodeLeaseReply(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzWire wire;
  uscm::router::RouterOptions options;
  options.slot_bits = 2;  // 3 clients
  options.tid_capacity = 64;
  options.max_tracked_per_client = 64;
  options.max_claims_per_client = 8;
  // Port blocks: a small range, pages on the heap; a client may write any
  // byte into its pages (the lessee's side is not trusted).
  options.ephemeral_low = 40000;
  options.ephemeral_high = 40063;
  options.lease_ports = 8;
  options.max_blocks_per_client = 3;
  size_t frames_out = 0;
  uscm::router::Router router(wire, options,
                              [&](uint8_t, std::span<const uint8_t> f) { frames_out += f.size(); });
  std::vector<std::pair<uint8_t, std::shared_ptr<uscm::mad::PortPage>>> pages;
  router.set_lease_hooks(uscm::router::LeaseHooks{
      [](size_t n) -> absl::StatusOr<std::shared_ptr<uscm::mad::PortPage>> {
        return uscm::mad::PortPage::CreateLocal(n);
      },
      [&](uint8_t slot, std::span<const uint8_t> f,
          const std::shared_ptr<uscm::mad::PortPage>& page) {
        frames_out += f.size();
        pages.emplace_back(slot, page);
      }});
  uint8_t slots[3] = {0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    auto wl = router.AddClient();
    if (!wl.ok()) std::abort();
    slots[i] = wl->slot;
  }
  size_t at = 0;
  while (at + 3 <= size) {
    const uint8_t who = data[at] % 4;
    const size_t len = std::min<size_t>(size - at - 3, data[at + 1] | data[at + 2] << 8);
    std::span<const uint8_t> bytes(data + at + 3, len);
    at += 3 + len;
    DecodeEverything(bytes);
    if (who == 3) {
      wire.in_.emplace_back(bytes.begin(), bytes.end());
      router.PollWire();
    } else if ((data[at - len - 3] & 0x80) != 0) {
      router.RemoveClient(slots[who]);  // a client going away mid-conversation
      auto wl = router.AddClient();
      if (wl.ok()) slots[who] = wl->slot;
    } else if ((data[at - len - 3] & 0x40) != 0 && len >= 2 && !pages.empty()) {
      // The lessee writes its page: any value, any port of the block.
      auto& [slot, page] = pages[bytes[0] % pages.size()];
      page->StoreRawForTesting(bytes[1] % page->size(), len >= 3 ? bytes[2] : 0);
    } else {
      router.HandleFrame(slots[who], bytes);
    }
  }
  // Bounds the router promises whatever it was sent.
  if (router.tid_entries() > options.tid_capacity) std::abort();
  if (router.claim_count() > 3 * options.max_claims_per_client) std::abort();
  for (uint8_t s : slots) {
    if (router.tracked(s) > 3 * options.max_tracked_per_client) std::abort();
    for (uint16_t ps : {0x0002, 0x0106, 0x0111, 0x013F}) {
      if (router.blocks_of(s, ps) > options.max_blocks_per_client) std::abort();
    }
  }
  return 0;
}

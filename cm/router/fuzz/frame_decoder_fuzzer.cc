// libFuzzer target for uscmd's frame decoder, the first code that touches
// what any local user sends the root router: every decoder takes the input;
// whatever one accepts must encode and decode again to the same value.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "cm/router/frame.h"
#include "mad/status_errno.h"

namespace r = uscm::router;

namespace {

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> f(data, size);
  auto type = r::PeekFrame(f);
  if (auto h = r::DecodeHello(f); h.ok()) {
    Check(type.ok() && *type == r::FrameType::kHello);
    auto again = r::DecodeHello(r::EncodeHello(*h));
    Check(again.ok() && again->pid == h->pid);
  }
  if (auto m = r::DecodeMad(f); m.ok()) {
    Check(type.ok() && *type == r::FrameType::kMad);
    std::vector<uint8_t> out;
    r::EncodeMad(m->address, m->mad, &out);
    auto again = r::DecodeMad(out);
    Check(again.ok() && again->address == m->address &&
          std::equal(again->mad.begin(), again->mad.end(), m->mad.begin(), m->mad.end()));
  }
  if (auto c = r::DecodeClaim(f); c.ok()) {
    Check(type.ok() && (*type == r::FrameType::kClaim || *type == r::FrameType::kRelease));
    auto again = r::DecodeClaim(r::EncodeClaim(*type, *c));
    Check(again.ok() && again->request == c->request && again->service_id == c->service_id &&
          again->mask == c->mask && again->reuse == c->reuse && again->address == c->address &&
          again->kind == c->kind);
  }
  if (auto rep = r::DecodeReply(f); rep.ok()) {
    auto again = r::DecodeReply(r::EncodeReply(*rep));
    Check(again.ok() && again->request == rep->request &&
          again->status.code() == rep->status.code() &&
          uscm::mad::ErrnoOf(again->status) == uscm::mad::ErrnoOf(rep->status));
  }
  if (auto w = r::DecodeWelcome(f); w.ok()) {
    auto again = r::DecodeWelcome(r::EncodeWelcome(*w));
    Check(again.ok() && again->slot == w->slot && again->comm_id_prefix == w->comm_id_prefix &&
          again->comm_id_prefix_bits == w->comm_id_prefix_bits);
  }
  if (auto l = r::DecodeLease(f); l.ok()) {
    auto again = r::DecodeLease(r::EncodeLease(*l));
    Check(again.ok() && again->request == l->request && again->port_space == l->port_space);
  }
  if (auto lr = r::DecodeLeaseReply(f); lr.ok()) {
    Check(lr->status.ok() == (lr->ports != 0));
    auto again = r::DecodeLeaseReply(r::EncodeLeaseReply(*lr));
    Check(again.ok() && again->request == lr->request &&
          again->status.code() == lr->status.code() && again->first_port == lr->first_port &&
          again->ports == lr->ports);
  }
  if (auto ref = r::DecodeRefused(f); ref.ok()) Check(!ref->why.ok());
  return 0;
}

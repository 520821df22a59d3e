#include "cm/router/local_router.h"

#include "absl/strings/str_cat.h"

namespace uscm::router {

LocalRouter::LocalRouter(mad::Transport& wire, RouterOptions options)
    : router_(wire, options,
              [this](uint8_t slot, std::span<const uint8_t> frame) { Deliver(slot, frame); }),
      clients_(size_t{1} << options.slot_bits, nullptr) {
  router_.set_lease_hooks(LeaseHooks{
      [](size_t ports) -> absl::StatusOr<std::shared_ptr<mad::PortPage>> {
        return mad::PortPage::CreateLocal(ports);
      },
      [this](uint8_t slot, std::span<const uint8_t> frame,
             const std::shared_ptr<mad::PortPage>& page) { Deliver(slot, frame, page); }});
}

LocalRouter::~LocalRouter() {
  // A client outliving its router would call into freed memory; detach them.
  for (LocalRouterClient* c : clients_) {
    if (c != nullptr) c->welcome_.slot = 0;
  }
}

absl::StatusOr<std::unique_ptr<LocalRouterClient>> LocalRouter::Connect() {
  auto welcome = router_.AddClient();
  if (!welcome.ok()) return welcome.status();
  std::unique_ptr<LocalRouterClient> c(new LocalRouterClient(*this, *welcome));
  clients_[welcome->slot] = c.get();
  return c;
}

void LocalRouter::Deliver(uint8_t slot, std::span<const uint8_t> frame,
                          const std::shared_ptr<mad::PortPage>& page) {
  LocalRouterClient* c = slot < clients_.size() ? clients_[slot] : nullptr;
  if (c == nullptr) {
    ++frames_for_no_client_;
    return;
  }
  c->Receive(frame, page);
}

void LocalRouter::Disconnect(uint8_t slot) {
  clients_[slot] = nullptr;
  router_.RemoveClient(slot);
}

LocalRouterClient::LocalRouterClient(LocalRouter& router, Welcome welcome)
    : router_(router), welcome_(std::move(welcome)) {
  caps_.name = "local-router";
  caps_.kernel_rmpp = welcome_.kernel_rmpp;
  caps_.max_receive_size = welcome_.max_receive_size;
  caps_.comm_id_prefix_bits = welcome_.comm_id_prefix_bits;
  caps_.comm_id_prefix = welcome_.comm_id_prefix;
}

LocalRouterClient::~LocalRouterClient() {
  if (welcome_.slot != 0) router_.Disconnect(welcome_.slot);
}

absl::Status LocalRouterClient::Send(const mad::MadAddress& to, std::span<const uint8_t> mad) {
  if (welcome_.slot == 0) return absl::UnavailableError("local router: the router is gone");
  if (mad.size() < 24 || mad.size() > kMaxFrameBytes - kFrameHeaderBytes - kAddressBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("local router: a MAD of ", mad.size(), " bytes; 24..",
                     kMaxFrameBytes - kFrameHeaderBytes - kAddressBytes, " can be sent"));
  }
  EncodeMad(to, mad, &out_);
  ++counters_.sent;
  router_.router_.HandleFrame(welcome_.slot, out_);
  return absl::OkStatus();
}

void LocalRouterClient::Receive(std::span<const uint8_t> frame,
                                const std::shared_ptr<mad::PortPage>& page) {
  auto type = PeekFrame(frame);
  if (!type.ok()) {
    ++counters_.undecodable;
    return;
  }
  switch (*type) {
    case FrameType::kMad: {
      auto m = DecodeMad(frame);
      if (!m.ok()) break;
      ++counters_.received;
      inbox_.emplace_back(m->address, std::vector<uint8_t>(m->mad.begin(), m->mad.end()));
      if (on_arrival_) on_arrival_();
      return;
    }
    case FrameType::kRefused: {
      auto why = DecodeRefused(frame);
      if (!why.ok()) break;
      ++counters_.refused;
      last_refusal_ = why->why;
      return;
    }
    case FrameType::kReply: {
      auto r = DecodeReply(frame);
      if (!r.ok()) break;
      replies_.push_back(*r);
      return;
    }
    case FrameType::kLeaseReply: {
      auto r = DecodeLeaseReply(frame);
      if (!r.ok()) break;
      leases_.push_back(LeaseOf(*r, page));
      return;
    }
    default:
      break;
  }
  ++counters_.undecodable;
}

size_t LocalRouterClient::Drain(absl::FunctionRef<void(const mad::ReceivedMad&)> sink, size_t max) {
  size_t n = 0;
  while (n < max && !inbox_.empty()) {
    // Out of the queue first: the sink may make the router queue more.
    auto [from, bytes] = std::move(inbox_.front());
    inbox_.pop_front();
    sink(mad::ReceivedMad{from, bytes});
    ++n;
  }
  return n;
}

absl::Status LocalRouterClient::Request(FrameType type, const ClaimFrame& claim) {
  if (welcome_.slot == 0) return absl::UnavailableError("local router: the router is gone");
  router_.router_.HandleFrame(welcome_.slot, EncodeClaim(type, claim));
  for (auto it = replies_.begin(); it != replies_.end(); ++it) {
    if (it->request != claim.request) continue;
    absl::Status s = it->status;
    replies_.erase(it);
    return s;
  }
  return absl::InternalError(absl::StrCat("local router: no reply to request ", claim.request));
}

absl::Status LocalRouterClient::ClaimService(uint64_t service_id, uint64_t mask, bool reuse,
                                             const mad::ListenAddress& address,
                                             mad::ClaimKind kind) {
  return Request(FrameType::kClaim,
                 ClaimFrame{next_request_++, service_id, mask, reuse, address, kind});
}

void LocalRouterClient::ReleaseService(uint64_t service_id, uint64_t mask,
                                       const mad::ListenAddress& address, mad::ClaimKind kind) {
  (void)Request(FrameType::kRelease,
                ClaimFrame{next_request_++, service_id, mask, false, address, kind});
}

absl::StatusOr<mad::PortLease> LocalRouterClient::LeasePorts(uint16_t port_space) {
  if (welcome_.slot == 0) return absl::UnavailableError("local router: the router is gone");
  leases_.clear();
  router_.router_.HandleFrame(welcome_.slot, EncodeLease(LeaseFrame{next_request_++, port_space}));
  if (leases_.empty()) return absl::InternalError("local router: no reply to the lease");
  return leases_.front();
}

}  // namespace uscm::router

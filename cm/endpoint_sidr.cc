// SIDR: service ID resolution for UD (digest §4.9). Active ids retransmit
// SIDR_REQ; passive ids are never put in TimeWait; duplicates (same request
// ID and source LID) are dropped; no listener -> SIDR_REP status 1.
#include "absl/strings/str_cat.h"
#include "cm/endpoint.h"
#include "cm/endpoint_internal.h"
#include "mad/wire/cm_sidr.h"

namespace uscm::cm {

using mad::TimePoint;
using mad::wire::CmAttr;
using internal::CheckPrivateData;
using internal::WrongState;

absl::StatusOr<ConnId> CmEndpoint::SidrRequest(TimePoint now,
                                               const SidrRequestParams& p) {
  if (auto s = CheckPrivateData(p.private_data, mad::wire::sidr_req::kPrivateDataBytes,
                                "SIDR_REQ");
      !s.ok()) {
    return s;
  }
  if (p.timeout > 31 || p.max_retries > 15 || p.retry.backoff_factor == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SidrRequestParams: timeout ", p.timeout, " (0..31), max_retries ",
        p.max_retries, " (0..15), backoff_factor ", p.retry.backoff_factor, " (>= 1)"));
  }
  Connection c;
  c.active_side = true;
  c.state = CmState::kSidrReqSent;
  c.service_id = p.service_id;
  c.peer = p.peer;
  // RoCE has no LID routing: every MAD needs a GRH (as AddressForPath gives a
  // REQ). Without it the SIDR_REQ leaves with no IP header the peer can use
  // and a kernel peer never answers (udaddy to the kernel: UNREACHABLE -110).
  c.peer.has_grh = c.peer.has_grh || port_.link_layer == mad::LinkLayer::kEthernet;
  c.pkey = p.pkey;
  c.local_comm_id = NewCommId();
  c.sidr_request_id = c.local_comm_id;
  c.transaction_id = (uint64_t{++tid_counter_} << 32) | c.local_comm_id;
  mad::wire::SidrReqRepr r;
  r.envelope.transaction_id = c.transaction_id;
  r.request_id = c.sidr_request_id;
  r.partition_key = p.pkey;
  r.service_id = p.service_id;
  r.private_data = mad::wire::PrivateData(p.private_data);
  if (absl::Status s = r.Emit(RequestBuffer(c)); !s.ok()) {
    EndRequest(c);
    return s;
  }
  const ConnId id = NewConnection(std::move(c));
  Connection& cc = *Find(id);
  QueueCounted(cc.peer, RequestMad(cc));
  ArmRequest(now, cc, id, CmAttr::kSidrReq, Ms(p.timeout), p.max_retries, p.retry);
  return id;
}

void CmEndpoint::HandleSidrRep(TimePoint now, std::span<const uint8_t> mad) {
  auto r = mad::wire::SidrRepRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kSidrRep);
  Connection* c = ByLocalId(r->request_id);
  if (c == nullptr) {
    ++counters_.unknown_connection;
    return;
  }
  if (c->state != CmState::kSidrReqSent) {
    CountDuplicate(CmAttr::kSidrRep);
    return;
  }
  const ConnId id = IdOf(*c);
  Disarm(*c, TimerKind::kRetransmit);
  EndRequest(*c);
  c->state = CmState::kIdle;
  if (!c->destroyed) {
    const bool ok = r->status == mad::wire::SidrStatus::kSuccess;
    CmEvent e = MakeEvent(ok ? CmEventType::kSidrReply : CmEventType::kUnreachable, *c);
    e.status = static_cast<int>(r->status);
    e.sidr_qpn = r->qpn;
    e.sidr_qkey = r->qkey;
    e.remote_ece = r->ece;
    e.private_data = r->private_data;
    e.ari_length = r->additional_info.length;
    e.ari = r->additional_info.bytes;
    Emit(std::move(e));
  }
  MaybeFree(id);
}

void CmEndpoint::HandleSidrReq(TimePoint now, const mad::MadAddress& from,
                               std::span<const uint8_t> mad) {
  auto r = mad::wire::SidrReqRepr::Parse(mad);
  if (!r.ok()) {
    ++counters_.malformed;
    return;
  }
  CountReceived(CmAttr::kSidrReq);
  if (sidr_table_.contains({r->request_id, from.lid})) {
    CountDuplicate(CmAttr::kSidrReq);
    return;
  }
  const absl::optional<ListenId> lid = MatchListener(r->service_id);
  if (!lid.has_value()) {
    ++counters_.no_listener;
    mad::wire::SidrRepRepr rep;
    rep.envelope.transaction_id = r->envelope.transaction_id;
    rep.request_id = r->request_id;
    rep.status = mad::wire::SidrStatus::kServiceIdNotSupported;
    rep.service_id = r->service_id;
    Send(from, rep);
    return;
  }
  Connection c;
  c.state = CmState::kSidrReqRcvd;
  c.listen = *lid;
  c.service_id = r->service_id;
  c.pkey = r->partition_key;
  c.peer = from;
  c.transaction_id = r->envelope.transaction_id;
  c.sidr_request_id = r->request_id;
  c.sidr_source_lid = from.lid;
  const ConnId id = NewConnection(std::move(c));
  sidr_table_[{r->request_id, from.lid}] = id.index;
  CmEvent e = MakeEvent(CmEventType::kSidrRequest, *Find(id));
  e.service_id = r->service_id;
  // Of e.req only sgid_index: the entry it came in on (its netdev on RoCE).
  e.req.sgid_index = from.sgid_index;
  e.private_data = r->private_data;
  Emit(std::move(e));
}

absl::Status CmEndpoint::SidrReply(TimePoint now, ConnId id,
                                   const SidrReplyParams& p) {
  auto found = FindOrError(id);
  if (!found.ok()) return found.status();
  Connection& c = **found;
  if (c.state != CmState::kSidrReqRcvd) return WrongState("SidrReply", c.state);
  if (auto s = CheckPrivateData(p.private_data, mad::wire::sidr_rep::kPrivateDataBytes,
                                "SIDR_REP");
      !s.ok()) {
    return s;
  }
  if (p.additional_info.size() > mad::wire::InfoBlock::kBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "additional info is ", p.additional_info.size(), " bytes; SIDR_REP carries at most 72"));
  }
  mad::wire::SidrRepRepr r;
  r.envelope.transaction_id = c.transaction_id;
  r.request_id = c.sidr_request_id;
  r.status = static_cast<mad::wire::SidrStatus>(p.status);
  r.additional_info = mad::wire::InfoBlock::Of(p.additional_info);
  if (p.ece.has_value()) r.ece = *p.ece;
  r.qpn = p.qpn;
  r.service_id = c.service_id;
  r.qkey = p.qkey;
  r.private_data = mad::wire::PrivateData(p.private_data);
  std::array<uint8_t, mad::kMadSize> buf{};
  if (absl::Status s = r.Emit(buf); !s.ok()) return s;
  QueueCounted(c.peer, buf);
  sidr_table_.erase({c.sidr_request_id, c.sidr_source_lid});
  c.state = CmState::kIdle;
  return absl::OkStatus();
}

}  // namespace uscm::cm

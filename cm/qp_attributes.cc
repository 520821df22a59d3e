// Data-QP attributes for INIT / RTR / RTS as a pure function of connection
// state (digest §5; Linux cm_init_qp_{init,rtr,rts}_attr).
#include "absl/strings/str_cat.h"
#include "cm/endpoint.h"
#include "cm/endpoint_internal.h"

namespace uscm::cm {
namespace {

bool ConnectedEnough(CmState s, bool init) {
  switch (s) {
    case CmState::kReqSent:
    case CmState::kMraReqRcvd:
      return init;  // RTR needs the peer's QPN and PSN
    case CmState::kReqRcvd:
    case CmState::kMraReqSent:
    case CmState::kRepRcvd:
    case CmState::kMraRepSent:
    case CmState::kRepSent:
    case CmState::kMraRepRcvd:
    case CmState::kEstablished:
      return true;
    default:
      return false;
  }
}

uint16_t PkeyIndex(const mad::LocalPort& port, uint16_t pkey) {
  for (size_t i = 0; i < port.pkeys.size(); ++i) {
    if ((port.pkeys[i] & 0x7FFF) == (pkey & 0x7FFF)) return static_cast<uint16_t>(i);
  }
  return 0;
}

QpAv AvFor(const PathInfo& p, const mad::LocalPort& port, uint16_t pkey_index,
           uint8_t timeout) {
  QpAv av;
  av.dlid = p.remote_lid;
  av.sl = p.sl;
  av.static_rate = p.packet_rate;
  av.is_global = !p.subnet_local || port.link_layer == mad::LinkLayer::kEthernet;
  av.dgid = p.remote_gid;
  av.flow_label = p.flow_label;
  av.hop_limit = p.hop_limit;
  av.traffic_class = p.traffic_class;
  av.port_num = port.port_num;
  av.pkey_index = pkey_index;
  av.timeout = timeout;
  return av;
}

}  // namespace

absl::StatusOr<QpAttributes> CmEndpoint::GetQpAttributes(ConnId id,
                                                         QpState state) const {
  const Connection* c = Find(id);
  if (c == nullptr) return absl::NotFoundError("unknown connection id");
  if (!ConnectedEnough(c->state, state == QpState::kInit)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "QP attributes for ", state == QpState::kInit ? "INIT" : state == QpState::kRtr ? "RTR" : "RTS",
        " are not available in state ", CmStateName(c->state)));
  }
  const bool rc = c->transport == TransportType::kRc;
  const uint16_t pkey_index = PkeyIndex(port_, c->pkey);
  QpAttributes a;
  a.state = state;
  switch (state) {
    case QpState::kInit:
      a.mask = kQpState | kQpAccessFlags | kQpPkeyIndex | kQpPort;
      a.access_flags = kAccessRemoteWrite;
      if (c->responder_resources > 0) {
        a.access_flags |= kAccessRemoteRead | kAccessRemoteAtomic;
      }
      a.pkey_index = pkey_index;
      a.port_num = port_.port_num;
      break;
    case QpState::kRtr:
      a.mask = kQpState | kQpAv | kQpPathMtu | kQpDestQpn | kQpRqPsn;
      a.av = AvFor(c->primary, port_, pkey_index, c->local_ack_timeout);
      a.path_mtu = c->path_mtu;
      a.dest_qpn = c->remote_qpn;
      a.rq_psn = c->local_psn;  // our own starting PSN
      if (rc) {
        a.mask |= kQpMaxDestRdAtomic | kQpMinRnrTimer;
        a.max_dest_rd_atomic = c->responder_resources;
        a.min_rnr_timer = 0;  // IBA encoding 0 = 655.36 ms, as Linux
      }
      if (c->alternate != nullptr) {
        a.mask |= kQpAltPath;
        a.alt_av = AvFor(*c->alternate, port_, pkey_index, c->alternate->local_ack_timeout);
      }
      break;
    case QpState::kRts:
      if (c->state == CmState::kEstablished && c->lap == LapState::kIdle &&
          c->alternate != nullptr) {
        // After a LAP: only the new alternate path, re-armed.
        a.mask = kQpAltPath | kQpPathMigState;
        a.alt_av = AvFor(*c->alternate, port_, pkey_index, c->alternate->local_ack_timeout);
        a.path_mig_rearm = true;
        break;
      }
      a.mask = kQpState | kQpSqPsn;
      a.sq_psn = c->remote_psn;  // the peer's starting PSN
      if (rc) {
        a.mask |= kQpRetryCnt | kQpRnrRetry | kQpMaxQpRdAtomic | kQpTimeout;
        a.retry_cnt = c->retry_count;
        a.rnr_retry = c->rnr_retry_count;
        a.max_rd_atomic = c->initiator_depth;
        a.timeout = c->local_ack_timeout;
      }
      if (c->alternate != nullptr) {
        a.mask |= kQpPathMigState;
        a.path_mig_rearm = true;
      }
      break;
  }
  return a;
}

}  // namespace uscm::cm

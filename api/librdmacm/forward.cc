// The translation of a uscm event into the program's rdma_cm_event (the
// pump's step, ids.cc PumpEventsLocked): the new passive id of a
// CONNECT_REQUEST, param.conn or param.ud, listen_id, status, and a UD
// ESTABLISHED's address handle completed from the GID table.
#include <errno.h>
#include <rdma/rdma_cma.h>
#include <stddef.h>

#include "api/c/uscm_cma.h"
#include "api/librdmacm/convert.h"
#include "api/librdmacm/event_channel.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/ports.h"
#include "api/librdmacm/ud_ah.h"

namespace uscm::librdmacm::internal {

namespace {

// id->route.path_rec (one path, as librdmacm's ucma_query_route fills it).
void FillRoute(Id* id) {
  uscm_path p;
  if (uscm_get_route(id->state->uid, &p) == 0) FillRouteFrom(id, p);
}

}  // namespace

// One uscm event of `from` to the program's channel.
void Forward(const uscm_cm_event& ue, Port* from) {
  Id* listen = nullptr;
  if (ue.listen_id != nullptr) {
    auto it = ByUscmId().find(ue.listen_id);
    if (it != ByUscmId().end()) listen = it->second;
  }
  Id* id = nullptr;
  auto it = ByUscmId().find(ue.id);
  if (it != ByUscmId().end()) {
    id = it->second;
  } else if (ue.event == USCM_CM_EVENT_CONNECT_REQUEST && listen != nullptr) {
    // The new passive id: the listener's channel, context and port space;
    // a synchronous listener's new id is synchronous, on a channel of its
    // own (librdmacm migrates it to one).
    rdma_event_channel* channel = listen->pub.channel;
    if (listen->state->sync) {
      channel = NewEventChannel();
      if (channel == nullptr) {
        Fail(errno, "event", "no channel for the new id: CONNECT_REQUEST dropped");
        return;
      }
    }
    id = NewId(ue.id, from, channel, listen->pub.context, listen->pub.ps);
    // As the kernel's new id (cma_ib_new_udp_id / _conn_id): UD for a
    // SIDR_REQ, the listener's (RC) for a REQ.
    id->pub.qp_type = uscm_get_qp_type(ue.id) == USCM_QPT_UD ? IBV_QPT_UD : IBV_QPT_RC;
    id->state->sync = listen->state->sync;
    AttachDevice(id);
    FillAddrs(id);
    FillRoute(id);
  }
  if (id == nullptr) {
    Fail(EINVAL, "event", "event for an id the drop-in does not know: dropped");
    return;
  }
  switch (ue.event) {
    case USCM_CM_EVENT_ADDR_RESOLVED:
      AttachDevice(id);
      FillAddrs(id);
      break;
    case USCM_CM_EVENT_ROUTE_RESOLVED:
      FillAddrs(id);
      FillRoute(id);
      break;
    case USCM_CM_EVENT_CONNECT_RESPONSE:
    case USCM_CM_EVENT_ESTABLISHED:
      FillAddrs(id);
      if (ue.event == USCM_CM_EVENT_ESTABLISHED && !IsUdId(id->pub)) DetachQp(ue.id);
      break;
    case USCM_CM_EVENT_DISCONNECTED:
    case USCM_CM_EVENT_REJECTED:
    case USCM_CM_EVENT_UNREACHABLE:
    case USCM_CM_EVENT_CONNECT_ERROR:
      DetachQp(ue.id);
      break;
    case USCM_CM_EVENT_DEVICE_REMOVAL:
      // One per id, status 0, as the kernel's cma_process_remove sends it:
      // the drop-in's own notice of the removal (wildcard_ids.cc
      // SendDeviceRemovalLocked) or the loss of the port's MAD path (its
      // uscmd exited, as it does once its umad file reads EIO on the
      // device's removal), whichever comes first. uscm's status (-ENODEV)
      // and detail go to USCM_DEBUG. None to a wildcard id (no device of
      // the program's: MoveWildcardIdsOffLocked) nor for a wildcard's bind
      // or listen on another port: the kernel's cma_process_remove only
      // destroys a wildcard listener's listen on the device. When the
      // device stays (its uscmd was killed), the pump then replaces the
      // port (OnLostPathLocked): the wildcard ids listen there again
      // through a new uscmd, and new ids are served there.
      if (ue.id != id->state->uid || OnNoDeviceLocked(id)) {
        SayWildcardPathLost(id, from);
        return;
      }
      // A created id on no device (its placeholder uscm id there): the
      // kernel's has no device, so none; its placeholder leaves the port
      // after the port's events (DropPlaceholdersLocked).
      if (IsPlaceholderLocked(id)) return;
      // A listener bound to the port's address: OnLostPathLocked moves it
      // to the port's fresh entry, or sends it this event if the device went.
      if (id->state->removal_sent || RemovalLeftToLostPathLocked(id)) return;
      id->state->removal_sent = true;
      Fail(ENODEV, "event", "DEVICE_REMOVAL: the port's MAD path is gone");
      break;
    default:
      break;
  }

  const bool multicast =
      ue.event == USCM_CM_EVENT_MULTICAST_JOIN || ue.event == USCM_CM_EVENT_MULTICAST_ERROR;
  McJoin* join = nullptr;
  if (multicast) {
    // uscm's context is the join's handle (multicast.cc); a join left
    // already: its event is dropped, as the kernel's ucma_cleanup_mc_events.
    join = JoinOfLocked(id, ue.param.ud.private_data);
    if (join == nullptr) return;
  }

  rdma_cm_event ev = {};
  ev.id = &id->pub;
  ev.listen_id = listen != nullptr ? &listen->pub : nullptr;
  ev.event = static_cast<rdma_cm_event_type>(ue.event);
  ev.status = ue.event == USCM_CM_EVENT_DEVICE_REMOVAL ? 0 : ue.status;
  const void* data;
  size_t len;
  if (IsUdId(id->pub) || multicast) {
    ToIbvAh(ue.param.ud.ah_attr, &ev.param.ud.ah_attr);
    // uscm's GID entry of the id (uscm_source_gid_index: the route's
    // netdev, or the one a request came in on), as rdma_create_qp's QP and
    // rdma_init_qp_attr's AV take it; else the address's first entry.
    if (ue.event == USCM_CM_EVENT_ESTABLISHED) {
      CompleteAh(id->pub.verbs, id->pub.port_num, &id->pub.route.addr.src_addr,
                 &ev.param.ud.ah_attr, uscm_source_gid_index(id->state->uid));
    }
    ev.param.ud.qp_num = ue.param.ud.qp_num;
    ev.param.ud.qkey = ue.param.ud.qkey;
    data = ue.param.ud.private_data;
    len = ue.param.ud.private_data_len;
    if (multicast) {
      // As librdmacm: private_data is the join's context, not data.
      ev.param.ud.private_data = join->context;
      QueueForJoin(join, id->pub.channel, ev);
      return;
    }
  } else {
    ToConnParam(ue.param.conn, ue.event == USCM_CM_EVENT_CONNECT_REQUEST, &ev.param.conn);
    if (ue.event == USCM_CM_EVENT_CONNECT_REQUEST) {
      id->state->req_initiator_depth = ev.param.conn.initiator_depth;
      id->state->req_responder_resources = ev.param.conn.responder_resources;
    }
    data = ue.param.conn.private_data;
    len = ue.param.conn.private_data_len;
  }
  if (data == nullptr) len = 0;
  // A CONNECT_REQUEST is reported on the listener's channel.
  rdma_event_channel* target = ue.event == USCM_CM_EVENT_CONNECT_REQUEST && listen != nullptr
                                   ? listen->pub.channel
                                   : id->pub.channel;
  QueueForId(id, target, ev, data, len);
}

}  // namespace uscm::librdmacm::internal

// The registry behind the printer (and the tshark cross-check): which field
// tables make up a MAD of each class and attribute, and at which MAD offset.
// Add a row here when a message gains a table.
#include "mad/wire/class_port_info.h"
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_drep.h"
#include "mad/wire/cm_dreq.h"
#include "mad/wire/cm_lap_apr.h"
#include "mad/wire/cm_mra.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/cm_rep.h"
#include "mad/wire/cm_req.h"
#include "mad/wire/cm_rtu.h"
#include "mad/wire/cm_sidr.h"
#include "mad/wire/mad_header.h"
#include "mad/wire/mcmember_record.h"
#include "mad/wire/path_record.h"
#include "mad/wire/printer.h"
#include "mad/wire/rmpp.h"
#include "mad/wire/sa_header.h"
#include "mad/wire/service_record.h"

namespace uscm::mad::wire {
namespace {

constexpr size_t kBody = kMadHeaderBytes;

const Layout kReq{"REQ", kBody, req::kRows, {"LocalCommID", "ServiceID", "LocalQPN", "StartingPSN"}};
const Layout kMra{"MRA", kBody, mra::kRows, {"LocalCommID", "RemoteCommID", "MessageMRAed", "ServiceTimeout"}};
const Layout kRej{"REJ", kBody, rej::kRows, {"LocalCommID", "RemoteCommID", "MessageRejected", "Reason"}};
const Layout kRep{"REP", kBody, rep::kRows, {"LocalCommID", "RemoteCommID", "LocalQPN", "StartingPSN"}};
const Layout kRtu{"RTU", kBody, rtu::kRows, {"LocalCommID", "RemoteCommID"}};
const Layout kDreq{"DREQ", kBody, dreq::kRows, {"LocalCommID", "RemoteCommID", "RemoteQPN/EECN"}};
const Layout kDrep{"DREP", kBody, drep::kRows, {"LocalCommID", "RemoteCommID"}};
const Layout kSidrReq{"SIDR_REQ", kBody, sidr_req::kRows, {"RequestID", "ServiceID"}};
const Layout kSidrRep{"SIDR_REP", kBody, sidr_rep::kRows, {"RequestID", "Status", "QPN", "QKey"}};
const Layout kLap{"LAP", kBody, lap::kRows, {"LocalCommID", "RemoteCommID", "RemoteQPN/EECN"}};
const Layout kApr{"APR", kBody, apr::kRows, {"LocalCommID", "RemoteCommID", "APStatus"}};
const Layout kCmClassPortInfo{"ClassPortInfo", kBody, class_port_info::kRows, {"ClassVersion", "CapabilityMask"}};

const Layout kRmpp{"RMPP", kRmppHeaderOffset, rmpp::kRows, {"RMPPType", "SegmentNumber"}};
const Layout kSaHeader{"SA", kSaHeaderOffset, sa_header::kRows, {"ComponentMask"}};
const Layout kPathRecord{"PathRecord", kSaDataOffset, path_record::kRows, {"DGID", "SGID", "DLID", "SLID"}};
const Layout kMcMemberRecord{"MCMemberRecord", kSaDataOffset, mcmember_record::kRows, {"MGID", "PortGID", "MLID", "JoinState"}};
const Layout kServiceRecord{"ServiceRecord", kSaDataOffset, service_record::kRows, {"ServiceID", "ServiceGID"}};
const Layout kSaClassPortInfo{"ClassPortInfo", kSaDataOffset, class_port_info::kRows, {"ClassVersion", "CapabilityMask", "RespTimeValue"}};

}  // namespace

std::vector<const Layout*> LayoutsFor(uint8_t mgmt_class, uint16_t attribute_id) {
  if (mgmt_class == static_cast<uint8_t>(MgmtClass::kCommMgt)) {
    switch (static_cast<CmAttr>(attribute_id)) {
      case CmAttr::kClassPortInfo: return {&kCmClassPortInfo};
      case CmAttr::kReq: return {&kReq};
      case CmAttr::kMra: return {&kMra};
      case CmAttr::kRej: return {&kRej};
      case CmAttr::kRep: return {&kRep};
      case CmAttr::kRtu: return {&kRtu};
      case CmAttr::kDreq: return {&kDreq};
      case CmAttr::kDrep: return {&kDrep};
      case CmAttr::kSidrReq: return {&kSidrReq};
      case CmAttr::kSidrRep: return {&kSidrRep};
      case CmAttr::kLap: return {&kLap};
      case CmAttr::kApr: return {&kApr};
    }
    return {};
  }
  if (mgmt_class == static_cast<uint8_t>(MgmtClass::kSubnAdm)) {
    switch (static_cast<SaAttr>(attribute_id)) {
      case SaAttr::kClassPortInfo: return {&kRmpp, &kSaHeader, &kSaClassPortInfo};
      case SaAttr::kPathRecord: return {&kRmpp, &kSaHeader, &kPathRecord};
      case SaAttr::kMcMemberRecord: return {&kRmpp, &kSaHeader, &kMcMemberRecord};
      case SaAttr::kServiceRecord: return {&kRmpp, &kSaHeader, &kServiceRecord};
      default: return {&kRmpp, &kSaHeader};
    }
  }
  return {};
}

}  // namespace uscm::mad::wire

#include "mad/wire/cm_samples.h"

#include <cstdlib>

#include "mad/gid.h"

namespace uscm::mad::wire {
namespace {

CmPath SamplePath(uint8_t last) {
  CmPath p;
  p.local_lid = 1;
  p.remote_lid = last;
  p.local_gid = Gid::FromParts(0xfe80000000000000ull, 0x0002c90300a1b2c3ull);
  p.remote_gid = Gid::FromParts(0xfe80000000000000ull, 0x0002c90300d4e500ull | last);
  p.flow_label = 0x12345;
  p.packet_rate = 16;
  p.hop_limit = 1;
  p.sl = 3;
  p.subnet_local = true;
  p.local_ack_timeout = 14;
  return p;
}

PrivateData Text(const char* s) {
  std::vector<uint8_t> b;
  for (; *s != 0; ++s) b.push_back(static_cast<uint8_t>(*s));
  return PrivateData(b);
}

}  // namespace

std::vector<CmMessage> SampleCmMessages() {
  std::vector<CmMessage> out;
  ReqRepr req;
  req.envelope.transaction_id = 0x100;
  req.local_comm_id = 0x11223344;
  req.ece = {0x02c903, 1};
  req.service_id = 0x0000000001061d2f;
  req.local_ca_guid = 0x0002c90300a1b2c3;
  req.local_qpn = 0x123;
  req.responder_resources = 4;
  req.initiator_depth = 4;
  req.remote_cm_response_timeout = 20;
  req.starting_psn = 0x123456;
  req.local_cm_response_timeout = 20;
  req.retry_count = 7;
  req.partition_key = 0xffff;
  req.path_mtu = PathMtu::k4096;
  req.rnr_retry_count = 7;
  req.max_cm_retries = 15;
  req.primary = SamplePath(2);
  req.alternate = SamplePath(3);
  req.private_data = Text("req");
  out.push_back(req);

  MraRepr mra;
  mra.envelope.transaction_id = 0x100;
  mra.local_comm_id = 0x55667788;
  mra.remote_comm_id = 0x11223344;
  mra.service_timeout = 21;
  out.push_back(mra);

  RejRepr rej;
  rej.envelope.transaction_id = 0x100;
  rej.remote_comm_id = 0x11223344;
  rej.reason = RejReason::kTimeout;
  if (!rej.SetAriValue(0x0002c90300d4e5f6).ok()) std::abort();
  out.push_back(rej);

  RepRepr rep;
  rep.envelope.transaction_id = 0x100;
  rep.local_comm_id = 0x55667788;
  rep.remote_comm_id = 0x11223344;
  rep.local_qpn = 0x456;
  rep.ece = {0x02c903, 1};
  rep.starting_psn = 0x654321;
  rep.target_ack_delay = 15;
  rep.rnr_retry_count = 7;
  rep.local_ca_guid = 0x0002c90300d4e5f6;
  rep.private_data = Text("rep");
  out.push_back(rep);

  RtuRepr rtu;
  rtu.envelope.transaction_id = 0x100;
  rtu.local_comm_id = 0x11223344;
  rtu.remote_comm_id = 0x55667788;
  out.push_back(rtu);

  DreqRepr dreq;
  dreq.envelope.transaction_id = 0x101;
  dreq.local_comm_id = 0x11223344;
  dreq.remote_comm_id = 0x55667788;
  dreq.remote_qpn = 0x456;
  out.push_back(dreq);

  DrepRepr drep;
  drep.envelope.transaction_id = 0x101;
  drep.local_comm_id = 0x55667788;
  drep.remote_comm_id = 0x11223344;
  out.push_back(drep);

  SidrReqRepr sidr_req;
  sidr_req.envelope.transaction_id = 0x102;
  sidr_req.request_id = 0x1234;
  sidr_req.partition_key = 0xffff;
  sidr_req.service_id = 0x00000000011112b7;
  out.push_back(sidr_req);

  SidrRepRepr sidr_rep;
  sidr_rep.envelope.transaction_id = 0x102;
  sidr_rep.request_id = 0x1234;
  sidr_rep.ece = {0xc903, 0};
  sidr_rep.qpn = 0x45;
  sidr_rep.service_id = 0x00000000011112b7;
  sidr_rep.qkey = 0x01234567;
  out.push_back(sidr_rep);

  LapRepr lap;
  lap.envelope.transaction_id = 0x103;
  lap.local_comm_id = 0x11223344;
  lap.remote_comm_id = 0x55667788;
  lap.remote_qpn = 0x456;
  lap.remote_cm_response_timeout = 20;
  lap.alternate = SamplePath(4);
  out.push_back(lap);

  AprRepr apr;
  apr.envelope.transaction_id = 0x103;
  apr.local_comm_id = 0x55667788;
  apr.remote_comm_id = 0x11223344;
  apr.status = ApStatus::kPathIsCurrent;
  out.push_back(apr);
  return out;
}

std::vector<std::array<uint8_t, 256>> SampleCmMads() {
  std::vector<std::array<uint8_t, 256>> out;
  for (const CmMessage& m : SampleCmMessages()) {
    std::array<uint8_t, 256> mad{};
    if (!EmitCm(m, mad).ok()) std::abort();  // a bug in the samples, not input
    out.push_back(mad);
  }
  return out;
}

}  // namespace uscm::mad::wire

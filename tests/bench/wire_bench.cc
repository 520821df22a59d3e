// Wire-layer speed: Parse and Emit per message (REQ, REP, REJ, PathRecord,
// MCMemberRecord), and, in the same run, the same record encode/decode done
// with libibmad's field API (mad_encode_field / mad_decode_field) as the
// baseline. Report ratios, not absolute times:
//   PathRecord:  BM_Ibmad_PathRecord_EncodeDecode_6Fields / BM_PathRecord_EmitParse_6Fields
//                (same six fields: libibmad defines no other PathRecord fields), and
//                ... / BM_PathRecord_EmitParse (all 21 fields: ours does more work)
//   REQ:         BM_Req_EmitParse (target: under 100 ns)
#include <infiniband/mad.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "benchmark/benchmark.h"
#include "mad/gid.h"
#include "mad/wire/cm_rej.h"
#include "mad/wire/cm_rep.h"
#include "mad/wire/cm_req.h"
#include "mad/wire/view.h"
#include "mad/wire/mcmember_record.h"
#include "mad/wire/path_record.h"
#include "mad/wire/view.h"

namespace uscm::mad::wire {
namespace {

void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "wire_bench: %s failed\n", what);
    std::abort();
  }
}

PathRecord SamplePath() {
  PathRecord r;
  r.service_id = 0x0000000001061234;
  r.dgid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c3);
  r.sgid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c4);
  r.dlid = 0x11;
  r.slid = 0x22;
  r.flow_label = 0xabc;
  r.hop_limit = 64;
  r.reversible = true;
  r.numb_path = 1;
  r.pkey = 0xffff;
  r.sl = 5;
  r.mtu_selector = Selector::kExactly;
  r.mtu = Mtu::k4096;
  r.rate_selector = Selector::kExactly;
  r.rate = 16;
  r.packet_life_time_selector = Selector::kExactly;
  r.packet_life_time = 18;
  return r;
}

McMemberRecord SampleMc() {
  McMemberRecord r;
  r.mgid = Gid::FromParts(0xff124001ffff0000, 0x00000000e00000fb);
  r.port_gid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c3);
  r.qkey = 0x01234567;
  r.mlid = 0xc001;
  r.mtu = Mtu::k2048;
  r.pkey = 0xffff;
  r.rate = 3;
  r.sl = 3;
  r.flow_label = 0xabc;
  r.hop_limit = 0x40;
  r.scope = McScope::kLinkLocal;
  r.join_state = JoinState(JoinState::kFullMember);
  return r;
}

ReqRepr SampleReq() {
  ReqRepr r;
  r.envelope.transaction_id = 0x0000000111223344;
  r.local_comm_id = 0x11223344;
  r.service_id = 0x0000000001061234;
  r.local_ca_guid = 0x0002c90300a1b2c3;
  r.local_qpn = 0x123456;
  r.responder_resources = 4;
  r.initiator_depth = 4;
  r.remote_cm_response_timeout = 20;
  r.starting_psn = 0xabcdef;
  r.local_cm_response_timeout = 20;
  r.retry_count = 7;
  r.partition_key = 0xffff;
  r.path_mtu = PathMtu::k4096;
  r.rnr_retry_count = 7;
  r.max_cm_retries = 15;
  r.primary.local_lid = 0x11;
  r.primary.remote_lid = 0x22;
  r.primary.local_gid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c3);
  r.primary.remote_gid = Gid::FromParts(0xfe80000000000000, 0x0002c90300a1b2c4);
  r.primary.packet_rate = 16;
  r.primary.hop_limit = 1;
  r.primary.subnet_local = true;
  r.primary.local_ack_timeout = 18;
  const uint8_t pd[56] = {0x00, 0x40};  // a CMA header's first bytes
  r.private_data = PrivateData(pd);
  return r;
}

RepRepr SampleRep() {
  RepRepr r;
  r.envelope.transaction_id = 0x0000000111223344;
  r.local_comm_id = 0x55667788;
  r.remote_comm_id = 0x11223344;
  r.local_qpn = 0x654321;
  r.starting_psn = 0x123456;
  r.responder_resources = 4;
  r.initiator_depth = 4;
  r.target_ack_delay = 15;
  r.rnr_retry_count = 7;
  r.local_ca_guid = 0x0002c90300a1b2c4;
  return r;
}

RejRepr SampleRej() {
  RejRepr r;
  r.envelope.transaction_id = 0x0000000111223344;
  r.local_comm_id = 0x55667788;
  r.remote_comm_id = 0x11223344;
  const uint8_t pd[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  r.private_data = PrivateData(pd);
  return r;
}

// --- Ours: whole CM messages ---------------------------------------------

template <typename Repr>
void EmitBench(benchmark::State& state, const Repr& repr) {
  std::array<uint8_t, 256> buf;
  for (auto _ : state) {
    absl::Status s = repr.Emit(buf);
    benchmark::DoNotOptimize(s);
    benchmark::ClobberMemory();
  }
}

template <typename Repr>
void ParseBench(benchmark::State& state, const Repr& repr) {
  std::array<uint8_t, 256> buf;
  Check(repr.Emit(buf).ok(), "Emit");
  Check(Repr::Parse(buf).ok(), "Parse");
  for (auto _ : state) {
    auto r = Repr::Parse(buf);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
}

template <typename Repr>
void EmitParseBench(benchmark::State& state, const Repr& repr) {
  std::array<uint8_t, 256> buf;
  for (auto _ : state) {
    absl::Status s = repr.Emit(buf);
    benchmark::DoNotOptimize(s);
    auto r = Repr::Parse(buf);
    benchmark::DoNotOptimize(r);
    benchmark::ClobberMemory();
  }
}

void BM_Req_Emit(benchmark::State& s) { EmitBench(s, SampleReq()); }
void BM_Req_Parse(benchmark::State& s) { ParseBench(s, SampleReq()); }
void BM_Req_EmitParse(benchmark::State& s) { EmitParseBench(s, SampleReq()); }
void BM_Rep_Emit(benchmark::State& s) { EmitBench(s, SampleRep()); }
void BM_Rep_Parse(benchmark::State& s) { ParseBench(s, SampleRep()); }
void BM_Rej_Emit(benchmark::State& s) { EmitBench(s, SampleRej()); }
void BM_Rej_Parse(benchmark::State& s) { ParseBench(s, SampleRej()); }
BENCHMARK(BM_Req_Emit);
BENCHMARK(BM_Req_Parse);
BENCHMARK(BM_Req_EmitParse);
BENCHMARK(BM_Rep_Emit);
BENCHMARK(BM_Rep_Parse);
BENCHMARK(BM_Rej_Emit);
BENCHMARK(BM_Rej_Parse);

// --- Ours: SA records and whole SA MADs ------------------------------------

PathRecordMad SamplePathMad() {
  PathRecordMad m;
  m.envelope.method = static_cast<uint8_t>(Method::kGetResp);
  m.envelope.attribute_offset = 8;
  m.component_mask = PathRecordMask::kServiceId | PathRecordMask::kDgid | PathRecordMask::kSgid;
  m.record = SamplePath();
  return m;
}

McMemberRecordMad SampleMcMad() {
  McMemberRecordMad m;
  m.envelope.method = static_cast<uint8_t>(Method::kSet);
  m.component_mask = McMemberRecordMask::kMgid | McMemberRecordMask::kPortGid |
                     McMemberRecordMask::kJoinState;
  m.record = SampleMc();
  return m;
}

void BM_PathRecord_Emit(benchmark::State& s) { EmitBench(s, SamplePath()); }
void BM_PathRecord_Parse(benchmark::State& s) { ParseBench(s, SamplePath()); }
void BM_PathRecord_EmitParse(benchmark::State& s) { EmitParseBench(s, SamplePath()); }
void BM_PathRecordMad_Emit(benchmark::State& s) { EmitBench(s, SamplePathMad()); }
void BM_PathRecordMad_Parse(benchmark::State& s) { ParseBench(s, SamplePathMad()); }
void BM_McMemberRecord_Emit(benchmark::State& s) { EmitBench(s, SampleMc()); }
void BM_McMemberRecord_Parse(benchmark::State& s) { ParseBench(s, SampleMc()); }
void BM_McMemberRecord_EmitParse(benchmark::State& s) { EmitParseBench(s, SampleMc()); }
void BM_McMemberRecordMad_Emit(benchmark::State& s) { EmitBench(s, SampleMcMad()); }
void BM_McMemberRecordMad_Parse(benchmark::State& s) { ParseBench(s, SampleMcMad()); }
BENCHMARK(BM_PathRecord_Emit);
BENCHMARK(BM_PathRecord_Parse);
BENCHMARK(BM_PathRecord_EmitParse);
BENCHMARK(BM_PathRecordMad_Emit);
BENCHMARK(BM_PathRecordMad_Parse);
BENCHMARK(BM_McMemberRecord_Emit);
BENCHMARK(BM_McMemberRecord_Parse);
BENCHMARK(BM_McMemberRecord_EmitParse);
BENCHMARK(BM_McMemberRecordMad_Emit);
BENCHMARK(BM_McMemberRecordMad_Parse);

// --- Same six PathRecord fields, ours vs libibmad ---------------------------
// libibmad defines exactly these PathRecord fields (IB_SA_PR_*_F): DGID, SGID,
// DLID, SLID, NumbPath, SL, at record-relative offsets.

struct SixFields {
  std::array<uint8_t, 16> dgid, sgid;
  uint32_t dlid, slid, numb_path, sl;
};

SixFields SampleSix() {
  const PathRecord p = SamplePath();
  return SixFields{p.dgid.raw, p.sgid.raw, p.dlid, p.slid, p.numb_path, p.sl};
}

void BM_PathRecord_EmitParse_6Fields(benchmark::State& state) {
  namespace t = path_record;
  SixFields in = SampleSix();
  std::array<uint8_t, 64> buf{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(in);
    FieldWriter w("PathRecord", buf.data());
    w.SetBytes(t::kDgid, in.dgid);
    w.SetBytes(t::kSgid, in.sgid);
    w.Set(t::kDlid, in.dlid);
    w.Set(t::kSlid, in.slid);
    w.Set(t::kNumbPath, in.numb_path);
    w.Set(t::kSl, in.sl);
    benchmark::DoNotOptimize(w.status());
    benchmark::ClobberMemory();
    const FieldView v = FieldView::Unchecked(buf.data());
    SixFields out;
    std::memcpy(out.dgid.data(), v.Bytes(t::kDgid).data(), 16);
    std::memcpy(out.sgid.data(), v.Bytes(t::kSgid).data(), 16);
    out.dlid = v.Get(t::kDlid);
    out.slid = v.Get(t::kSlid);
    out.numb_path = v.Get(t::kNumbPath);
    out.sl = v.Get(t::kSl);
    benchmark::DoNotOptimize(out);
  }
}

void BM_Ibmad_PathRecord_EncodeDecode_6Fields(benchmark::State& state) {
  SixFields in = SampleSix();
  std::array<uint8_t, 64> buf{};
  // Same bytes as ours, checked once.
  {
    mad_encode_field(buf.data(), IB_SA_PR_DGID_F, in.dgid.data());
    mad_encode_field(buf.data(), IB_SA_PR_DLID_F, &in.dlid);
    mad_encode_field(buf.data(), IB_SA_PR_SL_F, &in.sl);
    std::array<uint8_t, 64> ours{};
    Check(SamplePath().Emit(ours).ok(), "PathRecord Emit");
    Check(std::memcmp(buf.data() + 8, ours.data() + 8, 16) == 0 && buf[41] == ours[41] &&
              (buf[53] & 0x0f) == (ours[53] & 0x0f),
          "libibmad and ours agree on DGID / DLID / SL");
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(in);
    mad_encode_field(buf.data(), IB_SA_PR_DGID_F, in.dgid.data());
    mad_encode_field(buf.data(), IB_SA_PR_SGID_F, in.sgid.data());
    mad_encode_field(buf.data(), IB_SA_PR_DLID_F, &in.dlid);
    mad_encode_field(buf.data(), IB_SA_PR_SLID_F, &in.slid);
    mad_encode_field(buf.data(), IB_SA_PR_NPATH_F, &in.numb_path);
    mad_encode_field(buf.data(), IB_SA_PR_SL_F, &in.sl);
    benchmark::ClobberMemory();
    SixFields out;
    mad_decode_field(buf.data(), IB_SA_PR_DGID_F, out.dgid.data());
    mad_decode_field(buf.data(), IB_SA_PR_SGID_F, out.sgid.data());
    mad_decode_field(buf.data(), IB_SA_PR_DLID_F, &out.dlid);
    mad_decode_field(buf.data(), IB_SA_PR_SLID_F, &out.slid);
    mad_decode_field(buf.data(), IB_SA_PR_NPATH_F, &out.numb_path);
    mad_decode_field(buf.data(), IB_SA_PR_SL_F, &out.sl);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_PathRecord_EmitParse_6Fields);
BENCHMARK(BM_Ibmad_PathRecord_EncodeDecode_6Fields);

// --- MCMemberRecord: the 12 fields libibmad defines, vs ours (all 18) ------

void BM_Ibmad_McMemberRecord_EncodeDecode_12Fields(benchmark::State& state) {
  const McMemberRecord m = SampleMc();
  struct {
    std::array<uint8_t, 16> mgid, port_gid;
    uint32_t qkey, mlid, sl, mtu, rate, tclass, pkey, flow, join, proxy;
  } in{m.mgid.raw, m.port_gid.raw, m.qkey, m.mlid, m.sl, static_cast<uint32_t>(m.mtu),
       m.rate, m.tclass, m.pkey, m.flow_label, m.join_state.bits(), m.proxy_join}, out;
  std::array<uint8_t, 64> buf{};
  for (auto _ : state) {
    benchmark::DoNotOptimize(in);
    mad_encode_field(buf.data(), IB_SA_MCM_MGID_F, in.mgid.data());
    mad_encode_field(buf.data(), IB_SA_MCM_PORTGID_F, in.port_gid.data());
    mad_encode_field(buf.data(), IB_SA_MCM_QKEY_F, &in.qkey);
    mad_encode_field(buf.data(), IB_SA_MCM_MLID_F, &in.mlid);
    mad_encode_field(buf.data(), IB_SA_MCM_SL_F, &in.sl);
    mad_encode_field(buf.data(), IB_SA_MCM_MTU_F, &in.mtu);
    mad_encode_field(buf.data(), IB_SA_MCM_RATE_F, &in.rate);
    mad_encode_field(buf.data(), IB_SA_MCM_TCLASS_F, &in.tclass);
    mad_encode_field(buf.data(), IB_SA_MCM_PKEY_F, &in.pkey);
    mad_encode_field(buf.data(), IB_SA_MCM_FLOW_LABEL_F, &in.flow);
    mad_encode_field(buf.data(), IB_SA_MCM_JOIN_STATE_F, &in.join);
    mad_encode_field(buf.data(), IB_SA_MCM_PROXY_JOIN_F, &in.proxy);
    benchmark::ClobberMemory();
    mad_decode_field(buf.data(), IB_SA_MCM_MGID_F, out.mgid.data());
    mad_decode_field(buf.data(), IB_SA_MCM_PORTGID_F, out.port_gid.data());
    mad_decode_field(buf.data(), IB_SA_MCM_QKEY_F, &out.qkey);
    mad_decode_field(buf.data(), IB_SA_MCM_MLID_F, &out.mlid);
    mad_decode_field(buf.data(), IB_SA_MCM_SL_F, &out.sl);
    mad_decode_field(buf.data(), IB_SA_MCM_MTU_F, &out.mtu);
    mad_decode_field(buf.data(), IB_SA_MCM_RATE_F, &out.rate);
    mad_decode_field(buf.data(), IB_SA_MCM_TCLASS_F, &out.tclass);
    mad_decode_field(buf.data(), IB_SA_MCM_PKEY_F, &out.pkey);
    mad_decode_field(buf.data(), IB_SA_MCM_FLOW_LABEL_F, &out.flow);
    mad_decode_field(buf.data(), IB_SA_MCM_JOIN_STATE_F, &out.join);
    mad_decode_field(buf.data(), IB_SA_MCM_PROXY_JOIN_F, &out.proxy);
    benchmark::DoNotOptimize(out);
  }
}
BENCHMARK(BM_Ibmad_McMemberRecord_EncodeDecode_12Fields);

}  // namespace
}  // namespace uscm::mad::wire

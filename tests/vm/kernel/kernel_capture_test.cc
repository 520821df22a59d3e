// The reference capture of uscm against the kernel CM (tests/vm/fixtures/
// kernel_interop_cm.pcap, recorded by kernel_interop.sh with
// USCM_VM_CAPTURE, reduced to the QP1 frames): every CM MAD on the link, sent
// by the kernel (VM a, 192.168.78.1) or by uscm (VM b, 192.168.78.2), must
// parse with uscm's decoder and emit back byte for byte, and the kernel's
// messages must carry the field values docs/VM.md lists.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "mad/capture/pcap_reader.h"
#include "mad/capture/roce_frame.h"
#include "mad/wire/cm_message.h"
#include "mad/wire/cma_header.h"

namespace uscm::vmtest {
namespace {

using mad::capture::CaptureLinkType;
using mad::wire::CmAttr;

constexpr char kFixture[] = "tests/vm/fixtures/kernel_interop_cm.pcap";
constexpr uint8_t kKernelIp = 1;  // 192.168.78.1 (VM a); uscm is .2

struct CmFrame {
  bool from_kernel = false;
  mad::capture::RoceV2Frame frame;
  std::vector<uint8_t> mad;
  mad::wire::CmMessage message;
};

std::vector<CmFrame> LoadCmFrames() {
  std::vector<CmFrame> out;
  absl::StatusOr<mad::capture::PcapContents> pcap = mad::capture::ReadPcapFile(kFixture);
  EXPECT_TRUE(pcap.ok()) << pcap.status();
  if (!pcap.ok()) return out;
  EXPECT_EQ(pcap->link_type, CaptureLinkType::kEthernet);
  for (size_t i = 0; i < pcap->records.size(); ++i) {
    const std::vector<uint8_t>& bytes = pcap->records[i].packet;
    absl::StatusOr<mad::capture::RoceV2Frame> f = mad::capture::ParseRoceV2Frame(bytes);
    if (!f.ok()) {
      EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound) << "record " << i << ": "
                                                                << f.status();
      continue;
    }
    if (f->dest_qp != 1) continue;
    SCOPED_TRACE(absl::StrCat("record ", i));
    EXPECT_TRUE(f->has_deth);
    EXPECT_EQ(f->qkey, 0x80010000u);
    EXPECT_EQ(f->src_qp, 1u);
    EXPECT_EQ(f->pkey, 0xFFFF);
    EXPECT_EQ(f->dst_port, 4791);
    EXPECT_FALSE(f->ipv6);
    EXPECT_EQ(f->hop_limit, 64);
    EXPECT_EQ(f->traffic_class, 0);
    if (f->payload.size() != 256 || f->payload[1] != 0x07) {
      ADD_FAILURE() << "QP1 payload of " << f->payload.size() << " bytes, class "
                    << (f->payload.empty() ? -1 : f->payload[1]);
      continue;
    }
    CmFrame c;
    c.from_kernel = f->src_ip[15] == kKernelIp;
    c.frame = *f;
    c.mad.assign(f->payload.begin(), f->payload.end());
    absl::StatusOr<mad::wire::CmMessage> m = mad::wire::ParseAnyCm(c.mad);
    if (!m.ok()) {
      ADD_FAILURE() << "uscm cannot parse " << (c.from_kernel ? "the kernel's" : "its own")
                    << " MAD: " << m.status();
      continue;
    }
    c.message = *m;
    out.push_back(std::move(c));
  }
  return out;
}

template <typename T>
std::vector<T> FromKernel(const std::vector<CmFrame>& frames, bool kernel) {
  std::vector<T> out;
  for (const CmFrame& f : frames) {
    if (f.from_kernel == kernel && std::holds_alternative<T>(f.message)) {
      out.push_back(std::get<T>(f.message));
    }
  }
  return out;
}

TEST(KernelCaptureTest, EveryCmMadEmitsBackByteForByte) {
  const std::vector<CmFrame> frames = LoadCmFrames();
  ASSERT_FALSE(frames.empty());
  for (const CmFrame& f : frames) {
    std::vector<uint8_t> again(256, 0xA5);  // poison: a field Emit forgets shows up
    ASSERT_TRUE(mad::wire::EmitCm(f.message, again).ok());
    EXPECT_EQ(again, f.mad) << CmAttrName(AttrOf(f.message)) << " from "
                            << (f.from_kernel ? "the kernel" : "uscm");
  }
}

// The message sequence of the six checks of kernel_interop.sh, k = kernel
// (VM a), u = uscm (VM b).
constexpr char kSequence[] =
    // 1. uscm -> rping -s; uscm disconnects
    "u:REQ k:REP u:RTU u:DREQ k:DREP "
    // 2. rping -c -> uscm; the kernel disconnects
    "k:REQ u:REP k:RTU k:DREQ u:DREP "
    // 3. uscm -> ucmatose server; the kernel disconnects
    "u:REQ k:REP u:RTU k:DREQ u:DREP "
    // 4. ucmatose client -> uscm; uscm disconnects
    "k:REQ u:REP k:RTU u:DREQ k:DREP "
    // 5. uscm rejects the kernel's REQ; 6. the kernel rejects uscm's
    "k:REQ u:REJ u:REQ k:REJ";

TEST(KernelCaptureTest, HandshakeSequence) {
  std::vector<std::string> seq;
  for (const CmFrame& f : LoadCmFrames()) {
    seq.push_back(absl::StrCat(f.from_kernel ? "k:" : "u:", CmAttrName(AttrOf(f.message))));
  }
  EXPECT_EQ(absl::StrJoin(seq, " "), kSequence);
}

TEST(KernelCaptureTest, KernelReqFields) {
  const auto reqs = FromKernel<mad::wire::ReqRepr>(LoadCmFrames(), true);
  ASSERT_FALSE(reqs.empty());
  for (const mad::wire::ReqRepr& r : reqs) {
    EXPECT_EQ(r.service_id >> 16, 0x0000000001060000u >> 16);  // RDMA_PS_TCP
    EXPECT_EQ(r.local_qkey, 0u);
    EXPECT_EQ(r.responder_resources, 1);
    EXPECT_EQ(r.initiator_depth, 1);
    EXPECT_EQ(r.remote_cm_response_timeout, 20);
    EXPECT_EQ(r.local_cm_response_timeout, 20);
    EXPECT_EQ(r.transport_service, mad::wire::TransportService::kRc);
    EXPECT_EQ(r.partition_key, 0xFFFF);
    EXPECT_EQ(r.path_mtu, mad::wire::PathMtu::k1024);
    EXPECT_EQ(r.max_cm_retries, 15);
    EXPECT_EQ(r.primary.local_lid, 0xFFFF);
    EXPECT_EQ(r.primary.remote_lid, 0xFFFF);
    EXPECT_EQ(r.primary.local_gid.ToString(), "::ffff:192.168.78.1");
    EXPECT_EQ(r.primary.remote_gid.ToString(), "::ffff:192.168.78.2");
    EXPECT_EQ(r.primary.hop_limit, 64);
    EXPECT_FALSE(r.primary.subnet_local);
    EXPECT_FALSE(r.alternate.has_value());
    absl::StatusOr<mad::wire::CmaHeader> h = mad::wire::CmaHeader::Parse(r.private_data.bytes());
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->ip_version, 4);
    EXPECT_EQ(h->src_ipv4(), 0xC0A84E01u);
    EXPECT_EQ(h->dst_ipv4(), 0xC0A84E02u);
    EXPECT_NE(h->src_port, 0);
  }
}

TEST(KernelCaptureTest, KernelRepFields) {
  const auto reps = FromKernel<mad::wire::RepRepr>(LoadCmFrames(), true);
  ASSERT_FALSE(reps.empty());
  for (const mad::wire::RepRepr& r : reps) {
    EXPECT_EQ(r.local_qkey, 0u);
    EXPECT_EQ(r.responder_resources, 1);
    EXPECT_EQ(r.initiator_depth, 1);
    EXPECT_EQ(r.target_ack_delay, 15);  // rxe's ack delay
    EXPECT_EQ(r.rnr_retry_count, 7);
    EXPECT_EQ(r.failover_accepted, mad::wire::FailoverAccepted::kAccepted);
    EXPECT_NE(r.local_ca_guid, 0u);
  }
}

TEST(KernelCaptureTest, RejectsCarryTheirPrivateData) {
  const std::vector<CmFrame> frames = LoadCmFrames();
  const auto text = [](const mad::wire::RejRepr& r, size_t n) {
    auto b = r.private_data.bytes();
    return std::string(b.begin(), b.begin() + std::min(n, b.size()));
  };
  const auto kernel = FromKernel<mad::wire::RejRepr>(frames, true);
  const auto uscm = FromKernel<mad::wire::RejRepr>(frames, false);
  ASSERT_EQ(kernel.size(), 1u);
  ASSERT_EQ(uscm.size(), 1u);
  EXPECT_EQ(kernel[0].reason, mad::wire::RejReason::kConsumerReject);
  EXPECT_EQ(kernel[0].message_rejected, mad::wire::RejMessage::kReq);
  EXPECT_EQ(text(kernel[0], 14), "kernel-says-no");
  EXPECT_EQ(uscm[0].reason, mad::wire::RejReason::kConsumerReject);
  EXPECT_EQ(text(uscm[0], 12), "uscm-says-no");
}

}  // namespace
}  // namespace uscm::vmtest

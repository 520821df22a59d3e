#include "cm/router/frame.h"

#include <cerrno>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "mad/status_errno.h"

namespace uscm::router {
namespace {

TEST(FrameTest, MadRoundTripKeepsAddressAndBytes) {
  mad::MadAddress a;
  a.lid = 0x1234;
  a.qpn = 0xABCDEF;
  a.qkey = 0x80010000;
  a.pkey_index = 3;
  a.sl = 5;
  a.path_bits = 1;
  a.has_grh = true;
  a.gid = mad::Gid::FromParts(0xfe80000000000000ull, 0x0002c903000a0b0cull);
  a.hop_limit = 7;
  a.traffic_class = 9;
  a.flow_label = 0xFFFFF;
  a.sgid_index = 2;
  std::vector<uint8_t> mad(256);
  for (size_t i = 0; i < mad.size(); ++i) mad[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint8_t> frame;
  EncodeMad(a, mad, &frame);
  ASSERT_EQ(frame.size(), kFrameHeaderBytes + kAddressBytes + 256);
  auto m = DecodeMad(frame);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->address, a);
  EXPECT_EQ(std::vector<uint8_t>(m->mad.begin(), m->mad.end()), mad);
}

TEST(FrameTest, EveryTruncationOfAMadFrameIsAnError) {
  std::vector<uint8_t> mad(24, 0xAA);
  std::vector<uint8_t> frame;
  EncodeMad(mad::MadAddress{}, mad, &frame);
  for (size_t n = 0; n < frame.size(); ++n) {
    auto m = DecodeMad(std::span<const uint8_t>(frame.data(), n));
    EXPECT_FALSE(m.ok()) << "accepted " << n << " bytes";
  }
  EXPECT_EQ(std::string(DecodeMad(std::span<const uint8_t>(frame.data(), 25)).status().message()),
            "router MAD frame: 25 bytes end inside address.gid");
  EXPECT_EQ(DecodeMad(std::span<const uint8_t>(frame.data(), kFrameHeaderBytes + 38 + 23))
                .status()
                .message(),
            "router MAD frame: MAD is 23 bytes; at least the 24-byte header is needed");
}

TEST(FrameTest, HeaderChecks) {
  std::vector<uint8_t> f = EncodeHello(Hello{42});
  EXPECT_EQ(PeekFrame(std::span<const uint8_t>(f.data(), 7)).status().message(),
            "router frame: 7 bytes; the header alone is 8");
  auto bad = f;
  bad[0] = 'X';
  EXPECT_EQ(PeekFrame(bad).status().message(), "router frame: bad magic (not a uscmd peer)");
  bad = f;
  bad[2] = 9;
  EXPECT_EQ(PeekFrame(bad).status().code(), absl::StatusCode::kFailedPrecondition);
  bad = f;
  bad[3] = 99;
  EXPECT_EQ(PeekFrame(bad).status().message(), "router frame: unknown type 99");
  EXPECT_EQ(DecodeWelcome(f).status().message(),
            "router frame: type 1 where welcome (2) was expected");
  auto h = DecodeHello(f);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->pid, 42u);
}

TEST(FrameTest, WelcomeRoundTrip) {
  Welcome wl;
  wl.slot = 7;
  wl.comm_id_prefix_bits = 8;
  wl.comm_id_prefix = 7;
  wl.kernel_rmpp = true;
  wl.max_receive_size = 4096;
  wl.port.ca_name = "sim:host1";
  wl.port.port_num = 2;
  wl.port.lid = 17;
  wl.port.sm_lid = 1;
  wl.port.node_guid = 0x1122334455667788ull;
  wl.port.gid = mad::Gid::FromParts(0xfe80000000000000ull, 9);
  wl.port.pkeys = {0xFFFF, 0x8001};
  auto d = DecodeWelcome(EncodeWelcome(wl));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->slot, 7);
  EXPECT_EQ(d->comm_id_prefix, 7u);
  EXPECT_TRUE(d->kernel_rmpp);
  EXPECT_EQ(d->max_receive_size, 4096u);
  EXPECT_EQ(d->port.ca_name, "sim:host1");
  EXPECT_EQ(d->port.port_num, 2);
  EXPECT_EQ(d->port.lid, 17);
  EXPECT_EQ(d->port.node_guid, 0x1122334455667788ull);
  EXPECT_EQ(d->port.gid, wl.port.gid);
  EXPECT_EQ(d->port.pkeys, (std::vector<uint16_t>{0xFFFF, 0x8001}));
  wl.slot = 0;
  EXPECT_EQ(DecodeWelcome(EncodeWelcome(wl)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FrameTest, ClaimReplyRefused) {
  ClaimFrame c{5, 0x1060000, ~uint64_t{0}, true};
  auto d = DecodeClaim(EncodeClaim(FrameType::kRelease, c));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->request, 5u);
  EXPECT_EQ(d->service_id, 0x1060000u);
  EXPECT_TRUE(d->reuse);
  auto r = DecodeReply(EncodeReply(ReplyFrame{5, absl::AlreadyExistsError("taken")}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, absl::AlreadyExistsError("taken"));
  auto ref = DecodeRefused(EncodeRefused(absl::PermissionDeniedError("not yours")));
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->why, absl::PermissionDeniedError("not yours"));
  EXPECT_FALSE(DecodeRefused(EncodeHello(Hello{})).ok());
}

// A claim carries the listener's address: the bytes after the service part.
TEST(FrameTest, ClaimCarriesTheListenersAddress) {
  ClaimFrame c{7, 0x1061D2F, ~uint64_t{0}, false, mad::ListenAddress::Ipv4(0xC0A84D65)};
  const std::vector<uint8_t> f = EncodeClaim(FrameType::kClaim, c);
  const std::vector<uint8_t> want = {
      0x55, 0x52, 4, 4, 0, 0, 0, 0,                    // "UR", version 4, claim
      7, 0, 0, 0,                                      // request
      0x2F, 0x1D, 0x06, 0x01, 0, 0, 0, 0,              // service ID (LE)
      0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,  // mask
      0,                                               // reuse
      4,                                               // family IPv4
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,              // 12 zero bytes
      192, 168, 77, 101,                               // 192.168.77.101
      1,                                               // af_only
      2,                                               // kind: listen
  };
  EXPECT_EQ(f, want);
  auto d = DecodeClaim(f);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->address, c.address);
  for (size_t n = 8; n < f.size(); ++n) {
    auto t = DecodeClaim(std::span<const uint8_t>(f.data(), n));
    ASSERT_FALSE(t.ok()) << n;
    EXPECT_NE(t.status().message().find("end inside"), absl::string_view::npos) << t.status();
  }
  EXPECT_NE(DecodeClaim(std::span<const uint8_t>(f.data(), 38)).status().message().find(
                "address.ip"),
            absl::string_view::npos);
  auto bad = [&](size_t at, uint8_t value) {
    std::vector<uint8_t> g = f;
    g[at] = value;
    return DecodeClaim(g).status();
  };
  EXPECT_NE(bad(29, 5).message().find("address family 5"), absl::string_view::npos);
  EXPECT_NE(bad(30, 1).message().find("before its last 4"), absl::string_view::npos);
  EXPECT_NE(bad(46, 2).message().find("af_only 2"), absl::string_view::npos);
  EXPECT_NE(bad(28, 3).message().find("reuse 3"), absl::string_view::npos);
  EXPECT_NE(bad(47, 0).message().find("kind 0"), absl::string_view::npos);
  EXPECT_NE(bad(47, 3).message().find("kind 3"), absl::string_view::npos);
  std::vector<uint8_t> longer = f;
  longer.push_back(0);
  EXPECT_NE(DecodeClaim(longer).status().message().find("bytes after"), absl::string_view::npos);
  // No address: neither IP nor af_only.
  ClaimFrame none{8, 0x1061D2F, ~uint64_t{0}, false};
  std::vector<uint8_t> g = EncodeClaim(FrameType::kClaim, none);
  ASSERT_TRUE(DecodeClaim(g).ok());
  g[45] = 1;
  EXPECT_NE(DecodeClaim(g).status().message().find("family 0 (none) with an IP"),
            absl::string_view::npos);
  // A version 2 peer (before bind claims) is told which version this build speaks.
  g = EncodeClaim(FrameType::kClaim, none);
  g[2] = 2;
  EXPECT_NE(DecodeClaim(g).status().message().find("this build speaks version 4"),
            absl::string_view::npos);
}

// A bind claim: the same body with kind 1; both kinds round-trip.
TEST(FrameTest, AClaimSaysWhetherItBindsOrListens) {
  ClaimFrame c{9, 0x1061D2F, ~uint64_t{0}, true, mad::ListenAddress::Ipv4(0xC0A84D65),
               mad::ClaimKind::kBind};
  std::vector<uint8_t> f = EncodeClaim(FrameType::kClaim, c);
  ASSERT_EQ(f.size(), 48u);
  EXPECT_EQ(f[47], 1);
  auto d = DecodeClaim(f);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, mad::ClaimKind::kBind);
  EXPECT_TRUE(d->reuse);
  c.kind = mad::ClaimKind::kListen;
  d = DecodeClaim(EncodeClaim(FrameType::kRelease, c));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, mad::ClaimKind::kListen);
}

TEST(FrameTest, AReplyCarriesTheErrno) {
  absl::Status s = mad::WithErrno(absl::AlreadyExistsError("wildcard"), EADDRNOTAVAIL);
  auto r = DecodeReply(EncodeReply(ReplyFrame{9, s}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(mad::ErrnoOf(r->status), EADDRNOTAVAIL);
  std::vector<uint8_t> f = EncodeReply(ReplyFrame{9, s});
  f[f.size() - 4] = 0xFF;  // errno 0x...FF: fine
  f[f.size() - 3] = 0xFF;  // 0xFFFF > 4095
  EXPECT_NE(DecodeReply(f).status().message().find("at most 4095"), absl::string_view::npos);
  f = EncodeReply(ReplyFrame{9, absl::OkStatus()});
  f[f.size() - 4] = 98;  // an errno with OK
  EXPECT_FALSE(DecodeReply(f).ok());
}

// A lease asks for a block of one port space; its reply names the ports.
TEST(FrameTest, ALeaseAndItsReply) {
  const std::vector<uint8_t> f = EncodeLease(LeaseFrame{5, 0x0106});
  EXPECT_EQ(f, (std::vector<uint8_t>{
                   0x55, 0x52, 4, 8, 0, 0, 0, 0,  // "UR", version 4, lease
                   5, 0, 0, 0,                    // request
                   0x06, 0x01,                    // RDMA_PS_TCP
               }));
  auto l = DecodeLease(f);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->port_space, 0x0106);
  for (size_t cut = 8; cut < f.size(); ++cut) {
    EXPECT_FALSE(DecodeLease(std::span<const uint8_t>(f.data(), cut)).ok()) << cut;
  }
  EXPECT_EQ(DecodeLease(EncodeLease(LeaseFrame{5, 0x0107})).status().message(),
            "router lease frame: port space 0x107; expected 0x0002 (IPOIB), 0x0106 (TCP), "
            "0x0111 (UDP) or 0x013F (IB)");

  auto r = DecodeLeaseReply(EncodeLeaseReply(LeaseReplyFrame{5, absl::OkStatus(), 32768, 256}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->first_port, 32768);
  EXPECT_EQ(r->ports, 256);
  const absl::Status full = mad::WithErrno(absl::ResourceExhaustedError("no block"), ENOMEM);
  r = DecodeLeaseReply(EncodeLeaseReply(LeaseReplyFrame{6, full}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(mad::ErrnoOf(r->status), ENOMEM);
  // Ports with an error, none with OK, or past 65535: refused.
  EXPECT_FALSE(DecodeLeaseReply(EncodeLeaseReply(LeaseReplyFrame{6, full, 1, 1})).ok());
  EXPECT_FALSE(DecodeLeaseReply(EncodeLeaseReply(LeaseReplyFrame{6, absl::OkStatus()})).ok());
  EXPECT_FALSE(
      DecodeLeaseReply(EncodeLeaseReply(LeaseReplyFrame{6, absl::OkStatus(), 65535, 2})).ok());
}

}  // namespace
}  // namespace uscm::router

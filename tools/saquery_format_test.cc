#include "tools/saquery_format.h"

#include <array>
#include <cstdint>

#include "gtest/gtest.h"

namespace uscm::tools {
namespace {

using mad::wire::McMemberRecord;
using mad::wire::PathRecord;
using mad::wire::Selector;

mad::Gid LinkLocal(uint8_t a, uint8_t b) {
  mad::Gid g;
  g.raw[0] = 0xfe;
  g.raw[1] = 0x80;
  g.raw[13] = a;
  g.raw[15] = b;
  return g;
}

// OpenSM's answer to `saquery -p --src-to-dst 3:4` on tests/topologies/ibsim-2hosts.net,
// from the record's bytes: MTU / rate / PacketLifeTime bytes carry the selector
// "exactly" (2) in their top bits.
TEST(SaqueryFormatTest, PathRecordAsSaqueryPrintsIt) {
  std::array<uint8_t, 64> b{};
  b[8] = 0xfe, b[9] = 0x80, b[21] = 0x10, b[23] = 0x05;   // DGID fe80::10:5
  b[24] = 0xfe, b[25] = 0x80, b[37] = 0x10, b[39] = 0x03;  // SGID fe80::10:3
  b[41] = 4;                                               // DLID
  b[43] = 3;                                               // SLID
  b[49] = 0x80;                                            // Reversible, NumbPath 0
  b[50] = 0xff, b[51] = 0xff;                              // P_Key
  b[54] = 0x84, b[55] = 0x83, b[56] = 0x92;                // MTU, Rate, PacketLifeTime
  auto pr = PathRecord::Parse(b);
  ASSERT_TRUE(pr.ok()) << pr.status();
  EXPECT_EQ(FormatPathRecord(*pr),
            "PathRecord dump:\n"
            "\t\tservice_id..............0x0000000000000000\n"
            "\t\tdgid....................fe80::10:5\n"
            "\t\tsgid....................fe80::10:3\n"
            "\t\tdlid....................4\n"
            "\t\tslid....................3\n"
            "\t\thop_flow_raw............0x0\n"
            "\t\ttclass..................0x0\n"
            "\t\tnum_path_revers.........0x80\n"
            "\t\tpkey....................0xFFFF\n"
            "\t\tqos_class...............0x0\n"
            "\t\tsl......................0x0\n"
            "\t\tmtu.....................0x84\n"
            "\t\trate....................0x83\n"
            "\t\tpkt_life................0x92\n"
            "\t\tpreference..............0x0\n"
            "\t\tresv2...................0x000000000000\n");
}

// saquery's formats: service_id lower-case %016x, pkey without padding,
// hop_flow_raw the whole word.
TEST(SaqueryFormatTest, PathRecordFormats) {
  PathRecord p;
  p.service_id = 0x1000000000ABCDEF;
  p.pkey = 0x7f;
  p.raw_traffic = true;
  p.flow_label = 0x12345;
  p.hop_limit = 0x40;
  p.mtu_selector = Selector::kBest;
  p.mtu = mad::wire::Mtu::k4096;
  p.rate_selector = Selector::kLessThan;
  p.rate = 7;
  const std::string text = FormatPathRecord(p);
  EXPECT_NE(text.find("service_id..............0x1000000000abcdef\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pkey....................0x7F\n"), std::string::npos) << text;
  EXPECT_NE(text.find("hop_flow_raw............0x81234540\n"), std::string::npos) << text;
  EXPECT_NE(text.find("mtu.....................0xC5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rate....................0x47\n"), std::string::npos) << text;
  EXPECT_NE(text.find("pkt_life................0x0\n"), std::string::npos) << text;
}

// OpenSM's IPoIB broadcast group as `saquery MCMR` prints it.
TEST(SaqueryFormatTest, McMemberRecordAsSaqueryPrintsIt) {
  McMemberRecord m;
  m.mgid.raw = {0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff};
  m.qkey = 0xb1b;
  m.mlid = 0xc000;
  m.mtu_selector = Selector::kExactly;
  m.mtu = mad::wire::Mtu::k2048;
  m.pkey = 0xffff;
  m.rate_selector = Selector::kExactly;
  m.rate = 3;
  m.packet_life_time_selector = Selector::kExactly;
  m.packet_life_time = 0x12;
  m.scope = mad::wire::McScope::kLinkLocal;
  EXPECT_EQ(FormatMcMemberRecord(m),
            "MCMember Record dump:\n"
            "\t\tMGID....................ff12:401b:ffff::ffff:ffff\n"
            "\t\tPortGid.................::\n"
            "\t\tqkey....................0xb1b\n"
            "\t\tmlid....................0xc000\n"
            "\t\tmtu.....................0x84\n"
            "\t\tTClass..................0x0\n"
            "\t\tpkey....................0xffff\n"
            "\t\trate....................0x83\n"
            "\t\tpkt_life................0x92\n"
            "\t\tSL......................0x0\n"
            "\t\tFlowLabel...............0x0\n"
            "\t\tHopLimit................0x0\n"
            "\t\tScope...................0x2\n"
            "\t\tJoinState...............0x0\n"
            "\t\tProxyJoin...............0x0\n");
  m.port_gid = LinkLocal(0x10, 0x03);
  m.join_state = mad::wire::JoinState(1);
  m.proxy_join = true;
  const std::string text = FormatMcMemberRecord(m);
  EXPECT_NE(text.find("PortGid.................fe80::10:3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("JoinState...............0x1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ProxyJoin...............0x1\n"), std::string::npos) << text;
}

}  // namespace
}  // namespace uscm::tools

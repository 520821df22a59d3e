#include "mad/sim/topology.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_format.h"

namespace uscm::sim {
namespace {

using ::testing::HasSubstr;

// Zeroes the file line numbers so a parsed topology compares with a built one.
Topology WithoutLines(Topology t) {
  for (TopoNode& n : t.nodes) {
    n.line = 0;
    for (TopoPort& p : n.ports) p.line = 0;
  }
  return t;
}

std::string ErrorOf(absl::string_view text) {
  absl::StatusOr<Topology> t = ParseNetFile(text, "t.net");
  EXPECT_FALSE(t.ok()) << "parsed although it should not:\n" << text;
  return t.ok() ? "" : std::string(t.status().message());
}

TEST(TopologyTest, ParsesTheCheckedInTwoHostsFile) {
  absl::StatusOr<Topology> t = LoadNetFile("tests/topologies/two-hosts.net");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(WithoutLines(*t), WithoutLines(TwoHostsOneSwitch()) ) << FormatNetFile(*t);
}

TEST(TopologyTest, ParsesIbsimExampleWithGuidsAsIbsimAssignsThem) {
  // ibsim net-examples/net.2sw2path4hca, abridged.
  constexpr absl::string_view kNet = R"(# comment
Switch	8 "Switch1"
[1]	"Hca1"[1]
[3]	"Switch2"[3]

Switch 8 "Switch2"
[3]	"Switch1"[3]
[1]	"Hca2"[1]

Hca	2 "Hca1"
[1]	"Switch1"[1]

Hca 	2 "Hca2"
[1]	"Switch2"[1]
)";
  absl::StatusOr<Topology> t = ParseNetFile(kNet);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->nodes.size(), 4u);
  const TopoNode& sw2 = t->nodes[1];
  EXPECT_EQ(sw2.type, NodeType::kSwitch);
  EXPECT_EQ(sw2.node_guid, 0x200001u);  // ibsim 0.10: switches from 0x200000
  EXPECT_EQ(sw2.PortGuid(3), 0x200001u);
  EXPECT_EQ(sw2.ports[3].remote_node, 0);
  EXPECT_EQ(sw2.ports[3].remote_port, 3);
  EXPECT_EQ(sw2.ports[1].line, 8);
  const TopoNode& hca2 = t->nodes[3];
  EXPECT_EQ(hca2.type, NodeType::kCa);
  EXPECT_EQ(hca2.num_ports, 2);
  EXPECT_EQ(hca2.node_guid, 0x100003u);  // CAs from 0x100000; Hca1 reserved ..0x100002
  EXPECT_EQ(hca2.PortGuid(1), 0x100004u);
  EXPECT_EQ(hca2.ports[2].remote_node, -1);
}

TEST(TopologyTest, ParsesIbnetdiscoverOutput) {
  constexpr absl::string_view kNet = R"(#
# Topology file: generated on Tue Jan  1 00:00:00 2030
#
vendid=0x2c9
devid=0xb924
sysimgguid=0x2c90000000003
switchguid=0x2c90000000003(2c90000000003)
Switch	24 "S-0002c90000000003"		# "ISR9024 Voltaire" base port 0 lid 7 lmc 0
[1]	"H-0002c90000000001"[1](2c90000000002) 		# "host1 mlx4_0" lid 2 4xSDR
[2]	"H-0002c90000000004"[1](2c90000000005) 	w=8 s=2	# "host2 mlx4_0" lid 3 4xSDR

vendid=0x2c9
devid=0x6282
caguid=0x2c90000000001
Ca	2 "H-0002c90000000001"		# "host1 mlx4_0"
[1](2c90000000002) 	"S-0002c90000000003"[1]		# lid 2 lmc 0 "ISR9024 Voltaire" lid 7 4xSDR

caguid=0x2c90000000004
Ca	2 "H-0002c90000000004"		# "host2 mlx4_0"
[1](2c90000000005) 	"S-0002c90000000003"[2]	w=8 s=3	# lid 3 lmc 0 "ISR9024 Voltaire" lid 7 4xSDR
)";
  absl::StatusOr<Topology> t = ParseNetFile(kNet);
  ASSERT_TRUE(t.ok()) << t.status();
  const TopoNode& sw = t->nodes[0];
  EXPECT_EQ(sw.desc, "ISR9024 Voltaire");
  EXPECT_EQ(sw.node_guid, 0x2c90000000003u);
  EXPECT_EQ(sw.ports[0].lid_hint, 7);
  EXPECT_EQ(sw.ports[1].lid_hint, 0);  // switch port lines carry the remote's LID
  EXPECT_EQ(sw.ports[2].width_enabled, kWidth12x);
  EXPECT_EQ(sw.ports[2].speed_enabled, kSpeedDdr);
  const TopoNode& h1 = t->nodes[1];
  EXPECT_EQ(h1.desc, "host1 mlx4_0");
  EXPECT_EQ(h1.node_guid, 0x2c90000000001u);
  EXPECT_EQ(h1.PortGuid(1), 0x2c90000000002u);
  EXPECT_EQ(h1.ports[1].lid_hint, 2);
  EXPECT_EQ(t->nodes[2].ports[1].lid_hint, 3);
  EXPECT_EQ(t->nodes[2].ports[1].speed_enabled, 3);
}

TEST(TopologyTest, GuidBaseRelativeAndGlobalWidthSpeed) {
  constexpr absl::string_view kNet = R"(caguid=0x1000
width=8
speed=4
Hca 1 "a"
[1] "b"[1]

caguid+0x10
Hca 1 "b"
[1] "a"[1]
)";
  absl::StatusOr<Topology> t = ParseNetFile(kNet);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->nodes[0].node_guid, 0x1000u);
  EXPECT_EQ(t->nodes[1].node_guid, 0x1010u);
  EXPECT_EQ(t->nodes[1].ports[1].width_enabled, kWidth12x);
  EXPECT_EQ(t->nodes[1].ports[1].speed_enabled, kSpeedQdr);
  EXPECT_EQ(t->nodes[0].ports[1].remote_port, 1);
}

TEST(TopologyTest, MissingRemotePortDefaultsToOne) {
  absl::StatusOr<Topology> t = ParseNetFile("Hca 1 \"a\"\n[1] \"b\"\n\nHca 1 \"b\"\n[1] \"a\"\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->nodes[0].ports[1].remote_port, 1);
}

TEST(TopologyTest, MalformedInputNamesTheLine) {
  EXPECT_EQ(ErrorOf("Switch \"s\"\n"),
            "t.net:1: Switch header needs a port count 1..255 before the node id");
  EXPECT_EQ(ErrorOf("\nHca 300 \"h\"\n"), "t.net:2: Hca header needs a port count 1..255 before the node id");
  EXPECT_EQ(ErrorOf("Hca 1 h\n"), "t.net:1: node header needs a quoted node id");
  EXPECT_EQ(ErrorOf("Hca 1 \"a#b\"\n"), "t.net:1: node id may not contain '#' or '@'");
  EXPECT_EQ(ErrorOf("Hca 1 \"a\"\n\nHca 1 \"a\"\n"), "t.net:3: duplicate node id \"a\"");
  EXPECT_EQ(ErrorOf("Hca 1 \"a\"\n[2] \"b\"[1]\n"), "t.net:2: port 2 but node \"a\" has 1 ports");
  EXPECT_EQ(ErrorOf("Switch 4 \"a\"\n[0] \"b\"[1]\n"), "t.net:2: port 0 cannot be linked");
  EXPECT_EQ(ErrorOf("Switch 4 \"a\"\n[x] \"b\"[1]\n"), "t.net:2: port line must start with [port]");
  EXPECT_EQ(ErrorOf("Switch 4 \"a\"\n[1] \"b\"[1]\n[1] \"c\"[1]\n"),
            "t.net:3: port 1 already listed on line 2");
  EXPECT_EQ(ErrorOf("Switch 4 \"a\"\n[1] b\n"), "t.net:2: port line needs a quoted remote node id");
  EXPECT_EQ(ErrorOf("Switch 4 \"a\"\n[1] \"b\"[0]\n"), "t.net:2: remote port must be [1..255]");
  EXPECT_EQ(ErrorOf("Switch 4 \"a\"\n[1] \"b\"[1] w=16\n"),
            "t.net:2: w= (link width enabled) must be 1..15");
  EXPECT_EQ(ErrorOf("Switch 4 \"a\"\n[1] \"b\"[1] q=1\n"), "t.net:2: unknown port option 'q='");
  EXPECT_EQ(ErrorOf("Hca 1 \"a\"\n[1] \"b\"[1] # lid 0xC000\n"),
            "t.net:2: lid hint must be a unicast LID 1..49151");
  EXPECT_EQ(ErrorOf("Hca 1 \"a\"\n[1] \"nope\"[1]\n"), "t.net:2: port 1 links to unknown node \"nope\"");
  EXPECT_EQ(ErrorOf("Hca 1 \"a\"\n[1] \"b\"[3]\n\nHca 1 \"b\"\n"), "t.net:2: node \"b\" has no port 3");
  EXPECT_THAT(ErrorOf("Hca 1 \"a\"\n[1] \"s\"[1]\n\nSwitch 4 \"s\"\n[1] \"a\"[1]\n[2] \"x\"[1]\n\nHca 1 \"x\"\n[1] \"s\"[3]\n"),
              HasSubstr("t.net:6: \"s\"[2] links to \"x\"[1], but that port does not list it back (see line 9)"));
  EXPECT_EQ(ErrorOf("Hca 1 \"a\"\n[1] \"b\"[1] w=1\n\nHca 1 \"b\"\n[1] \"a\"[1] w=2\n"),
            "t.net:2: the two ends of this link share no enabled width or speed");
  EXPECT_EQ(ErrorOf("Switch 2 \"s\"\n[1] \"a\"[1]\nHca 1 \"a\"\n[1] \"s\"[1]\n"),
            "t.net:3: expected a blank line after the record of node \"s\" (ibsim would drop this line)");
  EXPECT_EQ(ErrorOf("[1] \"a\"[1]\n"), "t.net:1: port line outside a node record");
  EXPECT_EQ(ErrorOf("Rt 2 \"r\"\n"), "t.net:1: router nodes (Rt) are not supported");
  EXPECT_EQ(ErrorOf("include \"x.net\"\n"), "t.net:1: include is not supported");
  EXPECT_EQ(ErrorOf("do link 1 2\n"), "t.net:1: 'do' console commands are not supported");
  EXPECT_EQ(ErrorOf("Switch 2 \"s\"\n@1 \"alias\"\n"), "t.net:2: port aliases (@) are not supported");
  EXPECT_EQ(ErrorOf("caguid 5\n"), "t.net:1: GUID base needs '=' or '+'");
  EXPECT_EQ(ErrorOf("width=0\n"), "t.net:1: expected '=' and a value 1..15");
  EXPECT_EQ(ErrorOf("caguid=1\nHca 1 \"a\"\n\ncaguid=1\nHca 1 \"b\"\n"),
            "t.net:5: node GUID 0x1 is already taken");
}

TEST(TopologyTest, MissingFileIsNotFound) {
  absl::StatusOr<Topology> t = LoadNetFile("/nonexistent/x.net");
  EXPECT_TRUE(absl::IsNotFound(t.status())) << t.status();
}

TEST(TopologyTest, FormatThenParseRoundTrips) {
  absl::StatusOr<Topology> t = TopologyBuilder()
                                   .Switch("s1", 4, "spine")
                                   .Switch("s2", 4)
                                   .Ca("h1", 2, "host one")
                                   .Link("s1", 1, "s2", 1)
                                   .Link("s1", 2, "h1", 2)
                                   .Lid("s1", 0, 9)
                                   .Lid("h1", 2, 12)
                                   .Build();
  ASSERT_TRUE(t.ok()) << t.status();
  t->nodes[0].ports[1].width_enabled = kWidth12x;
  t->nodes[1].ports[1].width_enabled = kWidth12x | kWidth4x;
  t->nodes[1].ports[1].speed_enabled = kSpeedQdr;
  t->nodes[0].ports[1].speed_enabled = kSpeedQdr | kSpeedSdr;
  const std::string text = FormatNetFile(*t);
  absl::StatusOr<Topology> back = ParseNetFile(text);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << text;
  EXPECT_EQ(WithoutLines(*back), *t) << text;
}

TEST(TopologyTest, BuilderReportsTheFirstError) {
  EXPECT_EQ(TopologyBuilder().Ca("a", 1).Link("a", 1, "b", 1).Build().status().message(),
            "unknown node \"b\"");
  EXPECT_EQ(TopologyBuilder().Ca("a", 1).Ca("b", 1).Link("a", 2, "b", 1).Build().status().message(),
            "link \"a\"[2] - \"b\"[1]: port out of range");
  EXPECT_EQ(TopologyBuilder().Switch("s", 2).Ca("a", 1).Ca("b", 1).Link("s", 1, "a", 1)
                .Link("s", 2, "a", 1).Build().status().message(),
            "link \"s\"[2] - \"a\"[1]: a port is already linked");
  EXPECT_FALSE(TopologyBuilder().Ca("a", 0).Build().ok());
  EXPECT_FALSE(TopologyBuilder().Ca("a", 1).Ca("a", 1).Build().ok());
  EXPECT_FALSE(TopologyBuilder().Switch("s", 1).Lid("s", 1, 5).Build().ok());
  EXPECT_FALSE(TopologyBuilder().Ca("a", 1).Lid("a", 1, 0xC000).Build().ok());
}

TEST(TopologyTest, GeneratedFabricHasEveryCaLinkedToALeaf) {
  absl::StatusOr<Topology> t = GenerateTopology(500, 17);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->nodes.size(), 517u);
  int cas = 0;
  for (const TopoNode& n : t->nodes) {
    if (n.type != NodeType::kCa) continue;
    ++cas;
    ASSERT_GE(n.ports[1].remote_node, 1);  // a leaf, never the core
    EXPECT_EQ(t->nodes[n.ports[1].remote_node].type, NodeType::kSwitch);
    EXPECT_EQ(n.id, absl::StrFormat("H-%016x", n.node_guid));
  }
  EXPECT_EQ(cas, 500);
  EXPECT_EQ(t->nodes[0].num_ports, 16);  // core: one port per leaf
  // Its text form parses back to the same fabric, and matches the checked-in file.
  const std::string text = FormatNetFile(*t);
  absl::StatusOr<Topology> back = ParseNetFile(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(WithoutLines(*back), *t);
  absl::StatusOr<Topology> file = LoadNetFile("tests/topologies/hca500-sw17.net");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(WithoutLines(*file), *t);

  absl::StatusOr<Topology> one = GenerateTopology(3, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->nodes[0].num_ports, 3);
  EXPECT_FALSE(GenerateTopology(0, 1).ok());
  EXPECT_FALSE(GenerateTopology(300, 1).ok());  // 300 ports on one switch
}

}  // namespace
}  // namespace uscm::sim

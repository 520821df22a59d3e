// Fabric topologies: the ibsim net-file format (ibnetdiscover output plus
// ibsim's extensions), a small builder for tests, and a generator for "N HCAs
// behind K switches". One file runs on both this simulator and real ibsim.
//
// GUIDs are assigned the way ibsim 0.10 assigns them, so both simulators
// agree (tests/ibsim:netfile_ibsim_test SamePortGuids): CAs count up from
// 0x100000 (each reserves num_ports + 1; port GUID = node GUID + port
// number), switches from 0x200000 (one GUID each; port GUID = node GUID).
// `switchguid=` / `caguid=` lines move the base ('=' absolute, '+' relative),
// as in ibsim.
#ifndef USCM_MAD_SIM_TOPOLOGY_H_
#define USCM_MAD_SIM_TOPOLOGY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace uscm::sim {

enum class NodeType : uint8_t { kSwitch, kCa };

// PortInfo LinkWidthEnabled / LinkSpeedEnabled bit masks, as ibsim takes them.
inline constexpr uint8_t kWidth1x = 1, kWidth4x = 2, kWidth8x = 4, kWidth12x = 8;
inline constexpr uint8_t kSpeedSdr = 1, kSpeedDdr = 2, kSpeedQdr = 4;

struct TopoPort {
  int remote_node = -1;  // index into Topology::nodes; -1 = not connected
  int remote_port = 0;
  uint8_t width_enabled = kWidth4x;  // ibsim's default
  uint8_t speed_enabled = kSpeedSdr;
  uint16_t lid_hint = 0;  // "lid N" in the file; 0 = let the fabric assign
  int line = 0;           // where the port line was (0 = builder)

  friend bool operator==(const TopoPort&, const TopoPort&) = default;
};

struct TopoNode {
  NodeType type = NodeType::kCa;
  std::string id;    // the quoted node id ("S-0002c90200001234", "host1")
  std::string desc;  // node description; the id when the file gives none
  int num_ports = 0;
  uint64_t node_guid = 0;
  // Index = port number, 0..num_ports. Port 0 is a switch's management port
  // (its lid_hint is the switch LID); a CA's ports[0] is unused.
  std::vector<TopoPort> ports;
  int line = 0;

  uint64_t PortGuid(int port) const {
    return type == NodeType::kSwitch ? node_guid : node_guid + static_cast<uint64_t>(port);
  }
  friend bool operator==(const TopoNode&, const TopoNode&) = default;
};

struct Topology {
  std::vector<TopoNode> nodes;  // file order; nodes[0] hosts the SM by default

  int FindNode(absl::string_view id) const;  // -1 if absent
  friend bool operator==(const Topology&, const Topology&) = default;
};

// Parses net-file text. Errors read "<filename>:<line>: what is wrong".
// Supported: Switch / Hca / Ca records, port lines `[p] "remote"[rp]` with
// optional `(guid)`, `w=` / `s=` options and `lid N` hints, header comments
// `# "desc" [enhanced|base] port 0 lid N`, `switchguid=`, `caguid=`,
// `hcaguids=`, `width=`, `speed=`; vendid / devid / sysimgguid and unknown
// lines are ignored as ibsim ignores them. Rejected with a clear error:
// routers (Rt), aliases (@), include, do, module.
absl::StatusOr<Topology> ParseNetFile(absl::string_view text,
                                      absl::string_view filename = "<net>");
absl::StatusOr<Topology> LoadNetFile(const std::string& path);

// Writes a net file ibsim reads and ParseNetFile parses back to an equal
// Topology (line numbers aside).
std::string FormatNetFile(const Topology& topo);

class TopologyBuilder {
 public:
  TopologyBuilder& Switch(absl::string_view id, int num_ports, absl::string_view desc = "");
  TopologyBuilder& Ca(absl::string_view id, int num_ports, absl::string_view desc = "");
  TopologyBuilder& Link(absl::string_view a, int a_port, absl::string_view b, int b_port);
  // Fixes the LID of a CA port, or of a switch (port 0).
  TopologyBuilder& Lid(absl::string_view id, int port, uint16_t lid);
  // The first error any call above met, or the topology.
  absl::StatusOr<Topology> Build();

 private:
  TopoNode* Find(absl::string_view id);
  void AddNode(NodeType type, absl::string_view id, int num_ports, absl::string_view desc);

  Topology topo_;
  absl::flat_hash_map<std::string, int> index_;  // id -> node (large fabrics)
  uint64_t next_switch_guid_ = 0x200000;
  uint64_t next_ca_guid_ = 0x100000;
  std::string error_;
};

// "switch1" (8 ports) with "host1" on port 1 and "host2" on port 2.
Topology TwoHostsOneSwitch();

// `num_cas` single-port CAs behind `num_switches` switches. One switch: every
// CA on it. More: switch 1 is a core linked to switches 2..K (port i-1 to
// their port 1) and the CAs are spread round robin over those leaves.
absl::StatusOr<Topology> GenerateTopology(int num_cas, int num_switches);

}  // namespace uscm::sim

#endif  // USCM_MAD_SIM_TOPOLOGY_H_

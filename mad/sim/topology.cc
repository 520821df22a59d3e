#include "mad/sim/topology.h"

#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace uscm::sim {
namespace {

constexpr int kMaxPorts = 255;          // ibsim: ports(1-255)
constexpr uint16_t kMaxUnicastLid = 0xBFFF;

// Parses an unsigned number the way strtoul(s, 0, 0) does (0x.. hex, else
// decimal) from the start of `s`; the digits must be followed by a
// non-alphanumeric character or the end.
absl::optional<uint64_t> LeadingNumber(absl::string_view s) {
  int base = 10;
  size_t i = 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    i = 2;
  }
  size_t j = i;
  while (j < s.size() && (base == 16 ? absl::ascii_isxdigit(s[j]) : absl::ascii_isdigit(s[j]))) ++j;
  if (j == i || (j < s.size() && absl::ascii_isalnum(s[j]))) return absl::nullopt;
  uint64_t v = 0;
  for (size_t k = i; k < j; ++k) {
    const int d = absl::ascii_isdigit(s[k]) ? s[k] - '0' : absl::ascii_tolower(s[k]) - 'a' + 10;
    if (v > (UINT64_MAX - d) / base) return absl::nullopt;
    v = v * base + d;
  }
  return v;
}

class Parser {
 public:
  explicit Parser(absl::string_view filename) : filename_(filename) {}

  absl::StatusOr<Topology> Run(absl::string_view text);

 private:
  absl::Status Error(int line, absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(filename_, ":", line, ": ", what));
  }
  absl::Status TopLevel(int line, absl::string_view s);
  absl::Status Header(int line, absl::string_view s, NodeType type, absl::string_view word);
  absl::Status PortLine(int line, absl::string_view s);
  absl::Status GuidBase(int line, absl::string_view s, uint64_t* abs, uint64_t* next);
  absl::Status Default(int line, absl::string_view s, int lo, int hi, uint8_t* out);
  absl::Status Connect();
  absl::flat_hash_map<std::string, int> index_;  // node id -> node

  std::string filename_;
  Topology topo_;
  int open_node_ = -1;   // the record being read
  int ports_left_ = 0;   // ibsim reads at most num_ports port lines
  uint64_t switch_abs_ = 0x200000, switch_next_ = 0x200000;  // ibsim 0.10's bases
  uint64_t ca_abs_ = 0x100000, ca_next_ = 0x100000;
  uint8_t width_ = kWidth4x, speed_ = kSpeedSdr;
  absl::flat_hash_set<uint64_t> guids_;
  struct PendingLink {
    int node;
    int port;
    std::string remote;
  };
  std::vector<PendingLink> pending_;
};

// The quoted string starting at or after `s`'s first quote; `rest` gets what follows.
absl::optional<absl::string_view> Quoted(absl::string_view s, absl::string_view* rest) {
  const size_t a = s.find('"');
  if (a == absl::string_view::npos) return absl::nullopt;
  const size_t b = s.find('"', a + 1);
  if (b == absl::string_view::npos) return absl::nullopt;
  *rest = s.substr(b + 1);
  return s.substr(a + 1, b - a - 1);
}

// The number after the first "lid " in `s`, if any.
absl::StatusOr<uint16_t> LidHint(absl::string_view s) {
  const size_t at = s.find("lid ");
  if (at == absl::string_view::npos) return uint16_t{0};
  absl::optional<uint64_t> lid = LeadingNumber(absl::StripLeadingAsciiWhitespace(s.substr(at + 4)));
  if (!lid.has_value() || *lid == 0 || *lid > kMaxUnicastLid) {
    return absl::InvalidArgumentError("lid hint must be a unicast LID 1..49151");
  }
  return static_cast<uint16_t>(*lid);
}

absl::StatusOr<Topology> Parser::Run(absl::string_view text) {
  int line = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line;
    absl::string_view s = absl::StripSuffix(raw, "\r");
    if (open_node_ >= 0) {
      if (absl::StartsWith(s, "#")) continue;
      if (absl::StartsWith(s, "@")) return Error(line, "port aliases (@) are not supported");
      if (absl::StartsWith(s, "[")) {
        if (absl::Status st = PortLine(line, s); !st.ok()) return st;
        if (--ports_left_ == 0) open_node_ = -1;
        continue;
      }
      // ibsim consumes (and drops) the line that ends a record.
      const std::string& id = topo_.nodes[open_node_].id;
      open_node_ = -1;
      if (!absl::StripAsciiWhitespace(s).empty()) {
        return Error(line, absl::StrCat("expected a blank line after the record of node \"", id,
                                        "\" (ibsim would drop this line)"));
      }
      continue;
    }
    if (absl::Status st = TopLevel(line, s); !st.ok()) return st;
  }
  if (absl::Status st = Connect(); !st.ok()) return st;
  return std::move(topo_);
}

absl::Status Parser::TopLevel(int line, absl::string_view s) {
  // ibsim matches keywords as prefixes at the very start of the line.
  if (absl::StartsWith(s, "Switch")) return Header(line, s, NodeType::kSwitch, "Switch");
  if (absl::StartsWith(s, "Hca")) return Header(line, s, NodeType::kCa, "Hca");
  if (absl::StartsWith(s, "Ca")) return Header(line, s, NodeType::kCa, "Ca");
  if (absl::StartsWith(s, "Rt")) return Error(line, "router nodes (Rt) are not supported");
  if (absl::StartsWith(s, "switchguid")) return GuidBase(line, s, &switch_abs_, &switch_next_);
  if (absl::StartsWith(s, "hcaguids") || absl::StartsWith(s, "caguid")) {
    return GuidBase(line, s, &ca_abs_, &ca_next_);
  }
  if (absl::StartsWith(s, "width")) return Default(line, s, 1, 15, &width_);
  if (absl::StartsWith(s, "speed")) return Default(line, s, 1, 7, &speed_);
  if (absl::StartsWith(s, "include")) return Error(line, "include is not supported");
  if (absl::StartsWith(s, "module")) return Error(line, "module prefixes are not supported");
  if (absl::StartsWith(s, "do")) return Error(line, "'do' console commands are not supported");
  if (absl::StartsWith(s, "[")) return Error(line, "port line outside a node record");
  return absl::OkStatus();  // comments, blank lines, vendid=, sysimgguid=, ...
}

absl::Status Parser::Header(int line, absl::string_view s, NodeType type, absl::string_view word) {
  absl::string_view after = absl::StripLeadingAsciiWhitespace(s.substr(word.size()));
  absl::optional<uint64_t> n = LeadingNumber(after.substr(0, after.find_first_of(" \t\"")));
  if (!n.has_value() || *n < 1 || *n > kMaxPorts) {
    return Error(line, absl::StrCat(word, " header needs a port count 1..255 before the node id"));
  }
  absl::string_view rest;
  absl::optional<absl::string_view> id = Quoted(after, &rest);
  if (!id.has_value() || id->empty()) return Error(line, "node header needs a quoted node id");
  if (absl::StrContains(*id, "#") || absl::StrContains(*id, "@")) {
    return Error(line, "node id may not contain '#' or '@'");
  }
  // The node is pushed as topo_.nodes.size() below (or the parse fails).
  if (!index_.emplace(std::string(*id), static_cast<int>(topo_.nodes.size())).second) {
    return Error(line, absl::StrCat("duplicate node id \"", *id, "\""));
  }

  TopoNode node;
  node.type = type;
  node.id = std::string(*id);
  node.num_ports = static_cast<int>(*n);
  node.line = line;
  if (const size_t hash = rest.find('#'); hash != absl::string_view::npos) {
    absl::string_view d = absl::StripLeadingAsciiWhitespace(rest.substr(hash + 1));
    absl::string_view tail = d;
    if (absl::StartsWith(d, "\"")) {
      absl::optional<absl::string_view> q = Quoted(d, &tail);
      if (!q.has_value()) return Error(line, "unterminated node description");
      node.desc = std::string(*q);
    } else {
      size_t end = d.size();
      for (absl::string_view stop : {" enhanced port ", " base port ", " lid ", " lmc "}) {
        end = std::min(end, d.find(stop));
      }
      node.desc = std::string(absl::StripTrailingAsciiWhitespace(d.substr(0, end)));
      tail = d.substr(std::min(end, d.size()));
    }
    rest = tail;
  }
  if (node.desc.empty()) node.desc = node.id;

  uint64_t* next = type == NodeType::kSwitch ? &switch_next_ : &ca_next_;
  node.node_guid = *next;
  if (!guids_.insert(node.node_guid).second) {
    return Error(line, absl::StrFormat("node GUID 0x%x is already taken", node.node_guid));
  }
  *next += type == NodeType::kSwitch ? 1 : node.num_ports + 1;

  node.ports.resize(node.num_ports + 1);
  for (TopoPort& p : node.ports) {
    p.width_enabled = width_;
    p.speed_enabled = speed_;
  }
  if (type == NodeType::kSwitch) {
    absl::StatusOr<uint16_t> lid = LidHint(rest);
    if (!lid.ok()) return Error(line, lid.status().message());
    node.ports[0].lid_hint = *lid;
  }
  topo_.nodes.push_back(std::move(node));
  open_node_ = static_cast<int>(topo_.nodes.size()) - 1;
  ports_left_ = topo_.nodes.back().num_ports;
  return absl::OkStatus();
}

absl::Status Parser::PortLine(int line, absl::string_view s) {
  TopoNode& node = topo_.nodes[open_node_];
  const size_t close = s.find(']');
  absl::optional<uint64_t> num =
      close == absl::string_view::npos ? absl::nullopt : LeadingNumber(s.substr(1, close - 1));
  if (!num.has_value()) return Error(line, "port line must start with [port]");
  if (*num == 0) return Error(line, "port 0 cannot be linked");
  if (*num > static_cast<uint64_t>(node.num_ports)) {
    return Error(line, absl::StrCat("port ", *num, " but node \"", node.id, "\" has ",
                                    node.num_ports, " ports"));
  }
  TopoPort& port = node.ports[*num];
  if (port.line != 0) {
    return Error(line, absl::StrCat("port ", *num, " already listed on line ", port.line));
  }
  absl::string_view rest;
  absl::optional<absl::string_view> remote = Quoted(s, &rest);
  if (!remote.has_value() || remote->empty()) return Error(line, "port line needs a quoted remote node id");
  port.line = line;
  port.remote_port = 1;  // ibsim's default when "[rp]" is missing
  if (absl::StartsWith(rest, "[")) {
    absl::optional<uint64_t> rp = LeadingNumber(rest.substr(1, rest.find(']') - 1));
    if (!rp.has_value() || rest.find(']') == absl::string_view::npos || *rp < 1 || *rp > kMaxPorts) {
      return Error(line, "remote port must be [1..255]");
    }
    port.remote_port = static_cast<int>(*rp);
  }
  // Options (w=, s=) before any comment.
  absl::string_view opts = rest.substr(0, rest.find('#'));
  for (size_t eq = opts.find('='); eq != absl::string_view::npos; eq = opts.find('=', eq + 1)) {
    if (eq == 0 || !absl::ascii_isalpha(opts[eq - 1])) return Error(line, "bad port option");
    absl::optional<uint64_t> v = LeadingNumber(opts.substr(eq + 1, opts.find_first_of(" \t", eq + 1) - eq - 1));
    const char opt = opts[eq - 1];
    if (opt == 'w') {
      if (!v.has_value() || *v < 1 || *v > 15) return Error(line, "w= (link width enabled) must be 1..15");
      port.width_enabled = static_cast<uint8_t>(*v);
    } else if (opt == 's') {
      if (!v.has_value() || *v < 1 || *v > 7) return Error(line, "s= (link speed enabled) must be 1..7");
      port.speed_enabled = static_cast<uint8_t>(*v);
    } else {
      return Error(line, absl::StrCat("unknown port option '", std::string(1, opt), "='"));
    }
  }
  if (node.type == NodeType::kCa) {
    absl::StatusOr<uint16_t> lid = LidHint(rest);
    if (!lid.ok()) return Error(line, lid.status().message());
    port.lid_hint = *lid;
  }
  // The remote is resolved by name once every node is known.
  pending_.push_back(PendingLink{open_node_, static_cast<int>(*num), std::string(*remote)});
  return absl::OkStatus();
}

absl::Status Parser::GuidBase(int line, absl::string_view s, uint64_t* abs, uint64_t* next) {
  const size_t at = s.find_first_of("=+");
  if (at == absl::string_view::npos) return Error(line, "GUID base needs '=' or '+'");
  absl::string_view v = s.substr(at + 1);
  absl::optional<uint64_t> g = LeadingNumber(v.substr(0, v.find_first_of("( \t")));
  if (!g.has_value()) return Error(line, "GUID base must be a number (0x... or decimal)");
  if (s[at] == '=') {
    *abs = *g;
    *next = *g;
  } else {
    *next = *abs + *g;
  }
  return absl::OkStatus();
}

absl::Status Parser::Default(int line, absl::string_view s, int lo, int hi, uint8_t* out) {
  const size_t at = s.find('=');
  absl::optional<uint64_t> v =
      at == absl::string_view::npos ? absl::nullopt
                                    : LeadingNumber(absl::StripAsciiWhitespace(s.substr(at + 1)));
  if (!v.has_value() || *v < static_cast<uint64_t>(lo) || *v > static_cast<uint64_t>(hi)) {
    return Error(line, absl::StrCat("expected '=' and a value ", lo, "..", hi));
  }
  *out = static_cast<uint8_t>(*v);
  return absl::OkStatus();
}

absl::Status Parser::Connect() {
  for (const PendingLink& l : pending_) {
    TopoPort& p = topo_.nodes[l.node].ports[l.port];
    auto found = index_.find(l.remote);
    const int r = found == index_.end() ? -1 : found->second;
    if (r < 0) {
      return Error(p.line, absl::StrCat("port ", l.port, " links to unknown node \"", l.remote, "\""));
    }
    if (p.remote_port > topo_.nodes[r].num_ports) {
      return Error(p.line, absl::StrCat("node \"", l.remote, "\" has no port ", p.remote_port));
    }
    p.remote_node = r;
  }
  for (const PendingLink& l : pending_) {
    const TopoNode& node = topo_.nodes[l.node];
    const TopoPort& p = node.ports[l.port];
    const TopoNode& rnode = topo_.nodes[p.remote_node];
    const TopoPort& rp = rnode.ports[p.remote_port];
    if (rp.remote_node != l.node || rp.remote_port != l.port) {
      return Error(p.line, absl::StrCat("\"", node.id, "\"[", l.port, "] links to \"", rnode.id,
                                        "\"[", p.remote_port, "], but that port does not list it back",
                                        rp.line != 0 ? absl::StrCat(" (see line ", rp.line, ")") : ""));
    }
    if ((p.width_enabled & rp.width_enabled) == 0 || (p.speed_enabled & rp.speed_enabled) == 0) {
      return Error(p.line, "the two ends of this link share no enabled width or speed");
    }
  }
  return absl::OkStatus();
}

}  // namespace

int Topology::FindNode(absl::string_view id) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<Topology> ParseNetFile(absl::string_view text, absl::string_view filename) {
  return Parser(filename).Run(text);
}

absl::StatusOr<Topology> LoadNetFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open net file ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseNetFile(text.str(), path);
}

std::string FormatNetFile(const Topology& topo) {
  std::string out = "# Generated by uscm (mad/sim/topology.cc); ibsim -s -n <file> reads it.\n\n";
  for (const TopoNode& n : topo.nodes) {
    const bool sw = n.type == NodeType::kSwitch;
    absl::StrAppendFormat(&out, "%s\t%d \"%s\"\t\t# \"%s\"", sw ? "Switch" : "Hca", n.num_ports,
                          n.id, n.desc);
    if (sw && n.ports[0].lid_hint != 0) {
      absl::StrAppend(&out, " base port 0 lid ", n.ports[0].lid_hint);
    }
    absl::StrAppend(&out, "\n");
    for (int i = 1; i <= n.num_ports; ++i) {
      const TopoPort& p = n.ports[i];
      if (p.remote_node < 0) continue;
      absl::StrAppendFormat(&out, "[%d]\t\"%s\"[%d]", i, topo.nodes[p.remote_node].id, p.remote_port);
      if (p.width_enabled != kWidth4x) absl::StrAppend(&out, "\tw=", p.width_enabled);
      if (p.speed_enabled != kSpeedSdr) absl::StrAppend(&out, "\ts=", p.speed_enabled);
      if (!sw && p.lid_hint != 0) absl::StrAppend(&out, "\t# lid ", p.lid_hint);
      absl::StrAppend(&out, "\n");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

TopoNode* TopologyBuilder::Find(absl::string_view id) {
  auto it = index_.find(id);
  const int i = it == index_.end() ? -1 : it->second;
  if (i < 0 && error_.empty()) error_ = absl::StrCat("unknown node \"", id, "\"");
  return i < 0 ? nullptr : &topo_.nodes[i];
}

void TopologyBuilder::AddNode(NodeType type, absl::string_view id, int num_ports,
                              absl::string_view desc) {
  if (!error_.empty()) return;
  if (id.empty() || num_ports < 1 || num_ports > kMaxPorts) {
    error_ = absl::StrCat("node \"", id, "\": needs an id and 1..255 ports");
    return;
  }
  if (!index_.emplace(std::string(id), static_cast<int>(topo_.nodes.size())).second) {
    error_ = absl::StrCat("duplicate node id \"", id, "\"");
    return;
  }
  TopoNode n;
  n.type = type;
  n.id = std::string(id);
  n.desc = desc.empty() ? n.id : std::string(desc);
  n.num_ports = num_ports;
  n.ports.resize(num_ports + 1);
  uint64_t* next = type == NodeType::kSwitch ? &next_switch_guid_ : &next_ca_guid_;
  n.node_guid = *next;
  *next += type == NodeType::kSwitch ? 1 : num_ports + 1;
  topo_.nodes.push_back(std::move(n));
}

TopologyBuilder& TopologyBuilder::Switch(absl::string_view id, int num_ports, absl::string_view desc) {
  AddNode(NodeType::kSwitch, id, num_ports, desc);
  return *this;
}

TopologyBuilder& TopologyBuilder::Ca(absl::string_view id, int num_ports, absl::string_view desc) {
  AddNode(NodeType::kCa, id, num_ports, desc);
  return *this;
}

TopologyBuilder& TopologyBuilder::Link(absl::string_view a, int a_port, absl::string_view b,
                                       int b_port) {
  if (!error_.empty()) return *this;
  TopoNode* na = Find(a);
  TopoNode* nb = Find(b);
  if (na == nullptr || nb == nullptr) return *this;
  if (a_port < 1 || a_port > na->num_ports || b_port < 1 || b_port > nb->num_ports) {
    error_ = absl::StrCat("link \"", a, "\"[", a_port, "] - \"", b, "\"[", b_port,
                          "]: port out of range");
    return *this;
  }
  TopoPort& pa = na->ports[a_port];
  TopoPort& pb = nb->ports[b_port];
  if (pa.remote_node >= 0 || pb.remote_node >= 0 || (na == nb && a_port == b_port)) {
    error_ = absl::StrCat("link \"", a, "\"[", a_port, "] - \"", b, "\"[", b_port,
                          "]: a port is already linked");
    return *this;
  }
  pa.remote_node = index_.find(b)->second;
  pa.remote_port = b_port;
  pb.remote_node = index_.find(a)->second;
  pb.remote_port = a_port;
  return *this;
}

TopologyBuilder& TopologyBuilder::Lid(absl::string_view id, int port, uint16_t lid) {
  if (!error_.empty()) return *this;
  TopoNode* n = Find(id);
  if (n == nullptr) return *this;
  const bool ok_port = n->type == NodeType::kSwitch ? port == 0 : port >= 1 && port <= n->num_ports;
  if (!ok_port || lid == 0 || lid > kMaxUnicastLid) {
    error_ = absl::StrCat("lid ", lid, " for \"", id, "\" port ", port,
                          ": a switch takes port 0, a CA 1..N; LIDs are 1..49151");
    return *this;
  }
  n->ports[port].lid_hint = lid;
  return *this;
}

absl::StatusOr<Topology> TopologyBuilder::Build() {
  if (!error_.empty()) return absl::InvalidArgumentError(error_);
  return topo_;
}

Topology TwoHostsOneSwitch() {
  return *TopologyBuilder()
              .Switch("switch1", 8)
              .Ca("host1", 1)
              .Ca("host2", 1)
              .Link("switch1", 1, "host1", 1)
              .Link("switch1", 2, "host2", 1)
              .Build();
}

absl::StatusOr<Topology> GenerateTopology(int num_cas, int num_switches) {
  if (num_cas < 1 || num_switches < 1) {
    return absl::InvalidArgumentError("need at least one CA and one switch");
  }
  const int leaves = num_switches == 1 ? 1 : num_switches - 1;
  const int per_leaf = (num_cas + leaves - 1) / leaves;
  const int uplink = num_switches == 1 ? 0 : 1;
  if (per_leaf + uplink > kMaxPorts || leaves > kMaxPorts) {
    return absl::InvalidArgumentError(absl::StrCat(num_cas, " CAs over ", leaves,
                                                   " leaf switches need more than 255 ports a switch"));
  }
  // Ids spell the GUIDs the builder (and ibsim) will assign.
  auto sw_id = [](int i) { return absl::StrFormat("S-%016x", 0x200000 + i); };
  auto ca_id = [](int i) { return absl::StrFormat("H-%016x", 0x100000 + 2 * i); };
  TopologyBuilder b;
  if (num_switches > 1) b.Switch(sw_id(0), leaves, "core");
  const int first_leaf = num_switches > 1 ? 1 : 0;
  for (int l = 0; l < leaves; ++l) {
    b.Switch(sw_id(first_leaf + l), per_leaf + uplink, absl::StrCat("leaf ", l + 1));
  }
  for (int i = 0; i < num_cas; ++i) b.Ca(ca_id(i), 1, absl::StrCat("hca ", i + 1));
  for (int l = 0; l < leaves && num_switches > 1; ++l) b.Link(sw_id(0), l + 1, sw_id(1 + l), 1);
  for (int i = 0; i < num_cas; ++i) {
    b.Link(sw_id(first_leaf + i % leaves), uplink + 1 + i / leaves, ca_id(i), 1);
  }
  return b.Build();
}

}  // namespace uscm::sim

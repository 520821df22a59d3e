#include "cm/router/frame.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "mad/status_errno.h"

namespace uscm::router {
namespace {

constexpr uint8_t kMagic0 = 0x55;  // 'U'
constexpr uint8_t kMagic1 = 0x52;  // 'R'
constexpr size_t kMinMad = 24;     // a MAD header

class Writer {
 public:
  Writer(FrameType type, std::vector<uint8_t>* out) : out_(*out) {
    out_.clear();
    out_.insert(out_.end(), {kMagic0, kMagic1, kFrameVersion, static_cast<uint8_t>(type), 0, 0,
                             0, 0});
  }
  void U8(uint8_t v) { out_.push_back(v); }
  void U16(uint16_t v) { Le(v, 2); }
  void U32(uint32_t v) { Le(v, 4); }
  void U64(uint64_t v) { Le(v, 8); }
  void Bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  void Str(const std::string& s) {
    U16(static_cast<uint16_t>(std::min<size_t>(s.size(), UINT16_MAX)));
    out_.insert(out_.end(), s.begin(), s.begin() + std::min<size_t>(s.size(), UINT16_MAX));
  }

 private:
  void Le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& out_;
};

// Reads the body after the header; the first short field is named in status().
class Reader {
 public:
  Reader(const char* frame, std::span<const uint8_t> bytes)
      : frame_(frame), b_(bytes.subspan(std::min(bytes.size(), kFrameHeaderBytes))) {}
  uint8_t U8(const char* f) { return static_cast<uint8_t>(Le(f, 1)); }
  uint16_t U16(const char* f) { return static_cast<uint16_t>(Le(f, 2)); }
  uint32_t U32(const char* f) { return static_cast<uint32_t>(Le(f, 4)); }
  uint64_t U64(const char* f) { return Le(f, 8); }
  std::span<const uint8_t> Bytes(const char* f, size_t n) {
    if (!Need(f, n)) return {};
    auto s = b_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  std::string Str(const char* f) {
    const uint16_t n = U16(f);
    auto s = Bytes(f, n);
    return std::string(s.begin(), s.end());
  }
  std::span<const uint8_t> Rest() {
    auto s = b_.subspan(std::min(pos_, b_.size()));
    pos_ = b_.size();
    return s;
  }
  const absl::Status& status() const { return status_; }

 private:
  bool Need(const char* f, size_t n) {
    if (!status_.ok()) return false;
    if (b_.size() - pos_ < n) {
      status_ = absl::InvalidArgumentError(absl::StrCat(
          "router ", frame_, " frame: ", b_.size() + kFrameHeaderBytes, " bytes end inside ", f));
      return false;
    }
    return true;
  }
  uint64_t Le(const char* f, int n) {
    if (!Need(f, n)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t{b_[pos_ + i]} << (8 * i);
    pos_ += n;
    return v;
  }
  const char* frame_;
  std::span<const uint8_t> b_;
  size_t pos_ = 0;
  absl::Status status_;
};

absl::Status ExpectType(std::span<const uint8_t> frame, FrameType want, const char* name) {
  auto t = PeekFrame(frame);
  if (!t.ok()) return t.status();
  if (*t != want) {
    return absl::InvalidArgumentError(absl::StrCat("router frame: type ", static_cast<int>(*t),
                                                   " where ", name, " (",
                                                   static_cast<int>(want), ") was expected"));
  }
  return absl::OkStatus();
}

void WriteAddress(Writer& w, const mad::MadAddress& a) {
  w.U16(a.lid);
  w.U32(a.qpn);
  w.U32(a.qkey);
  w.U16(a.pkey_index);
  w.U8(a.sl);
  w.U8(a.path_bits);
  w.U8(a.has_grh ? 1 : 0);
  w.Bytes(a.gid.raw);
  w.U8(a.hop_limit);
  w.U8(a.traffic_class);
  w.U32(a.flow_label);
  w.U8(a.sgid_index);
}

mad::MadAddress ReadAddress(Reader& r) {
  mad::MadAddress a;
  a.lid = r.U16("address.lid");
  a.qpn = r.U32("address.qpn");
  a.qkey = r.U32("address.qkey");
  a.pkey_index = r.U16("address.pkey_index");
  a.sl = r.U8("address.sl");
  a.path_bits = r.U8("address.path_bits");
  a.has_grh = r.U8("address.has_grh") != 0;
  auto gid = r.Bytes("address.gid", 16);
  if (gid.size() == 16) std::memcpy(a.gid.raw.data(), gid.data(), 16);
  a.hop_limit = r.U8("address.hop_limit");
  a.traffic_class = r.U8("address.traffic_class");
  a.flow_label = r.U32("address.flow_label");
  a.sgid_index = r.U8("address.sgid_index");
  return a;
}

// code u32, message (u16 length + bytes), errno u32 (0: none).
void WriteStatus(Writer& w, const absl::Status& s) {
  w.U32(static_cast<uint32_t>(s.code()));
  w.Str(std::string(s.message()));
  w.U32(static_cast<uint32_t>(std::max(0, mad::ErrnoOf(s))));
}

// The decoded status goes to *out; the result is the decode's own verdict
// (StatusOr<Status> could not tell the two apart).
absl::Status ReadStatus(Reader& r, const char* frame, absl::Status* out) {
  const uint32_t code = r.U32("code");
  std::string msg = r.Str("message");
  const uint32_t err = r.U32("errno");
  if (!r.status().ok()) return r.status();
  if (code > 16) return absl::InvalidArgumentError(absl::StrCat("router ", frame, ": code ", code));
  // 4095: the kernel's MAX_ERRNO.
  if (err > 4095 || (err != 0 && code == 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("router ", frame, ": errno ", err, " with code ", code,
                     "; an errno is at most 4095 and comes only with an error"));
  }
  *out = absl::Status(static_cast<absl::StatusCode>(code), msg);
  if (err != 0) *out = mad::WithErrno(std::move(*out), static_cast<int>(err));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<FrameType> PeekFrame(std::span<const uint8_t> frame) {
  if (frame.size() < kFrameHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat("router frame: ", frame.size(),
                                                   " bytes; the header alone is 8"));
  }
  if (frame[0] != kMagic0 || frame[1] != kMagic1) {
    return absl::InvalidArgumentError("router frame: bad magic (not a uscmd peer)");
  }
  if (frame[2] != kFrameVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "router frame: version ", frame[2], "; this build speaks version ", kFrameVersion));
  }
  if (frame[3] < 1 || frame[3] > 9) {
    return absl::InvalidArgumentError(absl::StrCat("router frame: unknown type ", frame[3]));
  }
  return static_cast<FrameType>(frame[3]);
}

absl::optional<uint8_t> OtherReleaseVersion(std::span<const uint8_t> frame) {
  if (frame.size() < 4 || frame[0] != kMagic0 || frame[1] != kMagic1) return absl::nullopt;
  if (frame[2] == kFrameVersion) return absl::nullopt;
  return frame[2];
}

absl::Status OtherReleaseError(uint8_t uscmd_version, uint8_t library_version,
                               absl::string_view uscmd) {
  return absl::FailedPreconditionError(absl::StrCat(
      "the uscmd", uscmd.empty() ? "" : " at ", uscmd, " speaks router frame version ",
      uscmd_version, " and the library version ", library_version,
      ": they come from different uscm releases. Restart uscmd with the library's release once "
      "the programs it serves have ended (one started on demand exits by itself 30 s after "
      "its last program; under systemd: systemctl restart uscmd.socket)"));
}

std::vector<uint8_t> EncodeHello(const Hello& h) {
  std::vector<uint8_t> out;
  Writer w(FrameType::kHello, &out);
  w.U32(h.pid);
  return out;
}

std::vector<uint8_t> EncodeWelcome(const Welcome& wl) {
  std::vector<uint8_t> out;
  Writer w(FrameType::kWelcome, &out);
  w.U8(wl.slot);
  w.U8(wl.comm_id_prefix_bits);
  w.U32(wl.comm_id_prefix);
  w.U8(wl.kernel_rmpp ? 1 : 0);
  w.U32(wl.max_receive_size);
  const mad::LocalPort& p = wl.port;
  w.Str(p.ca_name);
  w.U8(p.port_num);
  w.U8(static_cast<uint8_t>(p.link_layer));
  w.U16(p.lid);
  w.U8(p.lmc);
  w.U16(p.sm_lid);
  w.U8(p.sm_sl);
  w.Bytes(p.gid.raw);
  w.U64(p.node_guid);
  w.U16(static_cast<uint16_t>(std::min<size_t>(p.pkeys.size(), UINT16_MAX)));
  for (size_t i = 0; i < p.pkeys.size() && i < UINT16_MAX; ++i) w.U16(p.pkeys[i]);
  return out;
}

void EncodeMad(const mad::MadAddress& a, std::span<const uint8_t> mad, std::vector<uint8_t>* out) {
  Writer w(FrameType::kMad, out);
  WriteAddress(w, a);
  w.Bytes(mad);
}

std::vector<uint8_t> EncodeClaim(FrameType type, const ClaimFrame& c) {
  std::vector<uint8_t> out;
  Writer w(type, &out);
  w.U32(c.request);
  w.U64(c.service_id);
  w.U64(c.mask);
  w.U8(c.reuse ? 1 : 0);
  w.U8(static_cast<uint8_t>(c.address.family));
  w.Bytes(c.address.ip);
  w.U8(c.address.af_only ? 1 : 0);
  w.U8(static_cast<uint8_t>(c.kind));
  return out;
}

std::vector<uint8_t> EncodeReply(const ReplyFrame& r) {
  std::vector<uint8_t> out;
  Writer w(FrameType::kReply, &out);
  w.U32(r.request);
  WriteStatus(w, r.status);
  return out;
}

std::vector<uint8_t> EncodeLease(const LeaseFrame& l) {
  std::vector<uint8_t> out;
  Writer w(FrameType::kLease, &out);
  w.U32(l.request);
  w.U16(l.port_space);
  return out;
}

std::vector<uint8_t> EncodeLeaseReply(const LeaseReplyFrame& r) {
  std::vector<uint8_t> out;
  Writer w(FrameType::kLeaseReply, &out);
  w.U32(r.request);
  WriteStatus(w, r.status);
  w.U16(r.first_port);
  w.U16(r.ports);
  return out;
}

std::vector<uint8_t> EncodeRefused(const absl::Status& why) {
  std::vector<uint8_t> out;
  Writer w(FrameType::kRefused, &out);
  w.U32(static_cast<uint32_t>(why.code()));
  w.Str(std::string(why.message()));
  return out;
}

absl::StatusOr<Hello> DecodeHello(std::span<const uint8_t> frame) {
  if (auto s = ExpectType(frame, FrameType::kHello, "hello"); !s.ok()) return s;
  Reader r("hello", frame);
  Hello h;
  h.pid = r.U32("pid");
  if (!r.status().ok()) return r.status();
  return h;
}

absl::StatusOr<Welcome> DecodeWelcome(std::span<const uint8_t> frame) {
  if (auto s = ExpectType(frame, FrameType::kWelcome, "welcome"); !s.ok()) return s;
  Reader r("welcome", frame);
  Welcome wl;
  wl.slot = r.U8("slot");
  wl.comm_id_prefix_bits = r.U8("comm_id_prefix_bits");
  wl.comm_id_prefix = r.U32("comm_id_prefix");
  wl.kernel_rmpp = r.U8("kernel_rmpp") != 0;
  wl.max_receive_size = r.U32("max_receive_size");
  mad::LocalPort& p = wl.port;
  p.ca_name = r.Str("port.ca_name");
  p.port_num = r.U8("port.port_num");
  p.link_layer = static_cast<mad::LinkLayer>(r.U8("port.link_layer"));
  p.lid = r.U16("port.lid");
  p.lmc = r.U8("port.lmc");
  p.sm_lid = r.U16("port.sm_lid");
  p.sm_sl = r.U8("port.sm_sl");
  auto gid = r.Bytes("port.gid", 16);
  if (gid.size() == 16) std::memcpy(p.gid.raw.data(), gid.data(), 16);
  p.node_guid = r.U64("port.node_guid");
  const uint16_t n = r.U16("port.pkeys count");
  for (uint16_t i = 0; i < n && r.status().ok(); ++i) p.pkeys.push_back(r.U16("port.pkeys"));
  if (!r.status().ok()) return r.status();
  if (wl.slot == 0 || wl.comm_id_prefix_bits == 0 || wl.comm_id_prefix_bits >= 32) {
    return absl::InvalidArgumentError(absl::StrCat(
        "router welcome: slot ", wl.slot, " with ", wl.comm_id_prefix_bits,
        " prefix bits; slot must be >= 1 and prefix bits in 1..31"));
  }
  return wl;
}

absl::StatusOr<MadFrame> DecodeMad(std::span<const uint8_t> frame) {
  if (auto s = ExpectType(frame, FrameType::kMad, "MAD"); !s.ok()) return s;
  Reader r("MAD", frame);
  MadFrame m;
  m.address = ReadAddress(r);
  if (!r.status().ok()) return r.status();
  m.mad = r.Rest();
  if (m.mad.size() < kMinMad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "router MAD frame: MAD is ", m.mad.size(), " bytes; at least the 24-byte header is needed"));
  }
  return m;
}

absl::StatusOr<ClaimFrame> DecodeClaim(std::span<const uint8_t> frame) {
  auto t = PeekFrame(frame);
  if (!t.ok()) return t.status();
  if (*t != FrameType::kClaim && *t != FrameType::kRelease) {
    return absl::InvalidArgumentError("router frame: not a claim / release");
  }
  Reader r("claim", frame);
  ClaimFrame c;
  c.request = r.U32("request");
  c.service_id = r.U64("service_id");
  c.mask = r.U64("mask");
  const uint8_t reuse = r.U8("reuse");
  const uint8_t family = r.U8("address.family");
  auto ip = r.Bytes("address.ip", 16);
  const uint8_t af_only = r.U8("address.af_only");
  const uint8_t kind = r.U8("kind");
  if (!r.status().ok()) return r.status();
  if (reuse > 1 || af_only > 1) {
    return absl::InvalidArgumentError(absl::StrCat("router claim frame: reuse ", reuse,
                                                   ", af_only ", af_only, "; each is 0 or 1"));
  }
  if (kind != static_cast<uint8_t>(mad::ClaimKind::kBind) &&
      kind != static_cast<uint8_t>(mad::ClaimKind::kListen)) {
    return absl::InvalidArgumentError(
        absl::StrCat("router claim frame: kind ", kind, "; expected 1 (bind) or 2 (listen)"));
  }
  c.kind = static_cast<mad::ClaimKind>(kind);
  using Family = mad::ListenAddress::Family;
  if (family != 0 && family != 4 && family != 6) {
    return absl::InvalidArgumentError(absl::StrCat(
        "router claim frame: address family ", family, "; expected 0 (none), 4 or 6"));
  }
  c.reuse = reuse != 0;
  c.address.family = static_cast<Family>(family);
  std::memcpy(c.address.ip.data(), ip.data(), 16);
  c.address.af_only = af_only != 0;
  const bool ip_zero = std::all_of(ip.begin(), ip.end(), [](uint8_t b) { return b == 0; });
  if (c.address.family == Family::kNone && (!ip_zero || c.address.af_only)) {
    return absl::InvalidArgumentError(
        "router claim frame: address family 0 (none) with an IP or af_only set");
  }
  if (c.address.family == Family::kIpv4 &&
      !std::all_of(ip.begin(), ip.begin() + 12, [](uint8_t b) { return b == 0; })) {
    return absl::InvalidArgumentError(
        "router claim frame: IPv4 address with non-zero bytes before its last 4");
  }
  if (r.Rest().size() != 0) {
    return absl::InvalidArgumentError("router claim frame: bytes after kind");
  }
  return c;
}

absl::StatusOr<ReplyFrame> DecodeReply(std::span<const uint8_t> frame) {
  if (auto s = ExpectType(frame, FrameType::kReply, "reply"); !s.ok()) return s;
  Reader r("reply", frame);
  ReplyFrame rep;
  rep.request = r.U32("request");
  if (absl::Status s = ReadStatus(r, "reply", &rep.status); !s.ok()) return s;
  return rep;
}

absl::StatusOr<LeaseFrame> DecodeLease(std::span<const uint8_t> frame) {
  if (auto s = ExpectType(frame, FrameType::kLease, "lease"); !s.ok()) return s;
  Reader r("lease", frame);
  LeaseFrame l;
  l.request = r.U32("request");
  l.port_space = r.U16("port_space");
  if (!r.status().ok()) return r.status();
  if (l.port_space != 0x0002 && l.port_space != 0x0106 && l.port_space != 0x0111 &&
      l.port_space != 0x013F) {
    return absl::InvalidArgumentError(absl::StrCat(
        "router lease frame: port space 0x", absl::Hex(l.port_space),
        "; expected 0x0002 (IPOIB), 0x0106 (TCP), 0x0111 (UDP) or 0x013F (IB)"));
  }
  if (r.Rest().size() != 0) {
    return absl::InvalidArgumentError("router lease frame: bytes after port_space");
  }
  return l;
}

absl::StatusOr<LeaseReplyFrame> DecodeLeaseReply(std::span<const uint8_t> frame) {
  if (auto s = ExpectType(frame, FrameType::kLeaseReply, "lease reply"); !s.ok()) return s;
  Reader r("lease reply", frame);
  LeaseReplyFrame rep;
  rep.request = r.U32("request");
  const absl::Status decoded = ReadStatus(r, "lease reply", &rep.status);
  rep.first_port = r.U16("first_port");
  rep.ports = r.U16("ports");
  if (!r.status().ok()) return r.status();
  if (!decoded.ok()) return decoded;
  if (rep.status.ok() != (rep.ports != 0) ||
      uint32_t{rep.first_port} + rep.ports > 65536 || (rep.ports != 0 && rep.first_port == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "router lease reply: ports ", rep.first_port, " + ", rep.ports, " with code ",
        static_cast<int>(rep.status.code()),
        "; an OK reply names 1.. ports within 1..65535, an error none"));
  }
  return rep;
}

absl::StatusOr<mad::PortLease> LeaseOf(const LeaseReplyFrame& reply,
                                       std::shared_ptr<mad::PortPage> page) {
  if (!reply.status.ok()) return reply.status;
  if (page == nullptr || page->size() < reply.ports) {
    return absl::InternalError(absl::StrCat("router lease reply: ", reply.ports,
                                            " ports but a page of ",
                                            page == nullptr ? 0 : page->size(), " bytes"));
  }
  return mad::PortLease{reply.first_port, std::move(page)};
}

absl::StatusOr<RefusedFrame> DecodeRefused(std::span<const uint8_t> frame) {
  if (auto s = ExpectType(frame, FrameType::kRefused, "refused"); !s.ok()) return s;
  Reader r("refused", frame);
  const uint32_t code = r.U32("code");
  std::string msg = r.Str("message");
  if (!r.status().ok()) return r.status();
  if (code == 0 || code > 16) {
    return absl::InvalidArgumentError(absl::StrCat("router refused: code ", code));
  }
  return RefusedFrame{absl::Status(static_cast<absl::StatusCode>(code), msg)};
}

}  // namespace uscm::router

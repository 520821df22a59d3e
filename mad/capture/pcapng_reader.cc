#include "mad/capture/pcapng_reader.h"

#include <algorithm>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace uscm::mad::capture {
namespace {

constexpr uint32_t kShb = 0x0A0D0D0A, kIdb = 1, kPb = 2, kSpb = 3, kEpb = 6;
constexpr uint32_t kByteOrderMagic = 0x1A2B3C4D;

struct Interface {
  uint32_t link_type = 0;
  // Timestamp unit: 10^-exp (decimal) or 2^-exp; default microseconds.
  bool binary = false;
  uint8_t exp = 6;
  int64_t offset_s = 0;

  int64_t Nanos(uint64_t ticks) const {
    const unsigned __int128 t = ticks;
    int64_t ns = 0;
    if (binary) {
      ns = static_cast<int64_t>((t * 1000000000u) >> exp);
    } else if (exp <= 9) {
      uint64_t mul = 1;
      for (int i = exp; i < 9; ++i) mul *= 10;
      ns = static_cast<int64_t>(t * mul);
    } else {
      uint64_t div = 1;
      for (int i = 9; i < exp && i < 28; ++i) div *= 10;
      ns = static_cast<int64_t>(t / div);
    }
    // Unsigned arithmetic: a garbage if_tsoffset wraps instead of overflowing.
    return static_cast<int64_t>(static_cast<uint64_t>(ns) +
                                static_cast<uint64_t>(offset_s) * 1000000000u);
  }
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> f) : f_(f) {}

  absl::StatusOr<PcapngContents> Read() {
    PcapngContents out;
    size_t pos = 0;
    while (pos < f_.size()) {
      if (f_.size() - pos < 12) return Error(pos, "block header runs past the end of the file");
      // The SHB's type is byte-order independent; its magic sets the order.
      if (Le32(pos) == kShb) {
        if (f_.size() - pos < 28) return Error(pos, "section header block is cut short");
        const uint32_t bom = Le32(pos + 8);
        if (bom == kByteOrderMagic) {
          little_ = true;
        } else if (__builtin_bswap32(bom) == kByteOrderMagic) {
          little_ = false;
        } else {
          return Error(pos, "section header has no byte-order magic");
        }
        interfaces_.clear();
      } else if (pos == 0) {
        return Error(pos, "not a pcapng file (no section header block)");
      }
      const uint32_t type = U32(pos);
      const uint32_t len = U32(pos + 4);
      if (len < 12 || len % 4 != 0 || len > f_.size() - pos) {
        return Error(pos, absl::StrCat("block length ", len, " is invalid or runs past the end"));
      }
      std::span<const uint8_t> body = f_.subspan(pos + 8, len - 12);
      absl::Status s = Block(type, body, pos, out);
      if (!s.ok()) return s;
      pos += len;
    }
    return out;
  }

 private:
  uint32_t Le32(size_t at) const {
    return uint32_t{f_[at]} | uint32_t{f_[at + 1]} << 8 | uint32_t{f_[at + 2]} << 16 |
           uint32_t{f_[at + 3]} << 24;
  }
  uint32_t U32(size_t at) const {
    const uint32_t v = Le32(at);
    return little_ ? v : __builtin_bswap32(v);
  }
  uint16_t U16(size_t at) const {
    const uint16_t v = static_cast<uint16_t>(f_[at] | f_[at + 1] << 8);
    return little_ ? v : static_cast<uint16_t>(v >> 8 | v << 8);
  }
  size_t At(std::span<const uint8_t> s) const { return static_cast<size_t>(s.data() - f_.data()); }

  absl::Status Error(size_t pos, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("pcapng block at byte ", pos, ": ", what));
  }

  absl::Status Block(uint32_t type, std::span<const uint8_t> body, size_t pos,
                     PcapngContents& out) {
    const size_t b = At(body);
    if (type == kIdb) {
      if (body.size() < 8) return Error(pos, "interface description block is cut short");
      Interface i;
      i.link_type = U16(b);
      for (size_t o = b + 8; o + 4 <= b + body.size();) {
        const uint16_t code = U16(o), olen = U16(o + 2);
        if (code == 0) break;
        if (o + 4 + olen > b + body.size()) return Error(pos, "interface option runs past it");
        if (code == 9 && olen >= 1) {  // if_tsresol
          i.binary = (f_[o + 4] & 0x80) != 0;
          i.exp = f_[o + 4] & 0x7F;
          if (i.binary ? i.exp > 63 : i.exp > 27) return Error(pos, "if_tsresol out of range");
        } else if (code == 14 && olen == 8) {  // if_tsoffset
          const uint64_t hi = U32(o + 4), lo = U32(o + 8);
          i.offset_s = static_cast<int64_t>(little_ ? (lo << 32 | hi) : (hi << 32 | lo));
        }
        o += 4 + ((olen + 3u) & ~3u);
      }
      interfaces_.push_back(i);
      out.link_types.insert(i.link_type);
      return absl::OkStatus();
    }
    if (type != kEpb && type != kSpb && type != kPb) return absl::OkStatus();  // skipped
    PcapngPacket p;
    size_t data_at = 0, caplen = 0;
    if (type == kSpb) {
      if (body.size() < 4) return Error(pos, "simple packet block is cut short");
      p.original_length = U32(b);
      data_at = b + 4;
      caplen = std::min<size_t>(p.original_length, body.size() - 4);
    } else {
      if (body.size() < 20) return Error(pos, "packet block is cut short");
      p.interface = type == kPb ? U16(b) : U32(b);
      caplen = U32(b + 12);
      p.original_length = U32(b + 16);
      data_at = b + 20;
      if (caplen > body.size() - 20) return Error(pos, "captured length runs past the block");
    }
    if (p.interface >= interfaces_.size()) {
      return Error(pos, absl::StrCat("packet names interface ", p.interface, "; the section has ",
                                     interfaces_.size()));
    }
    const Interface& i = interfaces_[p.interface];
    p.link_type = i.link_type;
    if (type != kSpb) p.time_ns = i.Nanos(uint64_t{U32(b + 4)} << 32 | U32(b + 8));
    p.data.assign(f_.begin() + static_cast<long>(data_at),
                  f_.begin() + static_cast<long>(data_at + caplen));
    out.packets.push_back(std::move(p));
    return absl::OkStatus();
  }

  std::span<const uint8_t> f_;
  bool little_ = true;
  std::vector<Interface> interfaces_;
};

}  // namespace

bool IsPcapng(std::span<const uint8_t> file) {
  return file.size() >= 4 && file[0] == 0x0A && file[1] == 0x0D && file[2] == 0x0D &&
         file[3] == 0x0A;
}

absl::StatusOr<PcapngContents> ReadPcapng(std::span<const uint8_t> file) {
  return Reader(file).Read();
}

}  // namespace uscm::mad::capture

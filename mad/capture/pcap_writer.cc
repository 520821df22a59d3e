#include "mad/capture/pcap_writer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace uscm::mad::capture {
namespace {

constexpr int64_t kNanosPerSecond = 1000000000;
constexpr int64_t kMaxSeconds = 0xFFFFFFFF;

void PutLe16(std::vector<uint8_t>& v, uint32_t x) {
  v.push_back(static_cast<uint8_t>(x));
  v.push_back(static_cast<uint8_t>(x >> 8));
}
void PutLe32(std::vector<uint8_t>& v, uint32_t x) {
  PutLe16(v, x);
  PutLe16(v, x >> 16);
}
void PutBe16(std::vector<uint8_t>& v, uint32_t x) {
  v.push_back(static_cast<uint8_t>(x >> 8));
  v.push_back(static_cast<uint8_t>(x));
}

// Exported-PDU tags before the packet: dissector name, then end of tags.
void AppendExportedPduTags(std::vector<uint8_t>& v) {
  const size_t name_len = sizeof(kExpPduDissector) - 1;
  const size_t padded = (name_len + 3) & ~size_t{3};
  PutBe16(v, kExpPduTagDissectorName);
  PutBe16(v, static_cast<uint32_t>(padded));
  v.insert(v.end(), kExpPduDissector, kExpPduDissector + name_len);
  v.insert(v.end(), padded - name_len, 0);
  PutBe16(v, kExpPduTagEnd);
  PutBe16(v, 0);
}

void AppendErfHeader(std::vector<uint8_t>& v, int64_t seconds, int64_t nanos,
                     size_t packet_size) {
  // 32.32 fixed point: fraction = nanos * 2^32 / 1e9 (fits: nanos < 1e9).
  const uint64_t fraction =
      (static_cast<uint64_t>(nanos) << 32) / static_cast<uint64_t>(kNanosPerSecond);
  const uint64_t ts = (static_cast<uint64_t>(seconds) << 32) | fraction;
  PutLe32(v, static_cast<uint32_t>(ts));
  PutLe32(v, static_cast<uint32_t>(ts >> 32));
  v.push_back(kErfTypeInfiniBand);
  v.push_back(kErfFlagVaryingLength);
  PutBe16(v, static_cast<uint32_t>(kErfHeaderSize + packet_size));  // rlen
  PutBe16(v, 0);                                                    // lctr
  PutBe16(v, static_cast<uint32_t>(packet_size));                   // wlen
}

size_t FramingSize(CaptureLinkType t) {
  if (t == CaptureLinkType::kErf) return kErfHeaderSize;
  return 4 + ((sizeof(kExpPduDissector) - 1 + 3) & ~size_t{3}) + 4;
}

std::vector<uint8_t> FileHeader(CaptureLinkType t) {
  std::vector<uint8_t> v;
  PutLe32(v, kPcapMagicNanos);
  PutLe16(v, 2);  // version 2.4
  PutLe16(v, 4);
  PutLe32(v, 0);  // thiszone
  PutLe32(v, 0);  // sigfigs
  PutLe32(v, kPcapSnapLen);
  PutLe32(v, static_cast<uint32_t>(t));
  return v;
}

}  // namespace

PcapWriter::PcapWriter(CaptureLinkType link_type)
    : link_type_(link_type), memory_(FileHeader(link_type)) {}

PcapWriter::PcapWriter(CaptureLinkType link_type, std::FILE* file, std::string path)
    : link_type_(link_type), file_(file), path_(std::move(path)) {}

absl::StatusOr<std::unique_ptr<PcapWriter>> PcapWriter::Create(
    const std::string& path, CaptureLinkType link_type) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot create capture file ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<PcapWriter> w(new PcapWriter(link_type, f, path));
  if (absl::Status s = w->Emit(FileHeader(link_type)); !s.ok()) return s;
  return w;
}

PcapWriter::~PcapWriter() { (void)Close(); }

absl::Status PcapWriter::Emit(std::span<const uint8_t> data) {
  if (closed_) return absl::FailedPreconditionError("capture file is closed");
  if (file_ == nullptr) {
    memory_.insert(memory_.end(), data.begin(), data.end());
    return absl::OkStatus();
  }
  if (std::fwrite(data.data(), 1, data.size(), file_) != data.size()) {
    return absl::UnavailableError(
        absl::StrCat("writing capture file ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status PcapWriter::WritePacket(TimePoint time, std::span<const uint8_t> packet) {
  const int64_t ns = time.nanos();
  if (ns < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "capture timestamp ", ns, "ns is before the epoch; pcap cannot store it"));
  }
  const int64_t seconds = ns / kNanosPerSecond;
  const int64_t frac = ns % kNanosPerSecond;
  if (seconds > kMaxSeconds) {
    return absl::InvalidArgumentError(
        absl::StrCat("capture timestamp ", seconds, "s does not fit pcap's 32-bit seconds"));
  }
  const size_t framed = FramingSize(link_type_) + packet.size();
  if (framed > kPcapSnapLen) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packet is ", packet.size(), " bytes; a record holds at most ",
        kPcapSnapLen - FramingSize(link_type_)));
  }
  record_.clear();
  PutLe32(record_, static_cast<uint32_t>(seconds));
  PutLe32(record_, static_cast<uint32_t>(frac));
  PutLe32(record_, static_cast<uint32_t>(framed));  // incl_len
  PutLe32(record_, static_cast<uint32_t>(framed));  // orig_len
  if (link_type_ == CaptureLinkType::kErf) {
    AppendErfHeader(record_, seconds, frac, packet.size());
  } else {
    AppendExportedPduTags(record_);
  }
  record_.insert(record_.end(), packet.begin(), packet.end());
  if (absl::Status s = Emit(record_); !s.ok()) return s;
  ++packets_;
  return absl::OkStatus();
}

absl::Status PcapWriter::Flush() {
  if (file_ == nullptr || closed_) return absl::OkStatus();
  if (std::fflush(file_) != 0) {
    return absl::UnavailableError(
        absl::StrCat("flushing capture file ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status PcapWriter::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  if (file_ == nullptr) return absl::OkStatus();
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("closing capture file ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace uscm::mad::capture

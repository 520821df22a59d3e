#include "mad/capture/pcap_reader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace uscm::mad::capture {
namespace {

constexpr uint32_t kPcapngMagic = 0x0A0D0D0A;

uint32_t Le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) |
         (uint32_t{p[3]} << 24);
}
uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }

absl::Status RecordError(size_t index, const std::string& what) {
  if (index == kNoRecordIndex) return absl::InvalidArgumentError(what);
  return absl::InvalidArgumentError(absl::StrCat("pcap record ", index + 1, ": ", what));
}

// Returns the offset of the IB packet inside an exported-PDU record.
absl::StatusOr<size_t> SkipExportedPduTags(std::span<const uint8_t> data, size_t index) {
  size_t pos = 0;
  bool infiniband = false;
  while (true) {
    if (data.size() - pos < 4) {
      return RecordError(index, absl::StrCat("exported-PDU tag header at byte ", pos,
                                             " runs past the record (", data.size(),
                                             " bytes)"));
    }
    const uint16_t type = Be16(&data[pos]);
    const uint16_t len = Be16(&data[pos + 2]);
    pos += 4;
    if (type == kExpPduTagEnd) break;
    if (len > data.size() - pos) {
      return RecordError(index, absl::StrCat("exported-PDU tag ", type, " claims ", len,
                                             " bytes; only ", data.size() - pos, " remain"));
    }
    if (type == kExpPduTagDissectorName) {
      std::string name(reinterpret_cast<const char*>(&data[pos]), len);
      name.erase(name.find_last_not_of('\0') + 1);
      if (name != kExpPduDissector) {
        return RecordError(index, absl::StrCat("exported-PDU dissector is '", name,
                                               "'; only 'infiniband' is supported"));
      }
      infiniband = true;
    }
    pos += len;
  }
  if (!infiniband) {
    return RecordError(index, "exported-PDU record names no dissector (tag 12)");
  }
  return pos;
}

// Returns the offset of the IB packet inside an ERF record and its length.
absl::StatusOr<std::pair<size_t, size_t>> SkipErfHeader(std::span<const uint8_t> data,
                                                        size_t index) {
  if (data.size() < kErfHeaderSize) {
    return RecordError(index, absl::StrCat("ERF header needs ", kErfHeaderSize,
                                           " bytes; record has ", data.size()));
  }
  const uint8_t type = data[8] & kErfTypeMask;
  if (type != kErfTypeInfiniBand) {
    return RecordError(index, absl::StrCat("ERF type is ", type,
                                           "; only 21 (InfiniBand) is supported"));
  }
  const size_t rlen = Be16(&data[10]);
  const size_t wlen = Be16(&data[14]);
  size_t pos = kErfHeaderSize;
  bool more = (data[8] & 0x80) != 0;
  while (more) {  // extension headers: 8 bytes each, bit 7 of byte 0 = "more"
    if (data.size() - pos < 8) {
      return RecordError(index, "ERF extension header runs past the record");
    }
    more = (data[pos] & 0x80) != 0;
    pos += 8;
  }
  if (rlen < pos || rlen > data.size()) {
    return RecordError(index, absl::StrCat("ERF rlen is ", rlen, "; headers need ", pos,
                                           " and the record has ", data.size()));
  }
  // rlen may include padding after the packet; wlen is the packet's length.
  return std::make_pair(pos, std::min(rlen - pos, wlen));
}

}  // namespace

absl::StatusOr<std::pair<size_t, size_t>> LocateIbPacket(CaptureLinkType link,
                                                         std::span<const uint8_t> record,
                                                         size_t index) {
  switch (link) {
    case CaptureLinkType::kErf:
      return SkipErfHeader(record, index);
    case CaptureLinkType::kExportedPdu: {
      absl::StatusOr<size_t> off = SkipExportedPduTags(record, index);
      if (!off.ok()) return off.status();
      return std::make_pair(*off, record.size() - *off);
    }
    case CaptureLinkType::kEthernet:
      break;
  }
  return std::make_pair(size_t{0}, record.size());  // the whole frame (roce_frame.h)
}

absl::StatusOr<PcapContents> ReadPcap(std::span<const uint8_t> file) {
  if (file.size() < kPcapFileHeaderSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pcap file is ", file.size(), " bytes; the file header alone is ",
        kPcapFileHeaderSize));
  }
  const uint32_t magic_le = Le32(file.data());
  if (magic_le == kPcapngMagic) {
    return absl::InvalidArgumentError(
        "file is pcapng; convert it with `editcap -F pcap in.pcapng out.pcap`");
  }
  bool little = true;
  bool nanos = false;
  if (magic_le == kPcapMagicMicros || magic_le == kPcapMagicNanos) {
    nanos = magic_le == kPcapMagicNanos;
  } else if (Be32(file.data()) == kPcapMagicMicros || Be32(file.data()) == kPcapMagicNanos) {
    little = false;
    nanos = Be32(file.data()) == kPcapMagicNanos;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("not a pcap file (magic 0x%08x)", magic_le));
  }
  auto u32 = [little](const uint8_t* p) { return little ? Le32(p) : Be32(p); };
  PcapContents out;
  const uint32_t link = u32(&file[20]) & 0x0FFFFFFF;  // upper bits: FCS info
  if (link == static_cast<uint32_t>(CaptureLinkType::kExportedPdu)) {
    out.link_type = CaptureLinkType::kExportedPdu;
  } else if (link == static_cast<uint32_t>(CaptureLinkType::kErf)) {
    out.link_type = CaptureLinkType::kErf;
  } else if (link == static_cast<uint32_t>(CaptureLinkType::kEthernet)) {
    out.link_type = CaptureLinkType::kEthernet;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "pcap link type is ", link,
        "; only 252 (exported PDU), 197 (ERF) and 1 (Ethernet) are supported"));
  }
  size_t pos = kPcapFileHeaderSize;
  for (size_t index = 0; pos < file.size(); ++index) {
    if (file.size() - pos < kPcapRecordHeaderSize) {
      return RecordError(index, absl::StrCat("file ends inside the record header (",
                                             file.size() - pos, " of ",
                                             kPcapRecordHeaderSize, " bytes)"));
    }
    const uint8_t* h = &file[pos];
    const uint32_t seconds = u32(h);
    const uint32_t fraction = u32(h + 4);
    const uint32_t incl = u32(h + 8);
    if (fraction >= (nanos ? 1000000000u : 1000000u)) {
      return RecordError(index, absl::StrCat("timestamp fraction ", fraction,
                                             nanos ? "ns" : "us", " is not below 1s"));
    }
    if (incl > kPcapMaxRecord) {
      return RecordError(index, absl::StrCat("record length ", incl, " exceeds ",
                                             kPcapMaxRecord, "; the file is corrupt"));
    }
    pos += kPcapRecordHeaderSize;
    if (file.size() - pos < incl) {
      return RecordError(index, absl::StrCat("record claims ", incl,
                                             " bytes; the file ends after ",
                                             file.size() - pos));
    }
    std::span<const uint8_t> data = file.subspan(pos, incl);
    pos += incl;
    PcapRecord r;
    r.time = TimePoint::FromNanos(int64_t{seconds} * 1000000000 +
                                  int64_t{fraction} * (nanos ? 1 : 1000));
    r.original_length = u32(h + 12);
    absl::StatusOr<std::pair<size_t, size_t>> where = LocateIbPacket(out.link_type, data, index);
    if (!where.ok()) return where.status();
    r.packet_offset = where->first;
    const auto packet = data.subspan(where->first, where->second);
    r.packet.assign(packet.begin(), packet.end());
    out.records.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<PcapContents> ReadPcapFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot open capture file ", path, ": ", std::strerror(errno)));
  }
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  if (in.bad()) {
    return absl::UnavailableError(absl::StrCat("reading capture file ", path));
  }
  absl::StatusOr<PcapContents> c = ReadPcap(bytes);
  if (!c.ok()) {
    return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  }
  return c;
}

}  // namespace uscm::mad::capture

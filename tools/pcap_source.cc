#include "tools/pcap_source.h"

#include <pcap/pcap.h>
#include <poll.h>

#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace uscm::tools {

absl::StatusOr<std::unique_ptr<PcapSource>> PcapSource::OpenFile(const std::string& path) {
  {
    // libpcap 1.10 reads a pcapng file of one link type only; a mixed one
    // goes through our reader (libpcap's error otherwise).
    std::ifstream in(path, std::ios::binary);
    char magic[4] = {};
    if (in.read(magic, 4) && mad::capture::IsPcapng(std::span<const uint8_t>(
                                 reinterpret_cast<const uint8_t*>(magic), 4))) {
      in.seekg(0);
      const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                       std::istreambuf_iterator<char>());
      auto contents = mad::capture::ReadPcapng(bytes);
      if (contents.ok() && contents->link_types.size() > 1) {
        std::unique_ptr<PcapSource> s(new PcapSource(nullptr, false));
        s->own_ = std::move(*contents);
        return s;
      }
    }
  }
  char err[PCAP_ERRBUF_SIZE] = "";
  pcap_t* p =
      pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  if (p == nullptr) return absl::InvalidArgumentError(err);
  return std::unique_ptr<PcapSource>(new PcapSource(p, false));
}

absl::StatusOr<std::unique_ptr<PcapSource>> PcapSource::OpenLive(const std::string& netdev) {
  char err[PCAP_ERRBUF_SIZE] = "";
  pcap_t* p = pcap_create(netdev.c_str(), err);
  if (p == nullptr) return absl::InvalidArgumentError(err);
  std::unique_ptr<PcapSource> s(new PcapSource(p, true));
  pcap_set_snaplen(p, 65535);
  pcap_set_timeout(p, 100);
  pcap_set_immediate_mode(p, 1);
  pcap_set_tstamp_precision(p, PCAP_TSTAMP_PRECISION_NANO);  // best effort
  if (const int rc = pcap_activate(p); rc < 0) {
    std::string why = pcap_geterr(p);
    if (rc == PCAP_ERROR_PERM_DENIED) {
      absl::StrAppend(&why, " (capturing needs root or CAP_NET_RAW)");
    } else if (rc == PCAP_ERROR_NO_SUCH_DEVICE) {
      absl::StrAppend(&why, " (no network interface '", netdev, "'; `ip link` lists them)");
    }
    return absl::FailedPreconditionError(absl::StrCat("capture on ", netdev, ": ", why));
  }
  bpf_program filter;
  if (pcap_compile(p, &filter, kRoceFilter, 1, PCAP_NETMASK_UNKNOWN) != 0) {
    return absl::InternalError(absl::StrCat("capture filter: ", pcap_geterr(p)));
  }
  const int rc = pcap_setfilter(p, &filter);
  pcap_freecode(&filter);
  if (rc != 0) return absl::InternalError(absl::StrCat("capture filter: ", pcap_geterr(p)));
  // In immediate mode a read waits for a packet however long it takes: Next
  // polls the descriptor for 100 ms and reads without blocking.
  if (pcap_setnonblock(p, 1, err) != 0) return absl::InternalError(err);
  return s;
}

PcapSource::~PcapSource() {
  if (pcap_ != nullptr) pcap_close(pcap_);
}

std::set<uint32_t> PcapSource::link_types() const {
  if (pcap_ == nullptr) return own_.link_types;
  return {static_cast<uint32_t>(pcap_datalink(pcap_))};
}

absl::StatusOr<absl::optional<PcapSource::Packet>> PcapSource::Next() {
  if (pcap_ == nullptr) {
    if (next_ >= own_.packets.size()) return absl::optional<Packet>();
    const mad::capture::PcapngPacket& p = own_.packets[next_++];
    Packet pk;
    pk.time = mad::TimePoint::FromNanos(p.time_ns);
    pk.link_type = p.link_type;
    pk.data = p.data;
    pk.original_length = p.original_length;
    return absl::optional<Packet>(pk);
  }
  if (live_) {
    pollfd pfd{pcap_get_selectable_fd(pcap_), POLLIN, 0};
    if (pfd.fd >= 0 && poll(&pfd, 1, 100) == 0) return absl::optional<Packet>();
  }
  pcap_pkthdr* h = nullptr;
  const u_char* data = nullptr;
  switch (pcap_next_ex(pcap_, &h, &data)) {
    case 1: {
      Packet pk;
      // At nanosecond precision tv_usec holds nanoseconds.
      const int64_t frac = pcap_get_tstamp_precision(pcap_) == PCAP_TSTAMP_PRECISION_NANO
                               ? int64_t{h->ts.tv_usec}
                               : int64_t{h->ts.tv_usec} * 1000;
      pk.time = mad::TimePoint::FromNanos(int64_t{h->ts.tv_sec} * 1000000000 + frac);
      pk.link_type = static_cast<uint32_t>(pcap_datalink(pcap_));
      pk.data = std::span<const uint8_t>(data, h->caplen);
      pk.original_length = h->len;
      return absl::optional<Packet>(pk);
    }
    case 0:  // live: nothing yet
    case PCAP_ERROR_BREAK:  // end of file
      return absl::optional<Packet>();
    default:
      return absl::DataLossError(pcap_geterr(pcap_));
  }
}

}  // namespace uscm::tools

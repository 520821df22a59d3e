// Frames from libpcap (Debian libpcap-dev): a pcap or pcapng file
// (pcap_open_offline, timestamps read at nanosecond precision whatever the
// file holds; a pcapng file that mixes link types, which libpcap 1.10
// refuses, through mad/capture/pcapng_reader.h), or a live capture of RoCE traffic on a netdev (UDP port 4791
// and EtherType 0x8915, with or without VLAN tags). Decoding is
// mad/capture/frame_decode.h's.
#ifndef USCM_TOOLS_PCAP_SOURCE_H_
#define USCM_TOOLS_PCAP_SOURCE_H_

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "mad/capture/pcapng_reader.h"
#include "mad/time.h"

struct pcap;  // libpcap's pcap_t

namespace uscm::tools {

// The capture filter --live installs.
inline constexpr char kRoceFilter[] =
    "udp port 4791 or ether proto 0x8915 or (vlan and (udp port 4791 or ether proto 0x8915))";

class PcapSource {
 public:
  struct Packet {
    mad::TimePoint time;
    uint32_t link_type = 0;
    std::span<const uint8_t> data;  // valid until the next call to Next
    uint32_t original_length = 0;
  };

  static absl::StatusOr<std::unique_ptr<PcapSource>> OpenFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<PcapSource>> OpenLive(const std::string& netdev);
  ~PcapSource();
  PcapSource(const PcapSource&) = delete;
  PcapSource& operator=(const PcapSource&) = delete;

  // The next packet; nullopt at the end of a file, or (live) when none came
  // within 100 ms.
  absl::StatusOr<absl::optional<Packet>> Next();
  bool live() const { return live_; }
  // The link types of the source's packets (one, unless a mixed pcapng).
  std::set<uint32_t> link_types() const;

 private:
  explicit PcapSource(pcap* p, bool live) : pcap_(p), live_(live) {}
  pcap* pcap_;  // null: packets_ from our pcapng reader
  bool live_;
  mad::capture::PcapngContents own_;
  size_t next_ = 0;
};

}  // namespace uscm::tools

#endif  // USCM_TOOLS_PCAP_SOURCE_H_

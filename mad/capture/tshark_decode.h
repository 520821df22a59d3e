// Test-only: an independent decoder for our wire output. Runs tshark (the
// Wireshark 4.0 InfiniBand dissector) on a capture and flattens its JSON
// into, per frame, field name -> every occurrence with its value and its
// position relative to the IB packet and to the MAD.
//
//   std::vector<std::vector<uint8_t>> mads = {req_bytes, rep_bytes};
//   absl::StatusOr<std::vector<TsharkFrame>> frames = DecodeMadsWithTshark(mads);
//   absl::StatusOr<TsharkField> f = (*frames)[0].Get("infiniband.cm.req.localqpn");
//   // f->show == "0x000abc", f->mad_offset == 24 + 32, f->length == 3, f->mask == 0
//
// Field names, and the few fields tshark 4.0.17 mis-decodes, are listed in the
// team's wire notes (REQ flow label / packet rate / reserved0 and a few more).
// Masked bit-fields show the value already shifted down; `mask` is relative
// to the `length` bytes at the offset.
#ifndef USCM_MAD_CAPTURE_TSHARK_DECODE_H_
#define USCM_MAD_CAPTURE_TSHARK_DECODE_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "mad/capture/ib_packet.h"
#include "mad/capture/pcap_format.h"

namespace uscm::mad::capture {

struct TsharkField {
  std::string name;
  std::string show;        // as tshark prints it: "0x0010", "34", "fe80::1", "00:11"
  // Position, from the field's X_raw entry; all nullopt if tshark gave none.
  std::string raw_hex;                  // X_raw[0]
  absl::optional<int64_t> frame_offset;   // in tshark's frame (ERF header stripped)
  absl::optional<int64_t> packet_offset;  // from the LRH's first byte (<0: framing)
  absl::optional<int64_t> mad_offset;     // from the MAD's first byte (<0: IB headers)
  int64_t length = 0;                     // bytes
  uint64_t mask = 0;                      // 0: the whole bytes

  // `show` as an unsigned number ("0x0010" hex, "34" decimal); nullopt if it
  // is not one (GIDs, byte strings, booleans shown as "True").
  absl::optional<uint64_t> AsUint() const;
};

class TsharkFrame {
 public:
  int64_t number = 0;      // frame.number, from 1
  std::string protocols;   // frame.protocols, e.g. "exported_pdu:infiniband"

  // Every occurrence of `name` in tree order; empty if absent.
  const std::vector<TsharkField>& GetAll(absl::string_view name) const;
  // Exactly one occurrence, else an error naming the frame and field.
  absl::StatusOr<TsharkField> Get(absl::string_view name) const;
  bool Has(absl::string_view name) const { return !GetAll(name).empty(); }
  // Sets every field's mad_offset from its frame_offset, the MAD starting at
  // `frame_offset` of this frame.
  void SetMadStart(int64_t frame_offset);
  const std::map<std::string, std::vector<TsharkField>, std::less<>>& fields() const {
    return fields_;
  }

 private:
  friend absl::StatusOr<std::vector<TsharkFrame>> ParseTsharkJson(
      absl::string_view json, std::span<const int64_t> packet_starts,
      std::span<const int64_t> mad_starts);
  std::map<std::string, std::vector<TsharkField>, std::less<>> fields_;
};

struct TsharkOptions {
  std::string binary = "/usr/bin/tshark";
  std::vector<std::string> extra_args;  // e.g. {"-Y", "infiniband.mad.method==0x81"}
};

// The tshark command line (without "-r path"): -n -T json -x
// --no-duplicate-keys, and --disable-protocol for the CM private-data
// heuristics (infiniband_sdp, iser, nvme-rdma, lnet) that otherwise claim frames.
std::vector<std::string> TsharkArguments(const TsharkOptions& options = {});

// Runs tshark on `pcap_path` (a capture our PcapWriter wrote, or any pcap of
// native IB packets our reader accepts). Fails, saying to run
// tools/setup.sh, if tshark is not installed. Sets HOME for tshark when the
// environment has none (Bazel's sandbox).
absl::StatusOr<std::vector<TsharkFrame>> DecodeWithTshark(
    const std::string& pcap_path, const TsharkOptions& options = {});

// Runs tshark on any capture tshark reads (pcap or pcapng, any link type:
// Ethernet RoCE v2 / v1 too). Offsets inside the MAD are taken from tshark
// itself: a frame's MAD starts where tshark put infiniband.mad.baseversion
// (frames without a MAD have no mad_offset). packet_offset is left unset.
absl::StatusOr<std::vector<TsharkFrame>> DecodeCaptureWithTshark(
    const std::string& path, const TsharkOptions& options = {});

// Wraps each MAD in a UD packet with `headers`, writes them to a capture in
// $TEST_TMPDIR (or /tmp), and decodes it: frame i is mads[i].
absl::StatusOr<std::vector<TsharkFrame>> DecodeMadsWithTshark(
    const std::vector<std::vector<uint8_t>>& mads, const UdHeaders& headers = {},
    CaptureLinkType link_type = CaptureLinkType::kExportedPdu,
    const TsharkOptions& options = {});

// Flattens `tshark -T json -x --no-duplicate-keys` output. packet_starts[i]
// and mad_starts[i] are frame i's LRH and MAD offsets inside tshark's frame
// (-1 if unknown, which leaves packet_offset / mad_offset unset).
absl::StatusOr<std::vector<TsharkFrame>> ParseTsharkJson(
    absl::string_view json, std::span<const int64_t> packet_starts,
    std::span<const int64_t> mad_starts);

}  // namespace uscm::mad::capture

#endif  // USCM_MAD_CAPTURE_TSHARK_DECODE_H_

// Helpers for the SA wire tests: random headers and GIDs, and the expected
// truncation error for every prefix of a single-record SA MAD, written out
// independently of the field tables (so a wrong table row fails the test).
#ifndef USCM_MAD_WIRE_SA_TESTING_H_
#define USCM_MAD_WIRE_SA_TESTING_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "mad/gid.h"
#include "mad/wire/rmpp.h"
#include "mad/wire/sa_header.h"

namespace uscm::mad::wire::testing {

// One field as a reader meets it: bytes [first, end) of the record. Listed in
// wire order, so the first entry with n < end names the field cut at prefix n.
struct Cut {
  size_t end;
  const char* name;
  size_t first;
};

// The field that a record-prefix of `n` bytes cuts, as "DLID (record bytes
// 40..41)" (offset 0, unit "record") or "DLID (MAD bytes 96..97)".
inline std::string ExpectedCut(const std::vector<Cut>& cuts, size_t n, size_t offset,
                               const char* unit) {
  for (const Cut& c : cuts) {
    if (n < c.end) {
      return absl::StrFormat("%s (%s bytes %d..%d) is incomplete", c.name, unit,
                             offset + c.first, offset + c.end - 1);
    }
  }
  return "";
}

// The RMPP and SA headers in front of the data (MAD bytes 24..55).
inline const std::vector<Cut>& SaHeaderCuts() {
  static const std::vector<Cut> kCuts = {
      {25, "RMPPVersion", 24},        {26, "RMPPType", 25},
      {27, "RRespTime", 26},          {28, "RMPPStatus", 27},
      {32, "SegmentNumber", 28},      {36, "PayloadLength/NewWindowLast", 32},
      {44, "SM_Key", 36},             {46, "AttributeOffset", 44},
      {48, "reserved", 46},           {56, "ComponentMask", 48},
  };
  return kCuts;
}

// The exact error substring for a single-record SA MAD cut at `n` bytes:
// header fields first, then `record` shifted to MAD byte 56, then the padding.
inline std::string ExpectedMadCut(const std::vector<Cut>& record, size_t record_bytes,
                                  size_t n) {
  if (n < 1) return "MAD header truncated: 0 of 256 bytes; BaseVersion (MAD bytes 0..0)";
  if (n < 24) return absl::StrFormat("MAD header truncated: %d of 256 bytes", n);
  if (n < 56) return ExpectedCut(SaHeaderCuts(), n, 0, "MAD");
  if (n < 56 + record_bytes) return ExpectedCut(record, n - 56, 56, "MAD");
  return absl::StrFormat("reserved (MAD bytes %d..255) is incomplete", 56 + record_bytes);
}

inline Gid RandomGid(std::mt19937_64& rng) {
  return Gid::FromParts(rng(), rng());
}

inline RmppHeader RandomRmpp(std::mt19937_64& rng) {
  RmppHeader h;
  h.version = static_cast<uint8_t>(rng());
  h.type = static_cast<RmppType>(rng());
  h.resp_time = rng() & 0x1F;
  h.active = rng() & 1;
  h.first = rng() & 1;
  h.last = rng() & 1;
  h.status = static_cast<RmppStatus>(rng());
  h.segment_number = static_cast<uint32_t>(rng());
  h.payload_length = static_cast<uint32_t>(rng());
  return h;
}

// A random envelope; AttributeOffset is 0 or `words` (the only legal values).
inline SaEnvelope RandomEnvelope(std::mt19937_64& rng, uint16_t words) {
  SaEnvelope e;
  e.method = static_cast<uint8_t>(rng());
  e.status = static_cast<uint16_t>(rng());
  e.transaction_id = rng();
  e.attribute_modifier = static_cast<uint32_t>(rng());
  e.rmpp = RandomRmpp(rng);
  e.sm_key = rng();
  e.attribute_offset = (rng() & 1) ? words : 0;
  return e;
}

}  // namespace uscm::mad::wire::testing

#endif  // USCM_MAD_WIRE_SA_TESTING_H_

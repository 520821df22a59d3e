// What tests/ibsim/cm_peer sends as private data, shared with the test that
// checks what arrived on the other node.
//
// umad2sim delivers only MAD bytes 0..223 (docs/TRANSPORTS.md); the umad
// transport zero-fills 224..255. Every CM message's private data runs to the
// end of the 256-byte MAD, so under ibsim only the part before byte 224
// survives. The offsets (IBTA vol 1 12.6, MAD offset = 24 + data offset):
//
//   message  data offset  MAD bytes   field  survives under ibsim
//   REQ      140          164..255     92    164..223 =  60 bytes
//   REP       36           60..255    196     60..223 = 164 bytes
//   REJ       84          108..255    148    108..223 = 116 bytes
//
// The AF_IB port space (RDMA_PS_IB) puts no 36-byte CMA header in the REQ,
// so the user owns all 60 surviving REQ bytes. cm_peer sends exactly the
// surviving sizes; the receiver sees the whole field: the pattern, then
// zeros up to the field size.
#ifndef USCM_TESTS_IBSIM_CM_PEER_DATA_H_
#define USCM_TESTS_IBSIM_CM_PEER_DATA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace uscm::tests {

inline constexpr size_t kIbsimMadBytes = 224;

inline constexpr size_t kReqDataMadOffset = 24 + 140;
inline constexpr size_t kRepDataMadOffset = 24 + 36;
inline constexpr size_t kRejDataMadOffset = 24 + 84;

inline constexpr size_t kReqDataSent = kIbsimMadBytes - kReqDataMadOffset;  // 60
inline constexpr size_t kRepDataSent = kIbsimMadBytes - kRepDataMadOffset;  // 164
inline constexpr size_t kRejDataSent = kIbsimMadBytes - kRejDataMadOffset;  // 116

// The fields as an AF_IB rdma_cm user sees them (api/rdma_cm/rdma_cm.h).
inline constexpr size_t kReqDataField = 92;
inline constexpr size_t kRepDataField = 196;
inline constexpr size_t kRejDataField = 148;

static_assert(kReqDataSent == 60 && kRepDataSent == 164 && kRejDataSent == 116);

// Which message a pattern is for: each gets different bytes.
enum class DataTag : uint8_t { kReq = 1, kRep = 2, kRej = 3 };

// `n` seeded pseudo-random bytes (xorshift32), never all zero.
inline std::vector<uint8_t> PeerData(uint32_t seed, DataTag tag, size_t n) {
  std::vector<uint8_t> out(n);
  uint32_t x = (seed * 2654435761u) ^ (static_cast<uint32_t>(tag) * 0x9E3779B9u) ^ 0xC0FFEEu;
  if (x == 0) x = 1;
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    out[i] = static_cast<uint8_t>(x >> 8);
  }
  return out;
}

// `sent` zero-padded to `field` bytes: what the other side must receive.
inline std::vector<uint8_t> Padded(std::vector<uint8_t> sent, size_t field) {
  sent.resize(field, 0);
  return sent;
}

inline std::string Hex(const std::vector<uint8_t>& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(bytes.size() * 2);
  for (uint8_t b : bytes) {
    s.push_back(kDigits[b >> 4]);
    s.push_back(kDigits[b & 0xF]);
  }
  return s;
}

}  // namespace uscm::tests

#endif  // USCM_TESTS_IBSIM_CM_PEER_DATA_H_

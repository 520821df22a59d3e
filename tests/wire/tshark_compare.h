// Comparing tshark's decode of a MAD with the MAD's bits: the pieces both
// tshark cross-checks use (tshark_crosscheck_test: MADs our reprs emitted;
// dump_vs_tshark: what `uscm dump` printed for a capture).
//
// A tshark field covers a bit range of the MAD (its X_raw offset, length and
// mask); its value is compared with those bits of a 256-byte MAD image.
#ifndef USCM_TESTS_WIRE_TSHARK_COMPARE_H_
#define USCM_TESTS_WIRE_TSHARK_COMPARE_H_

#include <cstdint>
#include <set>
#include <span>
#include <string>

#include "absl/strings/string_view.h"
#include "mad/capture/tshark_decode.h"

namespace uscm::mad::wire {

// Lower-case hex without separators.
std::string HexOf(std::span<const uint8_t> bytes);

// Fields tshark 4.0.17 decodes wrongly (wire notes Q3, Q6, RMPP masks, Q10):
// never compared by value.
bool TsharkMisdecodes(absl::string_view name);

// tshark fields that are containers or reserved bits (infiniband.mad.data,
// infiniband.reserved, ...): their position is checked, not their name.
bool PositionOnly(absl::string_view name);

// The bit range [begin, end) inside the MAD that tshark says `f` covers;
// false when it is outside the MAD (LRH, BTH, ICRC) or has no position.
bool TsharkBits(const mad::capture::TsharkField& f, uint32_t* begin, uint32_t* end);

// Every row boundary of the tables of `mad`'s class and attribute (the MAD
// header included), in MAD bits.
std::set<uint32_t> RowBoundaries(std::span<const uint8_t> mad);

// "" when tshark's value for bits [begin, end) equals those bits of `mad`;
// else what differs ("tshark shows 0x5, we sent 0x4").
std::string CompareValue(const mad::capture::TsharkField& f, std::span<const uint8_t> mad,
                         uint32_t begin, uint32_t end);

}  // namespace uscm::mad::wire

#endif  // USCM_TESTS_WIRE_TSHARK_COMPARE_H_

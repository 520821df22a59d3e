// `uscm dump` against tshark on the same capture: every MAD the dump prints
// must be a MAD tshark decodes in the same frame (and the other way round),
// and every field tshark decodes inside it must show the bits the dump's
// field lines describe (tests/wire/dump_text.h rebuilds the MAD from them;
// the comparison is tshark_compare.h's, as in tshark_crosscheck_test).
// infiniband.mad.data covers MAD bytes 24..255, so a field tshark does not
// decode by name (ECE VendorID, the REQ flow label it misreads) is still
// compared byte for byte.
#ifndef USCM_TESTS_WIRE_DUMP_VS_TSHARK_H_
#define USCM_TESTS_WIRE_DUMP_VS_TSHARK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mad/capture/tshark_decode.h"
#include "tests/wire/dump_text.h"

namespace uscm::mad::wire {

struct DumpVsTshark {
  std::map<std::string, int64_t> mads;  // "CM REQ" -> how many MADs compared
  int64_t tshark_values = 0;   // tshark fields compared with the dump's bits
  int64_t tshark_values_equal = 0;
  int64_t fields_agreed = 0;   // dump field lines tshark decodes at the same bits, equal
  // Dump field names tshark has no field for at the same bits (compared
  // through infiniband.mad.data or a wider field instead), with a count.
  std::map<std::string, int64_t> not_named_by_tshark;
  std::vector<std::string> disagreements;  // empty: they agree
  int64_t total_mads() const;
};

DumpVsTshark CompareDumpWithTshark(const DumpText& dump,
                                   const std::vector<mad::capture::TsharkFrame>& frames);

// "24 MADs (CM DREP 4, CM DREQ 4, ...), 912 tshark values, 540 fields agree"
// then one line per disagreement.
std::string FormatReport(const DumpVsTshark& r);

}  // namespace uscm::mad::wire

#endif  // USCM_TESTS_WIRE_DUMP_VS_TSHARK_H_

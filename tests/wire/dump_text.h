// Reads back what `uscm dump --verbose` printed: per MAD line, the frame
// number and every field line ("  MAD+67[5]  REQ.TransportServiceType  0x0"),
// each placed by its layout and row in the wire tables, and the 256-byte MAD
// those lines describe (rows the printer leaves out are reserved and zero:
// printer.h prints a reserved row only when it is not zero).
//
// A line that names no row of the tables, a row printed at another position
// than the table's, or a value that is not what the row's width prints is an
// error naming the line: the printer and this reader must agree exactly.
#ifndef USCM_TESTS_WIRE_DUMP_TEXT_H_
#define USCM_TESTS_WIRE_DUMP_TEXT_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace uscm::mad::wire {

struct DumpedField {
  std::string name;        // "REQ.LocalCommID"
  uint32_t begin_bit = 0;  // MAD bits [begin_bit, end_bit)
  uint32_t end_bit = 0;
  std::string value;       // as printed
};

struct DumpedMad {
  int64_t frame = 0;        // the "#" column: the capture's frame number, from 1
  std::string src, dst;     // "192.168.78.2" (IP for RoCE v2, GID for v1, LID for IB)
  uint32_t dest_qp = 0;
  std::string summary;      // "CM REQ Send tid=... LocalCommID=..."
  std::vector<DumpedField> fields;
  std::array<uint8_t, 256> mad{};  // rebuilt from the field lines
};

struct DumpText {
  std::vector<DumpedMad> mads;
  std::vector<int64_t> not_decodable;  // frames printed as "not decodable: ..."
};

// Parses the whole output of `uscm dump --verbose FILE`.
absl::StatusOr<DumpText> ParseDumpText(absl::string_view text);

}  // namespace uscm::mad::wire

#endif  // USCM_TESTS_WIRE_DUMP_TEXT_H_

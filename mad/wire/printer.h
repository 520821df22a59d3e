// Human-readable MADs: a one-line summary and a field-by-field dump of any
// message the wire layer knows, driven by the same field tables as Parse/Emit
// (so the printer never disagrees with the codec about where a field is).
#ifndef USCM_MAD_WIRE_PRINTER_H_
#define USCM_MAD_WIRE_PRINTER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "mad/wire/field.h"

namespace uscm::mad::wire {

// Where one table sits inside a MAD of a given class and attribute.
struct Layout {
  const char* name;            // "REQ", "RMPP", "PathRecord"
  size_t offset;               // MAD byte of the table's byte 0
  std::span<const Field> rows;
  std::vector<const char*> summary;  // fields shown in the one-line summary
};

// The layouts that make up a MAD: header, then class headers, then the body.
// Empty when the class/attribute is unknown (the header alone is printed).
std::vector<const Layout*> LayoutsFor(uint8_t mgmt_class, uint16_t attribute_id);

// "CM REQ Send tid=0x0000000111223344 LocalCommID=0x11223344 ServiceID=0x..."
// Never fails: a short or unknown MAD is described as such.
std::string Summary(std::span<const uint8_t> mad);

// One line per field: "  MAD+24  REQ.LocalCommID            0x11223344".
// Reserved rows are shown only when non-zero. Byte strings print as hex with
// trailing zeros elided; 128-bit GIDs print as IPv6.
std::string Dump(std::span<const uint8_t> mad);

}  // namespace uscm::mad::wire

#endif  // USCM_MAD_WIRE_PRINTER_H_

// The registry behind the printer: which field tables make up a MAD of each
// class and attribute. Add a row here when a message gains a table.
#include "mad/wire/cm_common.h"
#include "mad/wire/cm_rtu.h"
#include "mad/wire/mad_header.h"
#include "mad/wire/printer.h"

namespace uscm::mad::wire {

std::vector<const Layout*> LayoutsFor(uint8_t mgmt_class, uint16_t attribute_id) {
  static const Layout kRtu{"RTU", kMadHeaderBytes, rtu::kRows, {"LocalCommID", "RemoteCommID"}};
  if (mgmt_class == static_cast<uint8_t>(MgmtClass::kCommMgt)) {
    switch (static_cast<CmAttr>(attribute_id)) {
      case CmAttr::kRtu: return {&kRtu};
      default: return {};
    }
  }
  return {};
}

}  // namespace uscm::mad::wire

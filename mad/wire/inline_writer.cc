#include "mad/wire/inline_writer.h"

#include "absl/strings/str_format.h"

namespace uscm::mad::wire {

absl::Status FieldRangeError(const char* what, const Field& f, uint64_t value) {
  return absl::InvalidArgumentError(absl::StrFormat("%s.%s = %d does not fit in %d bits (max %d)",
                                                    what, f.name, value, f.width,
                                                    f.max_value()));
}

}  // namespace uscm::mad::wire

#include "mad/wire/fuzz/seeds.h"

#include <array>
#include <cstdlib>

#include "mad/wire/cm_samples.h"
#include "mad/wire/cma_header.h"

namespace uscm::mad::wire::fuzz {

std::vector<std::vector<uint8_t>> Seeds() {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& mad : SampleCmMads()) out.emplace_back(mad.begin(), mad.end());
  std::array<uint8_t, cma::kHeaderBytes> cma{};
  if (!CmaHeader::Ipv4(0x0a000001, 5000, 0x0a000002).Emit(cma).ok()) std::abort();
  out.emplace_back(cma.begin(), cma.end());
  return out;
}

}  // namespace uscm::mad::wire::fuzz

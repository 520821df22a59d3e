// main() for the fuzz targets outside --config=fuzz: runs
// LLVMFuzzerTestOneInput over every file named on the command line (a
// directory means every regular file in it), or over the built-in seeds (one
// sample MAD per CM type, each of its prefixes, and the CMA header example)
// when no file is named.
//   foo_fuzzer [FILE|DIR]...        run the inputs, print "N inputs ok"
//   foo_fuzzer --write_seeds DIR    write the built-in seeds into DIR (a corpus)
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mad/wire/fuzz/seeds.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int RunOne(const std::vector<uint8_t>& input) {
  return LLVMFuzzerTestOneInput(input.data(), input.size());
}

std::vector<uint8_t> ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc == 3 && std::string(argv[1]) == "--write_seeds") {
    fs::create_directories(argv[2]);
    int i = 0;
    for (const auto& seed : uscm::mad::wire::fuzz::Seeds()) {
      std::ofstream out(fs::path(argv[2]) / ("seed-" + std::to_string(i++)), std::ios::binary);
      out.write(reinterpret_cast<const char*>(seed.data()), seed.size());
    }
    std::printf("%d seeds written to %s\n", i, argv[2]);
    return 0;
  }
  size_t n = 0;
  if (argc == 1) {
    for (const auto& seed : uscm::mad::wire::fuzz::Seeds()) {
      RunOne(seed);
      ++n;
    }
  }
  for (int a = 1; a < argc; ++a) {
    const fs::path p(argv[a]);
    if (fs::is_directory(p)) {
      for (const auto& e : fs::directory_iterator(p)) {
        if (!e.is_regular_file()) continue;
        RunOne(ReadFile(e.path()));
        ++n;
      }
    } else if (fs::is_regular_file(p)) {
      RunOne(ReadFile(p));
      ++n;
    } else {
      std::fprintf(stderr, "%s: not a file or directory\n", argv[a]);
      return 2;
    }
  }
  std::printf("%zu inputs ok\n", n);
  return 0;
}

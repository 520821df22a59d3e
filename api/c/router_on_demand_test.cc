// Which uscmd the library starts: the one installed beside it
// (tools/install.sh and tools/deb.sh layouts), nothing in a build tree.
#include "api/c/router_on_demand.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace uscm::c_api {
namespace {

namespace fs = std::filesystem;

class UscmdBesideLibraryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = getenv("TEST_TMPDIR");
    root_ = fs::path(tmp != nullptr ? tmp : "/tmp") / "prefix";
    fs::remove_all(root_);
    fs::create_directories(root_ / "bin");
    fs::create_directories(root_ / "lib" / "uscm");
  }
  void Install(const fs::path& file, fs::perms perms) {
    std::ofstream(root_ / file) << "x";
    fs::permissions(root_ / file, perms);
  }
  fs::path root_;
};

constexpr fs::perms kExecutable = fs::perms::owner_all;
constexpr fs::perms kNotExecutable = fs::perms::owner_read | fs::perms::owner_write;

TEST_F(UscmdBesideLibraryTest, DropInAndCApiFindBinUscmd) {
  Install("bin/uscmd", kExecutable);
  const std::string want = (root_ / "bin" / "uscmd").string();
  EXPECT_EQ(UscmdBesideLibrary((root_ / "lib/uscm/librdmacm.so.1").string()), want);
  EXPECT_EQ(UscmdBesideLibrary((root_ / "lib/libuscm.so.0").string()), want);
}

TEST_F(UscmdBesideLibraryTest, NothingWithoutAnExecutableUscmd) {
  EXPECT_EQ(UscmdBesideLibrary((root_ / "lib/uscm/librdmacm.so.1").string()), "");
  Install("bin/uscmd", kNotExecutable);
  EXPECT_EQ(UscmdBesideLibrary((root_ / "lib/uscm/librdmacm.so.1").string()), "");
}

TEST_F(UscmdBesideLibraryTest, NothingOutsideAnInstalledTree) {
  Install("bin/uscmd", kExecutable);
  // bazel-bin/api/librdmacm/librdmacm.so.1, and a program linked statically.
  EXPECT_EQ(UscmdBesideLibrary((root_ / "api/librdmacm/librdmacm.so.1").string()), "");
  EXPECT_EQ(UscmdBesideLibrary((root_ / "bin/uscm").string()), "");
  EXPECT_EQ(UscmdBesideLibrary((root_ / "lib/uscm-test").string()), "");
}

}  // namespace
}  // namespace uscm::c_api

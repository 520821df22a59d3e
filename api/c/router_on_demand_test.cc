// Which uscmd the library starts: the one installed beside it
// (tools/install.sh and tools/deb.sh layouts), nothing in a build tree; a
// port whose start of several failed is not started again by its own open.
#include "api/c/router_on_demand.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

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

// A wildcard bind starts every port's uscmd together (StartRoutersOnDemand),
// then opens each port, whose open starts its uscmd if none serves
// (StartRouterOnDemand): a port whose uscmd just failed is not started a
// second time there, once; a later open tries again.
TEST(StartRoutersOnDemandTest, APortWhoseStartFailedIsNotStartedAgainByItsOpen) {
  const char* tmp = getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / "on-demand";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path starts = dir / "starts";
  const fs::path uscmd = dir / "failing-uscmd";
  std::ofstream(uscmd) << "#!/bin/sh\necho started >> " << starts.string()
                       << "\necho 'uscmd: cannot open the umad device' >&2\nexit 1\n";
  fs::permissions(uscmd, kExecutable);
  setenv("USCM_USCMD", uscmd.c_str(), 1);
  unsetenv("USCM_NO_USCMD");
  const std::string ca = "ondemandtest" + std::to_string(getpid());
  auto started = [&] {
    std::ifstream in(starts);
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  };
  StartRoutersOnDemand({{ca, 1}, {ca, 2}});
  EXPECT_EQ(started(), 2);
  StartRouterOnDemand(ca, 1);  // the bind's open of port 1
  EXPECT_EQ(started(), 2) << "port 1's uscmd started again";
  StartRouterOnDemand(ca, 1);  // a later open
  EXPECT_EQ(started(), 3);
  StartRouterOnDemand(ca, 2);
  EXPECT_EQ(started(), 3) << "port 2's uscmd started again";
  unsetenv("USCM_USCMD");
  for (int port : {1, 2}) {
    const std::string base = "/tmp/uscmd-" + ca + "-" + std::to_string(port);
    fs::remove(base + ".log");
    fs::remove(base + ".sock.lock");
  }
}

}  // namespace
}  // namespace uscm::c_api

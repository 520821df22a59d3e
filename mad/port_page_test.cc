#include "mad/port_page.h"

#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace uscm::mad {
namespace {

using State = PortPage::State;

TEST(PortPageTest, ClaimFreeTakeGiveBackOnEachBacking) {
  auto shared = PortPage::CreateShared(4);
  ASSERT_TRUE(shared.ok()) << shared.status();
  std::shared_ptr<PortPage> local = PortPage::CreateLocal(4);
  for (PortPage* p : {shared->get(), local.get()}) {
    EXPECT_TRUE(p->Claim(0));
    EXPECT_FALSE(p->Claim(0));  // twice
    EXPECT_FALSE(p->Take(0));   // uscmd finds it claimed
    EXPECT_EQ(p->Load(0), static_cast<uint8_t>(State::kClaimed));
    EXPECT_TRUE(p->Free(0));
    EXPECT_FALSE(p->Free(0));   // not claimed any more
    EXPECT_TRUE(p->Take(1));
    EXPECT_FALSE(p->Claim(1));  // no longer the lessee's
    EXPECT_FALSE(p->Free(1));
    EXPECT_TRUE(p->GiveBack(1));
    EXPECT_TRUE(p->Claim(1));
    EXPECT_FALSE(p->GiveBack(1));  // only a taken port comes back
  }
}

TEST(PortPageTest, AMappingOfTheFdSeesTheSameBytes) {
  auto page = PortPage::CreateShared(300);
  ASSERT_TRUE(page.ok()) << page.status();
  auto lessee = PortPage::Map((*page)->fd(), 300);
  ASSERT_TRUE(lessee.ok()) << lessee.status();
  EXPECT_TRUE((*lessee)->Claim(299));
  EXPECT_FALSE((*page)->Take(299));
  EXPECT_TRUE((*page)->Take(7));
  EXPECT_FALSE((*lessee)->Claim(7));
  // Across fork as across uscmd's SCM_RIGHTS: one memory.
  const pid_t child = fork();
  if (child == 0) _exit((*lessee)->Claim(8) ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ((*page)->Load(8), static_cast<uint8_t>(State::kClaimed));
}

TEST(PortPageTest, MapRefusesAFileShorterThanTheLease) {
  auto page = PortPage::CreateShared(16);
  ASSERT_TRUE(page.ok());
  auto big = PortPage::Map((*page)->fd(), 4096);
  EXPECT_EQ(big.status().code(), absl::StatusCode::kInvalidArgument) << big.status();
}

TEST(PortPageTest, TheSharedFileIsSealedAtItsSize) {
  auto page = PortPage::CreateShared(16);
  ASSERT_TRUE(page.ok());
  // A lessee cannot shrink the file under uscmd's mapping (SIGBUS there).
  EXPECT_NE(ftruncate((*page)->fd(), 0), 0);
}

}  // namespace
}  // namespace uscm::mad

#include "mad/wire/printer.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mad/wire/cm_rtu.h"

namespace uscm::mad::wire {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::array<uint8_t, 256> Rtu() {
  RtuRepr r;
  r.envelope.transaction_id = 0x42;
  r.local_comm_id = 0x11223344;
  r.remote_comm_id = 0x55667788;
  const uint8_t pd[3] = {0xde, 0xad, 0x01};
  r.private_data = PrivateData(pd);
  std::array<uint8_t, 256> b{};
  EXPECT_TRUE(r.Emit(b).ok());
  return b;
}

TEST(PrinterTest, SummaryNamesClassMessageAndKeyFields) {
  EXPECT_EQ(Summary(Rtu()),
            "CM RTU Send tid=0x0000000000000042 LocalCommID=0x11223344 RemoteCommID=0x55667788");
}

TEST(PrinterTest, DumpShowsEveryFieldWithItsOffset) {
  const std::string d = Dump(Rtu());
  EXPECT_THAT(d, HasSubstr("MAD+0      MAD.BaseVersion"));
  EXPECT_THAT(d, HasSubstr("MAD+3[1]   MAD.Method                         0x03"));
  EXPECT_THAT(d, HasSubstr("MAD+24     RTU.LocalCommID                    0x11223344"));
  EXPECT_THAT(d, HasSubstr("RTU.PrivateData                    dead01 (+221 zero bytes)"));
  EXPECT_THAT(d, Not(HasSubstr("reserved")));  // zero reserved rows are not shown
}

TEST(PrinterTest, ShortAndUnknownMadsAreDescribedNotRejected) {
  auto b = Rtu();
  EXPECT_EQ(Summary(std::span(b).first(10)), "short MAD (10 bytes)");
  EXPECT_THAT(Summary(std::span(b).first(30)), HasSubstr("[short: 30 bytes]"));
  EXPECT_THAT(Dump(std::span(b).first(30)), HasSubstr("RTU.RemoteCommID  <truncated>"));
  b[1] = 0x42;
  EXPECT_THAT(Summary(b), HasSubstr("class 0x42 attr 0x0014 Send"));
  b[18] = 0xff;
  EXPECT_THAT(Dump(b), HasSubstr("MAD.reserved"));  // non-zero reserved bits are shown
}

}  // namespace
}  // namespace uscm::mad::wire

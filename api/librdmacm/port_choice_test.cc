#include "api/librdmacm/port_choice.h"

#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

TEST(PortChoiceTest, UnsetOrEmptyIsAnyPort) {
  PortChoice c{"stale", 9};
  std::string why;
  ASSERT_TRUE(ParsePortChoice(nullptr, &c, &why));
  EXPECT_EQ(c.ca, "");
  EXPECT_EQ(c.port, 0);
  ASSERT_TRUE(ParsePortChoice("", &c, &why));
  EXPECT_TRUE(PortChosen(c, "rxe0", 1));
  EXPECT_TRUE(PortChosen(c, "mlx5_0", 2));
  EXPECT_TRUE(DeviceChosen(c, "rxe0"));
}

TEST(PortChoiceTest, DeviceAloneIsAnyOfItsPorts) {
  PortChoice c;
  std::string why;
  ASSERT_TRUE(ParsePortChoice("rxe1", &c, &why));
  EXPECT_EQ(c.ca, "rxe1");
  EXPECT_EQ(c.port, 0);
  EXPECT_TRUE(PortChosen(c, "rxe1", 1));
  EXPECT_TRUE(PortChosen(c, "rxe1", 2));
  EXPECT_FALSE(PortChosen(c, "rxe0", 1));
  EXPECT_FALSE(PortChosen(c, "rxe10", 1));
  EXPECT_FALSE(PortChosen(c, nullptr, 1));
  EXPECT_TRUE(DeviceChosen(c, "rxe1"));
  EXPECT_FALSE(DeviceChosen(c, "rxe0")) << "not opened (devices.h)";
  EXPECT_FALSE(DeviceChosen(c, nullptr));
}

TEST(PortChoiceTest, DeviceAndPort) {
  PortChoice c;
  std::string why;
  ASSERT_TRUE(ParsePortChoice("mlx5_0:2", &c, &why));
  EXPECT_EQ(c.ca, "mlx5_0");
  EXPECT_EQ(c.port, 2);
  EXPECT_TRUE(PortChosen(c, "mlx5_0", 2));
  EXPECT_FALSE(PortChosen(c, "mlx5_0", 1));
  EXPECT_TRUE(DeviceChosen(c, "mlx5_0"));
  ASSERT_TRUE(ParsePortChoice("rxe0:255", &c, &why));
  EXPECT_EQ(c.port, 255);
}

TEST(PortChoiceTest, BadValuesSayWhatIsExpected) {
  for (const char* bad : {":1", "rxe1:", "rxe1:x", "rxe1:0", "rxe1:256", "rxe1:1:2", "rxe1:-1",
                          "rxe1:0001"}) {
    PortChoice c{"kept?", 7};
    std::string why;
    EXPECT_FALSE(ParsePortChoice(bad, &c, &why)) << bad;
    EXPECT_NE(why.find(std::string("USCM_DEVICE=") + bad + ":"), std::string::npos) << why;
    EXPECT_NE(why.find("CA:PORT"), std::string::npos) << why;
  }
}

}  // namespace
}  // namespace uscm::librdmacm

#include "mad/iba_time.h"

#include <cstdint>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace uscm::mad {
namespace {

using ::testing::HasSubstr;

IbaTimeCode Code(int v) { return *IbaTimeCode::Create(v, "test"); }

// Every code: 4.096 us * 2^t in ns (IBA ch. 12 "time value"), and Linux
// cm_convert_to_ms(t) = 1 << max(t - 8, 0) ms (digest 4.1).
struct CodeRow {
  int code;
  int64_t exact_ns;
  int64_t linux_ms;
};
constexpr CodeRow kCodeTable[] = {
    {0, 4096, 1},                   // 4.096 us
    {1, 8192, 1},                   // 8.192 us
    {2, 16384, 1},
    {3, 32768, 1},
    {4, 65536, 1},
    {5, 131072, 1},
    {6, 262144, 1},
    {7, 524288, 1},
    {8, 1048576, 1},                // 1.048576 ms
    {9, 2097152, 2},
    {10, 4194304, 4},
    {11, 8388608, 8},
    {12, 16777216, 16},
    {13, 33554432, 32},
    {14, 67108864, 64},
    {15, 134217728, 128},
    {16, 268435456, 256},           // 268.435456 ms
    {17, 536870912, 512},
    {18, 1073741824, 1024},         // 1.073741824 s (the 2024 CMA proposal)
    {19, 2147483648, 2048},
    {20, 4294967296, 4096},         // 4.294967296 s (CMA_CM_RESPONSE_TIMEOUT)
    {21, 8589934592, 8192},
    {22, 17179869184, 16384},
    {23, 34359738368, 32768},
    {24, 68719476736, 65536},       // 68.719476736 s (the "delayed" MRA)
    {25, 137438953472, 131072},
    {26, 274877906944, 262144},
    {27, 549755813888, 524288},
    {28, 1099511627776, 1048576},
    {29, 2199023255552, 2097152},
    {30, 4398046511104, 4194304},
    {31, 8796093022208, 8388608},   // 8796.093022208 s, ~2.44 h
};

TEST(IbaTimeCodeTest, AllCodesConvertExactlyAndLikeLinux) {
  ASSERT_EQ(sizeof(kCodeTable) / sizeof(kCodeTable[0]), 32u);
  for (const CodeRow& row : kCodeTable) {
    const IbaTimeCode c = Code(row.code);
    EXPECT_EQ(c.Exact(), Duration::Nanos(row.exact_ns)) << "t=" << row.code;
    EXPECT_EQ(c.LinuxApprox(), Duration::Millis(row.linux_ms))
        << "t=" << row.code;
    EXPECT_EQ(c.ToDuration(IbaTimeRounding::kExact), c.Exact());
    EXPECT_EQ(c.ToDuration(IbaTimeRounding::kLinux), c.LinuxApprox());
  }
}

TEST(IbaTimeCodeTest, ConstantIsCheckedAtCompileTime) {
  constexpr IbaTimeCode kCma = IbaTimeCode::Constant(20);
  static_assert(kCma.value() == 20);
  static_assert(kCma.Exact() == Duration::Nanos(4294967296));
  static_assert(IbaTimeCode::Constant(31).Exact() ==
                Duration::Nanos(8796093022208));
}

TEST(IbaTimeCodeTest, OutOfRangeIsAnErrorNamingTheField) {
  for (int bad : {-1, 32, 63, 255}) {
    auto c = IbaTimeCode::Create(bad, "PacketLifeTime");
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(c.status().message(), HasSubstr("PacketLifeTime"));
    EXPECT_THAT(c.status().message(), HasSubstr("0..31"));
  }
  EXPECT_TRUE(IbaTimeCode::Create(0, "x").ok());
  EXPECT_TRUE(IbaTimeCode::Create(31, "x").ok());
}

// REQ timer = 2 * PLT + RemoteCMResponseTimeout (digest 4.1).
struct ReqRow {
  int plt;
  int remote_cm_response_timeout;
  int64_t exact_ns;
  int64_t linux_ms;
};
constexpr ReqRow kReqTable[] = {
    // rdma_cm default response timeout 20 with PLT 16 (digest: "~4.6 s per try").
    {16, 20, 2 * 268435456LL + 4294967296LL, 2 * 256 + 4096},  // 4.831838208 s
    // Lowered CMA timeout 18 with PLT 14.
    {14, 18, 2 * 67108864LL + 1073741824LL, 2 * 64 + 1024},
    // Small codes: Linux rounds each term up to 1 ms.
    {0, 0, 3 * 4096, 3},
    {8, 8, 3 * 1048576, 3},
    {31, 31, 3 * 8796093022208LL, 3 * 8388608},
};

TEST(CmTimeoutTest, ReqTimer) {
  for (const ReqRow& row : kReqTable) {
    const IbaTimeCode plt = Code(row.plt);
    const IbaTimeCode rcrt = Code(row.remote_cm_response_timeout);
    EXPECT_EQ(CmReqTimeout(plt, rcrt, IbaTimeRounding::kExact),
              Duration::Nanos(row.exact_ns))
        << row.plt << "," << row.remote_cm_response_timeout;
    EXPECT_EQ(CmReqTimeout(plt, rcrt, IbaTimeRounding::kLinux),
              Duration::Millis(row.linux_ms))
        << row.plt << "," << row.remote_cm_response_timeout;
  }
}

TEST(CmTimeoutTest, ReqTimerUsesRemoteNotLocalResponseTimeout) {
  // Swapping the arguments changes the result: PLT is doubled, the response
  // timeout is not.
  EXPECT_NE(CmReqTimeout(Code(20), Code(16), IbaTimeRounding::kExact),
            CmReqTimeout(Code(16), Code(20), IbaTimeRounding::kExact));
}

TEST(CmTimeoutTest, RepTimerIsReqLocalCmResponseTimeout) {
  EXPECT_EQ(CmRepTimeout(Code(20), IbaTimeRounding::kExact),
            Duration::Nanos(4294967296));
  EXPECT_EQ(CmRepTimeout(Code(20), IbaTimeRounding::kLinux),
            Duration::Millis(4096));
}

// MRA: ServiceTimeout + local ACK timeout (digest 4.1).
struct MraRow {
  int service_timeout;
  int ack_timeout;
  int64_t exact_ns;
  int64_t linux_ms;
};
constexpr MraRow kMraTable[] = {
    // Linux's delayed MRA (service timeout 24) on a path with ACK timeout 17.
    {24, 17, 68719476736LL + 536870912LL, 65536 + 512},  // 69.256347648 s
    {0, 0, 2 * 4096, 2},
    {20, 14, 4294967296LL + 67108864LL, 4096 + 64},
};

TEST(CmTimeoutTest, MraTimer) {
  for (const MraRow& row : kMraTable) {
    EXPECT_EQ(CmMraTimeout(Code(row.service_timeout), Code(row.ack_timeout),
                           IbaTimeRounding::kExact),
              Duration::Nanos(row.exact_ns));
    EXPECT_EQ(CmMraTimeout(Code(row.service_timeout), Code(row.ack_timeout),
                           IbaTimeRounding::kLinux),
              Duration::Millis(row.linux_ms));
  }
}

TEST(CmTimeoutTest, TimeWaitIsLocalAckTimeout) {
  EXPECT_EQ(CmTimeWait(Code(19), IbaTimeRounding::kExact),
            Duration::Nanos(2147483648));  // 2.147483648 s
  EXPECT_EQ(CmTimeWait(Code(19), IbaTimeRounding::kLinux),
            Duration::Millis(2048));
  EXPECT_EQ(CmTimeWait(Code(3), IbaTimeRounding::kLinux), Duration::Millis(1));
}

// cm_ack_timeout(ca_ack_delay, plt): worked by hand from the Linux rule
// a = plt + 1; a >= d ? a + (d >= a - 1) : d + (a >= d - 1); min(31, a).
struct AckRow {
  int ca_ack_delay;
  int plt;
  int expected;
};
constexpr AckRow kAckTable[] = {
    {15, 14, 16},  // equal terms (15, 15): one more
    {15, 16, 17},  // PLT term 17 dominates by two: unchanged
    {15, 13, 16},  // PLT term 14 within one of 15: one more
    {15, 10, 15},  // ack delay dominates
    {16, 0, 16},
    {0, 0, 2},     // terms 0 and 1
    {20, 18, 21},  // terms 20 and 19
    {10, 18, 19},
    {31, 31, 31},  // 33 capped at 31
    {31, 0, 31},
    {0, 31, 31},   // 32 capped
};

TEST(CmTimeoutTest, AckTimeoutLikeLinux) {
  for (const AckRow& row : kAckTable) {
    EXPECT_EQ(CmAckTimeout(Code(row.ca_ack_delay), Code(row.plt)).value(),
              row.expected)
        << "ca_ack_delay=" << row.ca_ack_delay << " plt=" << row.plt;
  }
}

TEST(CmTimeoutTest, AckTimeoutCoversBothTerms) {
  // Property over all inputs: 2^ack >= max(2^d, 2^(plt+1)) and is never more
  // than 4x the sum of the two terms, unless capped at 31.
  for (int d = 0; d <= 31; ++d) {
    for (int p = 0; p <= 31; ++p) {
      const int a = CmAckTimeout(Code(d), Code(p)).value();
      if (a == 31) continue;
      EXPECT_GE(a, d);
      EXPECT_GE(a, p + 1);
      const double sum = static_cast<double>(int64_t{1} << d) +
                         static_cast<double>(int64_t{1} << (p + 1));
      EXPECT_LE(static_cast<double>(int64_t{1} << a), 4 * sum);
      EXPECT_GE(static_cast<double>(int64_t{1} << a), sum / 2);
    }
  }
}

}  // namespace
}  // namespace uscm::mad

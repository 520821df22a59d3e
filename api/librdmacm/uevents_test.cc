// Which kernel uevents make the uscm-ports thread list the ports at once
// (uevents.h ParseVerbsUevent), from messages as the kernel sends them.
#include "api/librdmacm/uevents.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace uscm::librdmacm {
namespace {

using namespace std::string_literals;

// `rdma link add rxe1 type rxe netdev veth1`: ib_uverbs' char device (its
// header as the drop-in's USCM_DEBUG line printed it in 69-dropin-device-later;
// the fields as lib/kobject_uevent.c and drivers/base/core.c add them).
const std::string kUverbsAdd =
    "add@/devices/virtual/infiniband_verbs/uverbs1\0"s  // ACTION@DEVPATH
    "ACTION=add\0"s
    "DEVPATH=/devices/virtual/infiniband_verbs/uverbs1\0"s
    "SUBSYSTEM=infiniband_verbs\0"s
    "MAJOR=231\0"s
    "MINOR=193\0"s
    "DEVNAME=infiniband/uverbs1\0"s
    "SEQNUM=2917\0"s;

TEST(UeventsTest, AVerbsDeviceAddedIsSeen) {
  std::string devpath;
  EXPECT_EQ(ParseVerbsUevent(kUverbsAdd.data(), kUverbsAdd.size(), &devpath), VerbsUevent::kAdded);
  EXPECT_EQ(devpath, "/devices/virtual/infiniband_verbs/uverbs1");
  EXPECT_EQ(ParseVerbsUevent(kUverbsAdd.data(), kUverbsAdd.size(), nullptr), VerbsUevent::kAdded);
}

// `rdma link del rxe1`: ib_uverbs deletes its char device first (then waits
// for the contexts still open).
TEST(UeventsTest, AVerbsDeviceRemovedIsSeen) {
  std::string removed = kUverbsAdd;  // the same fields, ACTION remove
  removed.replace(0, 3, "remove");
  removed.replace(removed.find("ACTION=add"), 10, "ACTION=remove");
  std::string devpath;
  EXPECT_EQ(ParseVerbsUevent(removed.data(), removed.size(), &devpath), VerbsUevent::kRemoved);
  EXPECT_EQ(devpath, "/devices/virtual/infiniband_verbs/uverbs1");
  // The header and the ACTION field must agree.
  std::string mixed = removed;
  mixed.replace(mixed.find("ACTION=remove"), 13, "ACTION=add\0\0\0");
  EXPECT_EQ(ParseVerbsUevent(mixed.data(), mixed.size(), nullptr), VerbsUevent::kOther);
}

TEST(UeventsTest, OtherEventsAreNot) {
  const std::string ib_removed =
      "remove@/devices/virtual/net/veth1/infiniband/rxe1\0"s
      "ACTION=remove\0"s
      "DEVPATH=/devices/virtual/net/veth1/infiniband/rxe1\0"s
      "SUBSYSTEM=infiniband\0"s;
  // The RDMA device itself: libibverbs does not list it before its uverbs.
  const std::string ib_device =
      "add@/devices/virtual/net/veth1/infiniband/rxe1\0"s
      "ACTION=add\0"s
      "DEVPATH=/devices/virtual/net/veth1/infiniband/rxe1\0"s
      "SUBSYSTEM=infiniband\0"s
      "NAME=rxe1\0"s;
  const std::string netdev =
      "add@/devices/virtual/net/veth9\0"s
      "ACTION=add\0"s
      "DEVPATH=/devices/virtual/net/veth9\0"s
      "SUBSYSTEM=net\0"s
      "INTERFACE=veth9\0"s;
  // udev's re-broadcast (group 2), should one arrive.
  const std::string udev =
      "libudev\0"s "ACTION=add\0DEVPATH=/x/infiniband_verbs/uverbs1\0SUBSYSTEM=infiniband_verbs\0"s;
  for (const std::string* m : {&ib_removed, &ib_device, &netdev, &udev}) {
    std::string devpath = "unset";
    EXPECT_EQ(ParseVerbsUevent(m->data(), m->size(), &devpath), VerbsUevent::kOther)
        << m->substr(0, 40);
    EXPECT_EQ(devpath, "unset");
  }
}

TEST(UeventsTest, ATruncatedMessageIsNot) {
  // Cut at every byte: only the whole message (its last field's NUL) counts;
  // a cut that drops only later fields still holds ACTION, DEVPATH and
  // SUBSYSTEM from "MAJOR=" on.
  const size_t whole = kUverbsAdd.size();
  const size_t needed = kUverbsAdd.find("MAJOR=");
  for (size_t n = 0; n < whole; ++n) {
    const bool complete_fields = n >= needed && kUverbsAdd[n - 1] == '\0';
    EXPECT_EQ(ParseVerbsUevent(kUverbsAdd.data(), n, nullptr),
              complete_fields ? VerbsUevent::kAdded : VerbsUevent::kOther)
        << "cut at " << n;
  }
}

TEST(UeventsTest, AMessageWithoutItsFieldsIsNot) {
  const std::string header_only = "add@/devices/virtual/infiniband_verbs/uverbs1\0"s;
  EXPECT_EQ(ParseVerbsUevent(header_only.data(), header_only.size(), nullptr), VerbsUevent::kOther);
  const std::string no_devpath = "add@/x\0ACTION=add\0SUBSYSTEM=infiniband_verbs\0"s;
  EXPECT_EQ(ParseVerbsUevent(no_devpath.data(), no_devpath.size(), nullptr), VerbsUevent::kOther);
  const std::string no_nul = "add@/x";
  EXPECT_EQ(ParseVerbsUevent(no_nul.data(), no_nul.size(), nullptr), VerbsUevent::kOther);
}

// Where the host lets it (the initial network namespace), the socket opens;
// elsewhere -1 (the caller falls back to its period). Either is an answer.
TEST(UeventsTest, TheSocketOpensOrSaysWhyNot) {
  const int fd = OpenUeventSocket();
  if (fd < 0) {
    EXPECT_NE(errno, 0);
    GTEST_SKIP() << "no NETLINK_KOBJECT_UEVENT socket here: " << strerror(errno);
  }
  EXPECT_EQ(close(fd), 0);
}

}  // namespace
}  // namespace uscm::librdmacm

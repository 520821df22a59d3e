// rdma_getaddrinfo / rdma_freeaddrinfo on numeric hosts (no DNS, no RDMA
// device), against librdmacm's addrinfo.c behaviour.
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <infiniband/ib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <string.h>

#include "gtest/gtest.h"

namespace {

std::string Ip(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof(text));
  } else if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text,
              sizeof(text));
  }
  return text;
}

uint16_t Port(const sockaddr* addr) {
  if (addr->sa_family == AF_INET)
    return ntohs(reinterpret_cast<const sockaddr_in*>(addr)->sin_port);
  return ntohs(reinterpret_cast<const sockaddr_in6*>(addr)->sin6_port);
}

TEST(GetAddrInfo, ActiveIpv4NumericHost) {
  rdma_addrinfo hints = {};
  hints.ai_port_space = RDMA_PS_TCP;
  hints.ai_flags = RAI_NUMERICHOST;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("192.0.2.7", "7471", &hints, &res), 0) << strerror(errno);
  ASSERT_NE(res, nullptr);
  EXPECT_EQ(res->ai_flags, 0);  // only RAI_PASSIVE is reported back
  EXPECT_EQ(res->ai_family, AF_INET);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  EXPECT_EQ(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_src_len, 0u);
  ASSERT_NE(res->ai_dst_addr, nullptr);
  ASSERT_EQ(res->ai_dst_len, sizeof(sockaddr_in));
  EXPECT_EQ(Ip(res->ai_dst_addr), "192.0.2.7");
  EXPECT_EQ(Port(res->ai_dst_addr), 7471);
  EXPECT_EQ(res->ai_next, nullptr);
  EXPECT_EQ(res->ai_route, nullptr);
  EXPECT_EQ(res->ai_connect, nullptr);
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, NoHintsDefaultsToRcOverTcp) {
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("10.1.2.3", "20079", nullptr, &res), 0);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  EXPECT_EQ(res->ai_family, AF_INET);
  EXPECT_EQ(Ip(res->ai_dst_addr), "10.1.2.3");
  EXPECT_EQ(Port(res->ai_dst_addr), 20079);
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, PassiveFillsTheSourceAddress) {
  rdma_addrinfo hints = {};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("0.0.0.0", "7471", &hints, &res), 0);
  EXPECT_EQ(res->ai_flags, RAI_PASSIVE);
  EXPECT_EQ(res->ai_family, AF_INET);
  ASSERT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(res->ai_src_len, sizeof(sockaddr_in));
  EXPECT_EQ(Ip(res->ai_src_addr), "0.0.0.0");
  EXPECT_EQ(Port(res->ai_src_addr), 7471);
  EXPECT_EQ(res->ai_dst_addr, nullptr);
  EXPECT_EQ(res->ai_dst_len, 0u);
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, PassiveWithoutNodeIsTheWildcard) {
  rdma_addrinfo hints = {};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_family = AF_INET;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, "7471", &hints, &res), 0);
  EXPECT_EQ(res->ai_flags, RAI_PASSIVE);
  ASSERT_NE(res->ai_src_addr, nullptr);
  EXPECT_EQ(Ip(res->ai_src_addr), "0.0.0.0");
  EXPECT_EQ(Port(res->ai_src_addr), 7471);
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, Ipv6NumericHost) {
  rdma_addrinfo hints = {};
  hints.ai_flags = RAI_NUMERICHOST;
  hints.ai_family = AF_INET6;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("fe80::1", "18515", &hints, &res), 0);
  EXPECT_EQ(res->ai_family, AF_INET6);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_RC);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_TCP);
  ASSERT_EQ(res->ai_dst_len, sizeof(sockaddr_in6));
  EXPECT_EQ(Ip(res->ai_dst_addr), "fe80::1");
  EXPECT_EQ(Port(res->ai_dst_addr), 18515);
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, UdQpTypeAndUdpPortSpace) {
  rdma_addrinfo hints = {};
  hints.ai_qp_type = IBV_QPT_UD;
  hints.ai_port_space = RDMA_PS_UDP;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("192.0.2.9", "7174", &hints, &res), 0);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_UDP);
  rdma_freeaddrinfo(res);

  // UD without a port space: from the datagram socket's protocol (UDP).
  hints.ai_port_space = static_cast<rdma_port_space>(0);
  ASSERT_EQ(rdma_getaddrinfo("192.0.2.9", "7174", &hints, &res), 0);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UD);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_UDP);
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, HintsSourceAddressIsCopiedForAnActiveAnswer) {
  sockaddr_in src = {};
  src.sin_family = AF_INET;
  src.sin_port = htons(1234);
  inet_pton(AF_INET, "192.0.2.1", &src.sin_addr);
  rdma_addrinfo hints = {};
  hints.ai_src_addr = reinterpret_cast<sockaddr*>(&src);
  hints.ai_src_len = sizeof(src);
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("192.0.2.2", "7471", &hints, &res), 0);
  ASSERT_NE(res->ai_src_addr, nullptr);
  EXPECT_NE(res->ai_src_addr, hints.ai_src_addr) << "a copy, freed with the answer";
  EXPECT_EQ(res->ai_src_len, sizeof(src));
  EXPECT_EQ(Ip(res->ai_src_addr), "192.0.2.1");
  EXPECT_EQ(Port(res->ai_src_addr), 1234);
  EXPECT_EQ(Ip(res->ai_dst_addr), "192.0.2.2");
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, NoNodeOrServiceTakesTheHints) {
  sockaddr_in6 dst = {};
  dst.sin6_family = AF_INET6;
  dst.sin6_port = htons(99);
  inet_pton(AF_INET6, "2001:db8::5", &dst.sin6_addr);
  rdma_addrinfo hints = {};
  hints.ai_family = AF_INET6;
  hints.ai_qp_type = IBV_QPT_UC;
  hints.ai_port_space = RDMA_PS_IB;
  hints.ai_dst_addr = reinterpret_cast<sockaddr*>(&dst);
  hints.ai_dst_len = sizeof(dst);
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo(nullptr, nullptr, &hints, &res), 0);
  EXPECT_EQ(res->ai_family, AF_INET6);
  EXPECT_EQ(res->ai_qp_type, IBV_QPT_UC);
  EXPECT_EQ(res->ai_port_space, RDMA_PS_IB);
  EXPECT_EQ(Ip(res->ai_dst_addr), "2001:db8::5");
  EXPECT_EQ(Port(res->ai_dst_addr), 99);
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, AfIbNumericHostBecomesASockaddrIb) {
  rdma_addrinfo hints = {};
  hints.ai_flags = RAI_NUMERICHOST | RAI_FAMILY;
  hints.ai_family = AF_IB;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("fe80::2:c903:a:b", "7471", &hints, &res), 0);
  EXPECT_EQ(res->ai_family, AF_IB);
  ASSERT_EQ(res->ai_dst_len, sizeof(sockaddr_ib));
  const auto* sib = reinterpret_cast<const sockaddr_ib*>(res->ai_dst_addr);
  EXPECT_EQ(sib->sib_family, AF_IB);
  EXPECT_EQ(be16toh(sib->sib_pkey), 0xFFFF);
  in6_addr want;
  inet_pton(AF_INET6, "fe80::2:c903:a:b", &want);
  EXPECT_EQ(memcmp(&sib->sib_addr, &want, 16), 0);
  EXPECT_EQ(be64toh(sib->sib_sid), 0x0000000001061D2FULL);  // RDMA_PS_TCP << 16 | 7471
  EXPECT_EQ(be64toh(sib->sib_sid_mask), RDMA_IB_IP_PS_MASK | RDMA_IB_IP_PORT_MASK);
  // rdma_get_dst_port reads the port back from an id's AF_IB address.
  rdma_cm_id id = {};
  memcpy(&id.route.addr.dst_storage, sib, sizeof(*sib));
  EXPECT_EQ(ntohs(rdma_get_dst_port(&id)), 7471);
  rdma_freeaddrinfo(res);
}

TEST(GetAddrInfo, Errors) {
  rdma_addrinfo* res = nullptr;
  errno = 0;
  EXPECT_EQ(rdma_getaddrinfo(nullptr, nullptr, nullptr, &res), -1);
  EXPECT_EQ(errno, EINVAL);

  // getaddrinfo's own error code comes back as librdmacm returns it.
  rdma_addrinfo hints = {};
  hints.ai_flags = RAI_NUMERICHOST;
  EXPECT_EQ(rdma_getaddrinfo("not-a-number", "7471", &hints, &res), EAI_NONAME);
  EXPECT_EQ(res, nullptr);

  rdma_freeaddrinfo(nullptr);  // no-op
}

}  // namespace

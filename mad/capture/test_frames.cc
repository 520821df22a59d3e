#include "mad/capture/test_frames.h"

#include <cstdio>
#include <map>
#include <utility>

#include "mad/capture/ib_packet.h"

namespace uscm::mad::capture::testing {
namespace {

void Put16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
void Put24(Bytes& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v >> 16));
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
void Put32(Bytes& b, uint32_t v) {
  Put16(b, static_cast<uint16_t>(v >> 16));
  Put16(b, static_cast<uint16_t>(v));
}
void Le16(Bytes& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void Le32(Bytes& b, uint32_t v) {
  Le16(b, static_cast<uint16_t>(v));
  Le16(b, static_cast<uint16_t>(v >> 16));
}

void Macs(Bytes& b) {
  for (uint8_t m : {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01}) b.push_back(m);
}

// BTH [DETH] payload ICRC (zeros: not checked for RoCE).
Bytes Transport(std::span<const uint8_t> payload, uint8_t opcode, uint32_t dest_qp) {
  Bytes b;
  b.push_back(opcode);
  b.push_back(0);
  Put16(b, 0xFFFF);
  b.push_back(0);
  Put24(b, dest_qp);
  b.push_back(0);
  Put24(b, 0);  // PSN
  if (opcode == 0x64) {
    Put32(b, 0x80010000);
    b.push_back(0);
    Put24(b, 1);
  }
  b.insert(b.end(), payload.begin(), payload.end());
  Put32(b, 0);
  return b;
}

}  // namespace

Bytes RoceV2(std::span<const uint8_t> payload, bool ipv6, int vlan_tags, uint8_t opcode,
             uint32_t dest_qp) {
  Bytes udp;
  Put16(udp, 49152);
  Put16(udp, 4791);
  const Bytes t = Transport(payload, opcode, dest_qp);
  Put16(udp, static_cast<uint16_t>(8 + t.size()));
  Put16(udp, 0);
  udp.insert(udp.end(), t.begin(), t.end());
  Bytes f;
  Macs(f);
  for (int i = 0; i < vlan_tags; ++i) {
    Put16(f, i == 0 && vlan_tags > 1 ? 0x88A8 : 0x8100);
    Put16(f, static_cast<uint16_t>(100 + i));
  }
  if (ipv6) {
    Put16(f, 0x86DD);
    Put32(f, 0x60000000);
    Put16(f, static_cast<uint16_t>(udp.size()));
    f.push_back(17);
    f.push_back(64);
    for (uint8_t last : {1, 2}) {  // fd00::1 -> fd00::2
      f.push_back(0xfd);
      for (int i = 0; i < 14; ++i) f.push_back(0);
      f.push_back(last);
    }
  } else {
    Put16(f, 0x0800);
    f.push_back(0x45);
    f.push_back(0);
    Put16(f, static_cast<uint16_t>(20 + udp.size()));
    Put32(f, 0x40000000);  // id 0, DF
    f.push_back(64);
    f.push_back(17);
    Put16(f, 0);
    for (uint8_t last : {1, 2}) {  // 192.168.77.1 -> 192.168.77.2
      for (uint8_t o : {192, 168, 77}) f.push_back(o);
      f.push_back(last);
    }
  }
  f.insert(f.end(), udp.begin(), udp.end());
  return f;
}

Bytes RoceV1(std::span<const uint8_t> payload, uint8_t opcode, uint32_t dest_qp) {
  const Bytes t = Transport(payload, opcode, dest_qp);
  Bytes f;
  Macs(f);
  Put16(f, 0x8915);
  Put32(f, 0x60000000);
  Put16(f, static_cast<uint16_t>(t.size()));
  f.push_back(0x1B);  // next header: BTH
  f.push_back(1);
  for (uint8_t last : {1, 2}) {  // fe80::1 -> fe80::2
    f.push_back(0xfe);
    f.push_back(0x80);
    for (int i = 0; i < 13; ++i) f.push_back(0);
    f.push_back(last);
  }
  f.insert(f.end(), t.begin(), t.end());
  return f;
}

Bytes Arp() {
  Bytes f;
  Macs(f);
  Put16(f, 0x0806);
  for (uint16_t v : {1, 0x0800}) Put16(f, v);
  f.push_back(6);
  f.push_back(4);
  Put16(f, 1);
  f.resize(60, 0);
  return f;
}

Bytes Tcp() {
  Bytes f;
  Macs(f);
  Put16(f, 0x0800);
  f.push_back(0x45);
  f.push_back(0);
  Put16(f, 40);
  Put32(f, 0);
  f.push_back(64);
  f.push_back(6);
  f.resize(14 + 40, 0);
  return f;
}

Bytes ExportedPduRecord(std::span<const uint8_t> mad, uint16_t slid, uint16_t dlid) {
  UdHeaders h;
  h.slid = slid;
  h.dlid = dlid;
  auto packet = WrapMad(h, mad);
  Bytes r;
  Put16(r, 12);  // dissector name
  Put16(r, 12);
  for (char c : std::string("infiniband\0\0", 12)) r.push_back(static_cast<uint8_t>(c));
  Put16(r, 0);
  Put16(r, 0);
  if (packet.ok()) r.insert(r.end(), packet->begin(), packet->end());
  return r;
}

Bytes ErfRecord(std::span<const uint8_t> mad, uint16_t slid, uint16_t dlid) {
  UdHeaders h;
  h.slid = slid;
  h.dlid = dlid;
  auto packet = WrapMad(h, mad);
  const size_t len = packet.ok() ? packet->size() : 0;
  Bytes r(8, 0);  // timestamp
  r.push_back(21);  // InfiniBand
  r.push_back(0x04);  // varying length
  Put16(r, static_cast<uint16_t>(16 + len));
  Put16(r, 0);
  Put16(r, static_cast<uint16_t>(len));
  if (packet.ok()) r.insert(r.end(), packet->begin(), packet->end());
  return r;
}

Bytes PcapFile(uint32_t link_type, const std::vector<Frame>& frames, bool nanos) {
  Bytes b;
  Le32(b, nanos ? 0xA1B23C4D : 0xA1B2C3D4);
  Le16(b, 2);
  Le16(b, 4);
  Le32(b, 0);
  Le32(b, 0);
  Le32(b, 262144);
  Le32(b, link_type);
  for (const Frame& f : frames) {
    Le32(b, static_cast<uint32_t>(f.time_ns / 1000000000));
    const int64_t frac = f.time_ns % 1000000000;
    Le32(b, static_cast<uint32_t>(nanos ? frac : frac / 1000));
    Le32(b, static_cast<uint32_t>(f.data.size()));
    Le32(b, static_cast<uint32_t>(f.data.size()));
    b.insert(b.end(), f.data.begin(), f.data.end());
  }
  return b;
}

Bytes PcapngFile(const std::vector<Frame>& frames, bool nanos) {
  Bytes b;
  // Section Header Block.
  Le32(b, 0x0A0D0D0A);
  Le32(b, 28);
  Le32(b, 0x1A2B3C4D);
  Le16(b, 1);
  Le16(b, 0);
  Le32(b, 0xFFFFFFFF);  // section length unknown
  Le32(b, 0xFFFFFFFF);
  Le32(b, 28);
  std::map<std::pair<int, uint32_t>, uint32_t> interface_of;
  for (const Frame& f : frames) {
    const auto key = std::make_pair(f.interface, f.link_type);
    if (interface_of.count(key)) continue;
    const uint32_t id = static_cast<uint32_t>(interface_of.size());
    interface_of[key] = id;
    // Interface Description Block, with if_tsresol when nanoseconds.
    const uint32_t len = nanos ? 20 + 8 + 4 : 20;
    Le32(b, 1);
    Le32(b, len);
    Le16(b, static_cast<uint16_t>(f.link_type));
    Le16(b, 0);
    Le32(b, 262144);
    if (nanos) {
      Le16(b, 9);  // if_tsresol
      Le16(b, 1);
      b.push_back(9);
      b.insert(b.end(), 3, 0);
      Le32(b, 0);  // opt_endofopt
    }
    Le32(b, len);
  }
  for (const Frame& f : frames) {
    const uint64_t ticks = nanos ? f.time_ns : f.time_ns / 1000;
    const size_t padded = (f.data.size() + 3) & ~size_t{3};
    const uint32_t len = static_cast<uint32_t>(32 + padded);
    Le32(b, 6);  // Enhanced Packet Block
    Le32(b, len);
    Le32(b, interface_of[std::make_pair(f.interface, f.link_type)]);
    Le32(b, static_cast<uint32_t>(ticks >> 32));
    Le32(b, static_cast<uint32_t>(ticks));
    Le32(b, static_cast<uint32_t>(f.data.size()));
    Le32(b, static_cast<uint32_t>(f.data.size()));
    b.insert(b.end(), f.data.begin(), f.data.end());
    b.insert(b.end(), padded - f.data.size(), 0);
    Le32(b, len);
  }
  return b;
}

bool WriteFile(const std::string& path, const Bytes& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace uscm::mad::capture::testing

// Writes a seed corpus for router_frame_fuzzer: conversations in its input
// format ([who] [length u16 LE] [bytes]; who 0..2 a client's frame, 0x80|k
// client k leaving, 0x40|k client k writing a byte of a leased page, 3 a MAD
// from the wire) that reach the router's deeper paths at once: claims that
// bind, listen, conflict and are released; leases and the lessee's page; the
// CM's sample MADs from the wire (a REQ and a SIDR_REQ for the claimed
// services among them) and from clients; a client leaving mid-conversation.
// Without it the fuzzer starts from nothing and spends its first millions of
// runs finding the frame header.
//   router_fuzz_seeds DIR
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cm/router/frame.h"
#include "mad/transport.h"
#include "mad/wire/cm_samples.h"

namespace {

using uscm::mad::ClaimKind;
using uscm::mad::ListenAddress;
using uscm::router::ClaimFrame;
using uscm::router::FrameType;

constexpr uint64_t kReqService = 0x0000000001061d2f;   // the sample REQ's
constexpr uint64_t kSidrService = 0x00000000011112b7;  // the sample SIDR_REQ's

class Conversation {
 public:
  Conversation& From(uint8_t who, const std::vector<uint8_t>& bytes) {
    out_.push_back(who);
    out_.push_back(static_cast<uint8_t>(bytes.size()));
    out_.push_back(static_cast<uint8_t>(bytes.size() >> 8));
    out_.insert(out_.end(), bytes.begin(), bytes.end());
    return *this;
  }
  Conversation& Claim(uint8_t client, FrameType type, uint64_t service, ClaimKind kind,
                      ListenAddress address = {}, bool reuse = false) {
    ClaimFrame c;
    c.request = ++request_;
    c.service_id = service;
    c.mask = ~0ull;
    c.reuse = reuse;
    c.address = address;
    c.kind = kind;
    return From(client, uscm::router::EncodeClaim(type, c));
  }
  Conversation& Wire(const std::vector<uint8_t>& mad) { return From(3, mad); }
  Conversation& ClientMad(uint8_t client, const std::vector<uint8_t>& mad) {
    uscm::mad::MadAddress to;
    to.lid = 2;
    std::vector<uint8_t> frame;
    uscm::router::EncodeMad(to, mad, &frame);
    return From(client, frame);
  }
  Conversation& Leaves(uint8_t client) { return From(0x80 | client, {}); }
  const std::vector<uint8_t>& bytes() const { return out_; }

 private:
  std::vector<uint8_t> out_;
  uint32_t request_ = 0;
};

std::vector<std::vector<uint8_t>> SampleMads() {
  std::vector<std::vector<uint8_t>> out;
  for (const auto& m : uscm::mad::wire::SampleCmMads()) out.emplace_back(m.begin(), m.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const auto mads = SampleMads();  // REQ, MRA, REJ, REP, RTU, DREQ, DREP, SIDR_REQ, SIDR_REP, LAP, APR
  std::vector<Conversation> seeds;

  // A listener gets the wire's REQ and answers; every other CM MAD follows
  // from the wire; the listener leaves with the connection open.
  Conversation& serve = seeds.emplace_back();
  serve.Claim(0, FrameType::kClaim, kReqService, ClaimKind::kListen)
      .Claim(1, FrameType::kClaim, kSidrService, ClaimKind::kListen);
  for (const auto& m : mads) serve.Wire(m);
  serve.ClientMad(0, mads[3]).ClientMad(1, mads[8]).Leaves(0).Wire(mads[4]).Wire(mads[5]);

  // The address rules: binds with and without REUSEADDR, a listen on a bound
  // address, wildcards of both families, releases.
  Conversation& rules = seeds.emplace_back();
  const ListenAddress a = ListenAddress::Ipv4(0x0a000001);
  ListenAddress any6;
  any6.family = ListenAddress::Family::kIpv6;
  rules.Claim(0, FrameType::kClaim, kReqService, ClaimKind::kBind, a, true)
      .Claim(1, FrameType::kClaim, kReqService, ClaimKind::kBind, a, true)
      .Claim(2, FrameType::kClaim, kReqService, ClaimKind::kBind, a, false)
      .Claim(0, FrameType::kClaim, kReqService, ClaimKind::kListen, a)
      .Claim(2, FrameType::kClaim, kReqService, ClaimKind::kListen, any6)
      .Claim(1, FrameType::kRelease, kReqService, ClaimKind::kBind, a, true)
      .Wire(mads[0])
      .Claim(0, FrameType::kRelease, kReqService, ClaimKind::kListen, a)
      .Leaves(1)
      .Claim(1, FrameType::kClaim, kReqService, ClaimKind::kListen, ListenAddress::Ipv4(0x0a000002));

  // Every CM MAD sent by a client (the router tracks the ones that open or
  // close a connection), then the wire's answers.
  Conversation& sends = seeds.emplace_back();
  for (const auto& m : mads) sends.ClientMad(2, m);
  for (const auto& m : mads) sends.Wire(m);
  sends.Leaves(2);

  // Port blocks: leases, the lessee writing its page (0x40 | who: bytes =
  // page index, port, value), another client's binds inside the block, a
  // release, the lessee leaving.
  Conversation& blocks = seeds.emplace_back();
  const uint64_t leased = 0x0000000001060000ull | 40001;
  blocks.From(0, uscm::router::EncodeLease({.request = 1, .port_space = 0x0106}))
      .From(0, uscm::router::EncodeLease({.request = 2, .port_space = 0x0106}))
      .From(0x40, {0, 1, 1})
      .From(0x40, {0, 2, 0x77})
      .Claim(1, FrameType::kClaim, leased, ClaimKind::kBind)
      .Claim(1, FrameType::kClaim, leased + 2, ClaimKind::kBind)
      .Claim(1, FrameType::kClaim, leased + 3, ClaimKind::kListen)
      .Claim(1, FrameType::kRelease, leased + 3, ClaimKind::kListen)
      .Leaves(0)
      .From(2, uscm::router::EncodeLease({.request = 1, .port_space = 0x0106}));

  // A hello in the middle of a conversation (a client repeating itself).
  seeds.emplace_back().From(0, uscm::router::EncodeHello({.pid = 42})).Wire(mads[0]);

  fs::create_directories(argv[1]);
  int i = 0;
  for (const Conversation& c : seeds) {
    std::ofstream out(fs::path(argv[1]) / ("router-seed-" + std::to_string(i++)),
                      std::ios::binary);
    out.write(reinterpret_cast<const char*>(c.bytes().data()), c.bytes().size());
  }
  std::printf("%d seeds written to %s\n", i, argv[1]);
  return 0;
}

// The messages between uscmd (the per-port MAD router) and its clients, one
// per SOCK_SEQPACKET message. Every frame starts with an 8-byte header:
//
//   magic "UR" (0x55 0x52), version 3, type, 4 reserved bytes (0)
//
// Version 2: a claim carries the listener's address (family, IP, AFONLY) and
// a reply the errno the client should report. Version 3: a claim says whether
// it binds or listens (the kernel reserves a port at rdma_bind_addr).
// Version 4: kLease / kLeaseReply, blocks of ephemeral ports (the reply's
// page travels as a memfd in SCM_RIGHTS).
//
// then a type-specific body in little-endian order. A MAD frame carries the
// UD address vector (38 bytes) and the MAD itself, so one MAD = one message.
// Decoding checks every length and names the field that is short.
#ifndef USCM_CM_ROUTER_FRAME_H_
#define USCM_CM_ROUTER_FRAME_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "mad/transport.h"

namespace uscm::router {

inline constexpr uint8_t kFrameVersion = 4;
inline constexpr size_t kFrameHeaderBytes = 8;
inline constexpr size_t kAddressBytes = 38;
// Largest frame: a MAD frame with an RMPP-coalesced SA response (umad).
inline constexpr size_t kMaxFrameBytes = 256 * 1024;

enum class FrameType : uint8_t {
  kHello = 1,     // client -> router: "I want a slot"
  kWelcome = 2,   // router -> client: slot, comm ID range, the port
  kMad = 3,       // both ways: one MAD with its address
  kClaim = 4,     // client -> router: bind / listen on a service ID / mask
  kRelease = 5,   // client -> router: unbind / stop listening
  kReply = 6,     // router -> client: the answer to kClaim / kRelease
  kRefused = 7,   // router -> client: a MAD the router would not send
  kLease = 8,     // client -> router: a block of ephemeral ports
  kLeaseReply = 9,  // router -> client: the block (its page as SCM_RIGHTS) or why not
};

struct Hello {
  uint32_t pid = 0;  // for the router's log only
};

struct Welcome {
  uint8_t slot = 0;
  uint8_t comm_id_prefix_bits = 0;
  uint32_t comm_id_prefix = 0;
  bool kernel_rmpp = false;
  uint32_t max_receive_size = mad::kMadSize;
  mad::LocalPort port;
};

struct MadFrame {
  mad::MadAddress address;  // destination (client -> router) or source
  std::span<const uint8_t> mad;  // points into the decoded buffer
};

// Body: request u32, service_id u64, mask u64, reuse u8 (0 / 1), then the
// listener's address: family u8 (0 none, 4, 6), ip 16 bytes (network order;
// IPv4 in the last 4, the 12 before zero; all zero for none), af_only u8
// (0 / 1; 0 for none), kind u8 (1 bind, 2 listen). Anything else is refused
// by name.
struct ClaimFrame {
  uint32_t request = 0;  // echoed in the reply
  uint64_t service_id = 0;
  uint64_t mask = 0;
  bool reuse = false;  // REUSEADDR of the id: two binds that both set it share
                       // an address; a listen never shares one
  mad::ListenAddress address = {};  // what the claim covers within the service
  mad::ClaimKind kind = mad::ClaimKind::kListen;
};

// Not StatusOr<Status>: that type cannot tell a decode error from a value.
struct RefusedFrame {
  absl::Status why;  // never OK
};

// Body: request u32, code u32, message (u16 length + bytes), errno u32 (0:
// none; else mad::WithErrno on `status`, e.g. EADDRNOTAVAIL for a listen
// against a wildcard, where the status code alone would say EADDRINUSE).
struct ReplyFrame {
  uint32_t request = 0;
  absl::Status status;
};

// Body: request u32, port_space u16 (rdma_cm's RDMA_PS_*: 0x0002, 0x0106,
// 0x0111 or 0x013F; anything else is refused by name).
struct LeaseFrame {
  uint32_t request = 0;
  uint16_t port_space = 0;
};

// Body: request u32, code u32, message (u16 length + bytes), errno u32 (as
// ReplyFrame), first_port u16, ports u16 (both 0 unless the status is OK).
// An OK reply comes with one fd in SCM_RIGHTS: a memfd of `ports` state
// bytes (mad::PortPage); in-process clients get the page itself.
struct LeaseReplyFrame {
  uint32_t request = 0;
  absl::Status status;
  uint16_t first_port = 0;
  uint16_t ports = 0;
};

// The frame type, after checking magic, version and header length.
absl::StatusOr<FrameType> PeekFrame(std::span<const uint8_t> frame);

// Another uscm release on the other end of the socket. The magic, the version
// and the type keep their places in every version, so a library and a uscmd of
// different releases can tell so from any frame: the version of a frame with
// uscmd's magic when it is not this build's, else nullopt.
absl::optional<uint8_t> OtherReleaseVersion(std::span<const uint8_t> frame);
// What the user reads then: both versions and what to do about it. `uscmd`:
// where that uscmd listens ("" on uscmd's own side).
absl::Status OtherReleaseError(uint8_t uscmd_version, uint8_t library_version,
                               absl::string_view uscmd);

std::vector<uint8_t> EncodeHello(const Hello& h);
std::vector<uint8_t> EncodeWelcome(const Welcome& w);
// Appends to `out` (cleared first) so a caller can reuse one buffer.
void EncodeMad(const mad::MadAddress& a, std::span<const uint8_t> mad, std::vector<uint8_t>* out);
std::vector<uint8_t> EncodeClaim(FrameType type, const ClaimFrame& c);
std::vector<uint8_t> EncodeReply(const ReplyFrame& r);
std::vector<uint8_t> EncodeRefused(const absl::Status& why);
std::vector<uint8_t> EncodeLease(const LeaseFrame& l);
std::vector<uint8_t> EncodeLeaseReply(const LeaseReplyFrame& r);

absl::StatusOr<Hello> DecodeHello(std::span<const uint8_t> frame);
absl::StatusOr<Welcome> DecodeWelcome(std::span<const uint8_t> frame);
// A MAD of 24 bytes (the header) up to kMaxFrameBytes.
absl::StatusOr<MadFrame> DecodeMad(std::span<const uint8_t> frame);
absl::StatusOr<ClaimFrame> DecodeClaim(std::span<const uint8_t> frame);
absl::StatusOr<ReplyFrame> DecodeReply(std::span<const uint8_t> frame);
absl::StatusOr<RefusedFrame> DecodeRefused(std::span<const uint8_t> frame);
absl::StatusOr<LeaseFrame> DecodeLease(std::span<const uint8_t> frame);
absl::StatusOr<LeaseReplyFrame> DecodeLeaseReply(std::span<const uint8_t> frame);
// The lease a reply grants with `page` (the status of a refused one); an OK
// reply whose page is missing or smaller than its ports is an error.
absl::StatusOr<mad::PortLease> LeaseOf(const LeaseReplyFrame& reply,
                                       std::shared_ptr<mad::PortPage> page);

}  // namespace uscm::router

#endif  // USCM_CM_ROUTER_FRAME_H_

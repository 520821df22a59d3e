#include "mad/umad_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <infiniband/umad.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace uscm::mad {
namespace {

constexpr int kCmClass = 0x07;
constexpr int kSaClass = 0x03;
constexpr int kClassVersion2 = 2;
constexpr int kMethodSend = 0x03;
constexpr int kPortStateActive = 4;
// is_duplicate() in ib_umad: how long Send() keeps retrying a busy TID.
constexpr int kTidBusyRetries = 200;
constexpr useconds_t kTidBusySleepUs = 250;
// umad2sim hands out at most one struct sim_request (288 bytes) per packet,
// umad header included.
constexpr size_t kUmad2simPacket = 288;

std::string ErrnoText(int err) { return absl::StrCat(strerror(err), " (errno ", err, ")"); }

absl::Status NoDeviceError() {
  return absl::NotFoundError(
      "no InfiniBand device found (libibumad sees no CA under /sys/class/infiniband; "
      "is ib_umad loaded and an RDMA driver present?); try --fabric=sim, or run under "
      "ibsim with LD_PRELOAD=libumad2sim.so");
}

std::string PortLabel(const std::string& ca, int port) {
  return absl::StrCat(ca.empty() ? std::string("<first active CA>") : ca, ":",
                      port == 0 ? std::string("<first active port>") : absl::StrCat(port));
}

// umad_get_cas_names() invents a default "mthca0" when there is no device;
// the device list does not.
absl::StatusOr<std::vector<std::string>> CaNames() {
  umad_device_node* head = umad_get_ca_device_list();
  if (head == nullptr) return NoDeviceError();
  std::vector<std::string> out;
  for (umad_device_node* n = head; n != nullptr; n = n->next) out.emplace_back(n->ca_name);
  umad_free_ca_device_list(head);
  return out;
}

}  // namespace

absl::StatusOr<UmadPortState> QueryUmadPort(const std::string& ca_name, int port_num) {
  if (umad_init() < 0) return NoDeviceError();
  auto names = CaNames();
  if (!names.ok()) return names.status();
  if (!ca_name.empty() && std::find(names->begin(), names->end(), ca_name) == names->end()) {
    return absl::NotFoundError(absl::StrCat("no InfiniBand CA named '", ca_name,
                                            "'; available: ", absl::StrJoin(*names, ", ")));
  }
  umad_port_t p;
  std::memset(&p, 0, sizeof(p));
  const int rc = umad_get_port(ca_name.empty() ? nullptr : ca_name.c_str(), port_num, &p);
  if (rc < 0) {
    return absl::NotFoundError(absl::StrCat(
        "cannot read port ", PortLabel(ca_name, port_num), ": ", ErrnoText(-rc),
        port_num == 0 ? "; no port is ACTIVE (is a subnet manager running?)" : ""));
  }
  UmadPortState out;
  out.state = static_cast<int>(p.state);
  LocalPort& lp = out.port;
  lp.ca_name = p.ca_name;
  lp.port_num = static_cast<uint8_t>(p.portnum);
  lp.link_layer = std::strcmp(p.link_layer, "Ethernet") == 0 ? LinkLayer::kEthernet
                                                            : LinkLayer::kInfiniBand;
  lp.lid = static_cast<uint16_t>(p.base_lid);
  lp.lmc = static_cast<uint8_t>(p.lmc);
  lp.sm_lid = static_cast<uint16_t>(p.sm_lid);
  lp.sm_sl = static_cast<uint8_t>(p.sm_sl);
  lp.gid = Gid::FromParts(be64toh(p.gid_prefix), be64toh(p.port_guid));
  if (p.pkeys != nullptr) lp.pkeys.assign(p.pkeys, p.pkeys + p.pkeys_size);
  umad_release_port(&p);

  umad_ca_t ca;
  std::memset(&ca, 0, sizeof(ca));
  if (umad_get_ca(lp.ca_name.c_str(), &ca) == 0) {
    lp.node_guid = be64toh(ca.node_guid);
    out.ca_type = ca.ca_type;
    umad_release_ca(&ca);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<UmadTransport>> UmadTransport::Open(const UmadOptions& options) {
  auto state = QueryUmadPort(options.ca_name, options.port_num);
  if (!state.ok()) return state.status();
  const std::string label = absl::StrCat(state->port.ca_name, ":", state->port.port_num);
  if (options.require_active && state->state != kPortStateActive) {
    return absl::FailedPreconditionError(absl::StrCat(
        "port ", label, " is not ACTIVE (PortState ", state->state,
        "); a port becomes ACTIVE once a subnet manager has configured it (start opensm)"));
  }

  std::unique_ptr<UmadTransport> t(new UmadTransport());
  t->port_ = std::move(state->port);
  errno = 0;
  t->port_id_ = umad_open_port(t->port_.ca_name.c_str(), t->port_.port_num);
  if (t->port_id_ < 0) {
    const int err = errno != 0 ? errno : -t->port_id_;
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot open the umad device of ", label, " (/dev/infiniband/umad*): ", ErrnoText(err),
          "; run as root, or give a group access with a udev rule such as "
          "KERNEL==\"umad*\", GROUP=\"rdma\", MODE=\"0660\" and add the user to group rdma"));
    }
    return absl::UnavailableError(
        absl::StrCat("umad_open_port(", label, ") failed: ", ErrnoText(err)));
  }

  // CM agent. libibumad returns -EPERM for every failure; the ioctl's errno
  // tells the reasons apart (EINVAL: "Method 3 already in use").
  long cm_mask[16 / sizeof(long)] = {};
  if (options.receive_cm) cm_mask[kMethodSend / (8 * sizeof(long))] |= 1L << kMethodSend;
  errno = 0;
  t->cm_agent_ = umad_register(t->port_id_, kCmClass, kClassVersion2, 0, cm_mask);
  if (t->cm_agent_ < 0) {
    const int err = errno;
    if (err == EINVAL && options.receive_cm) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot register a CM agent (class 0x07 v2, method Send) on ", label,
          ": the kernel's ib_cm already owns the CM class on that port. Unload it: "
          "modprobe -r rdma_ucm rdma_cm ib_cm (stop IPoIB connected mode, SRP, iSER and "
          "NVMe-oF users first), or run uscm behind the uscmd router"));
    }
    return absl::UnavailableError(
        absl::StrCat("umad_register(CM class 0x07 v2) on ", label, " failed: ", ErrnoText(err)));
  }

  bool kernel_rmpp = false;
  if (options.register_sa) {
    using Rmpp = UmadOptions::Rmpp;
    Rmpp mode = options.rmpp;
    if (mode == Rmpp::kAuto) mode = state->ca_type == "simulator" ? Rmpp::kNone : Rmpp::kUser;
    if (mode == Rmpp::kUser) {
      // IBTA 13.6 RMPP done by our agent: the kernel hands every segment over
      // and sends what we send (ACKs included) as plain MADs.
      umad_reg_attr attr{};
      attr.mgmt_class = kSaClass;
      attr.mgmt_class_version = kClassVersion2;
      attr.flags = UMAD_USER_RMPP;
      attr.rmpp_version = 1;
      uint32_t id = 0;
      const int err = umad_register2(t->port_id_, &attr, &id);
      if (err == 0) {
        t->sa_agent_ = static_cast<int>(id);
        t->sa_rmpp_mode_ = "user";
      } else if (options.rmpp == Rmpp::kUser) {
        return absl::UnavailableError(absl::StrCat(
            "umad_register2(SA class 0x03 v2, UMAD_USER_RMPP) on ", label, " failed: ",
            ErrnoText(err), " (a kernel without user RMPP: use Rmpp::kKernel)"));
      } else {
        mode = Rmpp::kKernel;  // kAuto on an old kernel
      }
    }
    if (t->sa_agent_ < 0) {
      kernel_rmpp = mode == Rmpp::kKernel;
      long sa_mask[16 / sizeof(long)] = {};  // client only: responses come by TID
      errno = 0;
      t->sa_agent_ = umad_register(t->port_id_, kSaClass, kClassVersion2, kernel_rmpp ? 1 : 0,
                                   sa_mask);
      if (t->sa_agent_ < 0) {
        return absl::UnavailableError(absl::StrCat("umad_register(SA class 0x03 v2) on ", label,
                                                   " failed: ", ErrnoText(errno)));
      }
      t->sa_rmpp_mode_ = kernel_rmpp ? "kernel" : "none";
    }
  }

  t->simulator_ = state->ca_type == "simulator";
  if (t->simulator_) {
    for (int mgmt_class : {0x01, 0x81}) {
      long none[16 / sizeof(long)] = {};
      const int id = umad_register(t->port_id_, mgmt_class, 1, 0, none);
      if (id < 0) {
        return absl::UnavailableError(absl::StrCat("umad_register(SMP class 0x",
                                                   absl::Hex(mgmt_class), ") on simulator ",
                                                   label, " failed: ", ErrnoText(errno)));
      }
      t->smp_agents_.push_back(id);
    }
  }

  if (options.sim_claim_issm) {
    if (!t->simulator_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sim_claim_issm is for ibsim only; on ", label, " it would advertise an SM"));
    }
    char path[256] = {};
    if (umad_get_issm_path(t->port_.ca_name.c_str(), t->port_.port_num, path, sizeof(path)) < 0 ||
        (t->issm_fd_ = open(path, O_RDWR)) < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot open the issm device of simulator port ", label, ": ",
                       ErrnoText(errno)));
    }
    t->sim_issm_claimed_ = true;
  }

  // umad_size() is only right after umad_open_port (it switches the header
  // to the 64-byte layout with pkey_index), so the buffers are sized here.
  t->send_buf_.assign(umad_size() + kMadSize, 0);
  t->recv_buf_.assign(umad_size() + kMadSize, 0);
  t->caps_.name = "umad";
  t->caps_.kernel_rmpp = kernel_rmpp;
  t->caps_.can_reach_qp1 = true;
  t->caps_.max_receive_size = kernel_rmpp ? SIZE_MAX : kMadSize;
  t->caps_.rewrites_tid_high = true;
  return t;
}

// ibsim's select loop serves the control socket before client packets, so a
// client that writes a MAD and then disconnects (process exit) in the same
// round loses the MAD: ibsim drops the client first and never reads it. ibsim
// handles one client's packets in order, so an answered SA request sent last
// proves every earlier MAD was routed. Bounded: gives up after 500 ms.
void UmadTransport::FlushSimulatorSends() {
  if (!simulator_ || stats_.sent == 0 || sa_agent_ < 0 || port_.sm_lid == 0) return;
  constexpr uint32_t kFlushTid = 0x5f1u << 20;  // lower TID half; umad2sim keeps it
  std::array<uint8_t, kMadSize> get{};
  get[0] = 1;     // BaseVersion
  get[1] = kSaClass;
  get[2] = kClassVersion2;
  get[3] = 0x01;  // Get
  get[12] = kFlushTid >> 24;
  get[13] = (kFlushTid >> 16) & 0xff;
  get[16] = 0x00;
  get[17] = 0x01;  // ClassPortInfo
  get[24] = 1;     // RMPPVersion, not an RMPP transfer
  MadAddress sa;
  sa.lid = port_.sm_lid;
  sa.sl = port_.sm_sl;
  if (!Send(sa, get).ok()) return;
  for (int waited_ms = 0; waited_ms < 500; waited_ms += 5) {
    bool answered = false;
    Drain([&](const ReceivedMad& r) {
      answered |= r.data.size() >= 24 && r.data[1] == kSaClass && (r.data[3] & 0x80) &&
                  r.data[12] == get[12] && r.data[13] == get[13] && r.data[14] == 0 &&
                  r.data[15] == 0;
    });
    if (answered) return;
    pollfd pfd{fd(), POLLIN, 0};
    poll(&pfd, 1, 5);  // umad2sim intercepts poll(2) for its fake fd
  }
}

// ibsim: a port that claims IsSM (sim_claim_issm) is polled by OpenSM with
// SMInfo Get (IBA 14.2.5.13) on every heavy sweep. umad2sim emulates no send
// timeouts, so an unanswered poll stays pending in OpenSM forever, its sweep
// never completes and the switches are never re-programmed (after an ibsim
// Unlink/Link, no route comes back while a uscm peer runs). Answer as an SM
// that is NOTACTIVE with priority 0, which OpenSM ignores (IBA 14.4.1).
void UmadTransport::AnswerSimulatorSmInfo(const uint8_t* smp, size_t length,
                                          uint16_t from_lid) {
  constexpr uint16_t kAttrSmInfo = 0x0020;
  // The return path ends by byte 192 + hop count (< 224, what umad2sim keeps).
  if (length < 200 || length > kMadSize) return;
  const bool directed = smp[1] == 0x81;
  const uint16_t attr = static_cast<uint16_t>(smp[16] << 8 | smp[17]);
  if (smp[3] != 0x01 /*Get*/ || attr != kAttrSmInfo || smp_agents_.size() != 2) return;
  std::array<uint8_t, kMadSize> resp{};
  std::memcpy(resp.data(), smp, length);
  resp[3] = 0x81;  // GetResp
  if (directed) {
    resp[4] = 0x80;  // D bit: returning; status 0 (IBA 14.2.1.2, Table 146)
    resp[5] = 0;
  } else {
    resp[4] = resp[5] = 0;
  }
  uint8_t* sminfo = resp.data() + 64;  // SMP data
  std::memset(sminfo, 0, 64);
  std::memcpy(sminfo, port_.gid.raw.data() + 8, 8);  // GUID; SM_Key, ActCount 0
  sminfo[20] = 0;                                     // Priority 0, SMState NOTACTIVE
  SimSmInfoAnswer a;
  a.umad.assign(umad_size() + kMadSize, 0);
  // A directed-route answer goes back on the permissive LID; ibsim routes it
  // by the return path in the SMP.
  const int dlid = directed ? 0xffff : from_lid;
  umad_set_addr(a.umad.data(), dlid, 0, 0, 0);
  std::memcpy(umad_get_mad(a.umad.data()), resp.data(), kMadSize);
  a.agent = smp_agents_[directed ? 1 : 0];
  if (umad_send(port_id_, a.agent, a.umad.data(), static_cast<int>(kMadSize), 0, 0) == 0) {
    ++stats_.answered_sminfo;
  }
  constexpr size_t kKept = 16;
  if (sim_sminfo_answers_.size() == kKept) {
    if (sim_sminfo_answers_.front().bounced) --sim_sminfo_bounced_;
    sim_sminfo_answers_.erase(sim_sminfo_answers_.begin());
  }
  sim_sminfo_answers_.push_back(std::move(a));
}

// ibsim hands an answer it cannot route (a link cut after the poll arrived)
// back to its sender with status 110, and OpenSM, which has no send timeout
// under umad2sim, waits for it forever. So a bounced answer is sent again
// every 100 ms (for up to a minute) until the route is back.
bool UmadTransport::NoteBouncedSmInfoAnswer(const uint8_t* mad, size_t length) {
  if (length < 24 || (mad[1] != 0x01 && mad[1] != 0x81) || mad[3] != 0x81) return false;
  for (SimSmInfoAnswer& a : sim_sminfo_answers_) {
    const auto* sent = static_cast<const uint8_t*>(umad_get_mad(a.umad.data()));
    if (std::memcmp(sent + 8, mad + 8, 8) != 0) continue;  // TID
    if (!a.bounced) ++sim_sminfo_bounced_;
    a.bounced = true;
    a.resend_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    ++stats_.sminfo_answer_bounces;
    return true;
  }
  return false;
}

void UmadTransport::ResendBouncedSmInfoAnswers() {
  const auto now = std::chrono::steady_clock::now();
  for (SimSmInfoAnswer& a : sim_sminfo_answers_) {
    if (!a.bounced || now < a.resend_at) continue;
    a.bounced = false;
    --sim_sminfo_bounced_;
    if (a.resends >= 600) continue;  // a minute of resends: given up
    ++a.resends;
    (void)umad_send(port_id_, a.agent, a.umad.data(), static_cast<int>(kMadSize), 0, 0);
  }
}

UmadTransport::~UmadTransport() {
  FlushSimulatorSends();
  if (issm_fd_ >= 0) {
    close(issm_fd_);  // first: no more SMInfo polls (umad2sim waits for ibsim's ack)...
    issm_fd_ = -1;
    // ...but one may have arrived since the last Drain: answer it, or OpenSM,
    // which has no send timeout under umad2sim, waits for it forever.
    Drain([](const ReceivedMad&) {});
  }
  if (port_id_ < 0) return;
  for (int id : smp_agents_) umad_unregister(port_id_, id);
  if (sa_agent_ >= 0) umad_unregister(port_id_, sa_agent_);
  if (cm_agent_ >= 0) umad_unregister(port_id_, cm_agent_);
  umad_close_port(port_id_);
}

int UmadTransport::fd() const { return umad_get_fd(port_id_); }

absl::Status UmadTransport::Send(const MadAddress& to, std::span<const uint8_t> mad) {
  if (mad.size() < 24 || mad.size() > kMadSize) {
    ++stats_.send_errors;
    return absl::InvalidArgumentError(
        absl::StrCat("MAD is ", mad.size(), " bytes; umad sends 24..", kMadSize));
  }
  const int mgmt_class = mad[1];
  const int agent = mgmt_class == kSaClass ? sa_agent_ : mgmt_class == kCmClass ? cm_agent_ : -1;
  if (agent < 0) {
    ++stats_.send_errors;
    return absl::InvalidArgumentError(absl::StrCat(
        "no umad agent for management class 0x", absl::Hex(mgmt_class, absl::kZeroPad2),
        " (this transport sends CM 0x07 and SA 0x03)"));
  }
  if (port_.link_layer == LinkLayer::kEthernet && !to.has_grh) {
    ++stats_.send_errors;
    return absl::InvalidArgumentError(
        "RoCE port: a MAD needs a GRH (MadAddress.has_grh and gid); the kernel cannot "
        "build an address handle without one");
  }

  void* umad = send_buf_.data();
  std::fill(send_buf_.begin(), send_buf_.end(), 0);
  umad_set_addr(umad, to.lid, static_cast<int>(to.qpn), to.sl, static_cast<int>(to.qkey));
  ib_mad_addr_t* addr = umad_get_mad_addr(umad);
  addr->path_bits = to.path_bits;
  if (to.has_grh) {
    ib_mad_addr_t grh;
    std::memset(&grh, 0, sizeof(grh));
    std::memcpy(grh.gid, to.gid.raw.data(), 16);
    grh.hop_limit = to.hop_limit;
    grh.traffic_class = to.traffic_class;
    grh.flow_label = htobe32(to.flow_label);
    umad_set_grh(umad, &grh);
    // libibumad trap: umad_set_grh does not copy gid_index.
    addr->gid_index = to.sgid_index;
  }
  umad_set_pkey(umad, to.pkey_index);
  std::memcpy(umad_get_mad(umad), mad.data(), mad.size());

  for (int attempt = 0;; ++attempt) {
    errno = 0;
    const int rc = umad_send(port_id_, agent, umad, static_cast<int>(mad.size()), 0, 0);
    if (rc == 0) {
      ++stats_.sent;
      return absl::OkStatus();
    }
    const int err = errno != 0 ? errno : -rc;
    if (err == EINVAL && attempt < kTidBusyRetries) {
      // ib_umad's is_duplicate(): a MAD with this TID and class is still
      // waiting for its send completion. It completes within microseconds.
      ++stats_.send_tid_busy_retries;
      usleep(kTidBusySleepUs);
      continue;
    }
    ++stats_.send_errors;
    if (err == EINVAL) {
      return absl::FailedPreconditionError(absl::StrCat(
          "umad_send on ", port_.ca_name, ":", port_.port_num,
          " refused (EINVAL) for 50 ms: either a MAD with the same TID and class is still in "
          "flight (ib_umad is_duplicate; use a fresh TID per message) or the address is "
          "invalid (P_Key index ", to.pkey_index, ", GID index ", to.sgid_index,
          ", LID 0x", absl::Hex(to.lid), ")"));
    }
    return absl::UnavailableError(absl::StrCat("umad_send on ", port_.ca_name, ":",
                                               port_.port_num, " failed: ", ErrnoText(err)));
  }
}

// OpenSM answers a GetTable with one unsegmented MAD (RMPP Active, type 0,
// segment 0) and leaves segmenting to the kernel, which umad2sim skips. When
// the whole answer arrived (not cut at 224 bytes) it is rewritten into what
// the kernel would have sent: one DATA segment, First|Last, segment 1,
// PayloadLength = the bytes after the RMPP header. A cut answer is left as is
// (the agent then rejects it: its records beyond byte 224 are lost).
void UmadTransport::NormalizeSimRmpp(uint8_t* mad, size_t n) {
  if (n < 36 || n >= kUmad2simPacket - umad_size()) return;
  const uint8_t flags = mad[26] & 0x7;
  if (mad[24] != 1 || mad[25] != 0 || flags != 0x1 || (mad[3] & 0x80) == 0) return;
  if (mad[28] | mad[29] | mad[30] | mad[31]) return;
  mad[25] = 1;                                              // RMPPType DATA
  mad[26] = static_cast<uint8_t>((mad[26] & 0xF8) | 0x7);  // Active|First|Last
  mad[31] = 1;                                              // SegmentNumber 1
  const uint32_t payload = static_cast<uint32_t>(n - 36);
  mad[32] = static_cast<uint8_t>(payload >> 24);
  mad[33] = static_cast<uint8_t>(payload >> 16);
  mad[34] = static_cast<uint8_t>(payload >> 8);
  mad[35] = static_cast<uint8_t>(payload);
  ++stats_.sim_rmpp_normalized;
}

bool UmadTransport::NoteReceiveLoss(int err) {
  if (err != EIO && err != ENODEV) return false;
  if (lost_.ok()) {
    lost_ = absl::UnavailableError(absl::StrCat(
        port_.ca_name, " port ", port_.port_num, " is gone: its umad file reads ", strerror(err),
        " (the device was removed, or ib_umad unloaded)"));
  }
  return true;
}

size_t UmadTransport::Drain(absl::FunctionRef<void(const ReceivedMad&)> sink, size_t max) {
  size_t n = 0;
  const size_t header = umad_size();
  if (sim_sminfo_bounced_ > 0) ResendBouncedSmInfoAnswers();  // ibsim, rare
  while (n < max) {
    int length = static_cast<int>(
        simulator_ ? kUmad2simPacket - header : recv_buf_.size() - header);
    errno = 0;
    const int rc = umad_recv(port_id_, recv_buf_.data(), &length, 0);
    if (rc < 0) {
      if (errno == ENOSPC && length > static_cast<int>(recv_buf_.size() - header)) {
        // A kernel-RMPP response longer than the buffer: the kernel keeps it
        // queued and tells the size it needs.
        ++stats_.receive_buffer_grows;
        recv_buf_.resize(header + static_cast<size_t>(length));
        continue;
      }
      NoteReceiveLoss(errno);
      break;  // EAGAIN/EWOULDBLOCK: nothing more queued
    }
    const auto* umad = reinterpret_cast<const ib_user_mad_t*>(recv_buf_.data());
    if (umad->status != 0 || length < 24) {
      // A failed send, an RMPP transfer the kernel gave up on, or (ibsim)
      // a MAD the simulator bounced back as undeliverable.
      if (simulator_ && length >= 24 &&
          NoteBouncedSmInfoAnswer(static_cast<const uint8_t*>(umad_get_mad(recv_buf_.data())),
                                  static_cast<size_t>(length))) {
        continue;
      }
      ++stats_.receive_status_errors;
      continue;
    }
    const auto* data = static_cast<const uint8_t*>(umad_get_mad(recv_buf_.data()));
    if (!smp_agents_.empty() && (data[1] == 0x01 || data[1] == 0x81)) {
      if (sim_issm_claimed_) AnswerSimulatorSmInfo(data, static_cast<size_t>(length), be16toh(umad->addr.lid));
      ++stats_.dropped_smp;  // OpenSM polling a SIM_SET_ISSM client
      continue;
    }
    const ib_mad_addr_t& a = umad->addr;
    ReceivedMad r;
    r.from.lid = be16toh(a.lid);
    r.from.qpn = be32toh(a.qpn);
    r.from.qkey = be32toh(a.qkey);
    r.from.pkey_index = static_cast<uint16_t>(umad_get_pkey(recv_buf_.data()));
    r.from.sl = a.sl;
    r.from.path_bits = a.path_bits;
    r.from.has_grh = a.grh_present != 0;
    if (r.from.has_grh) {
      std::memcpy(r.from.gid.raw.data(), a.gid, 16);
      r.from.hop_limit = a.hop_limit;
      r.from.traffic_class = a.traffic_class;
      r.from.flow_label = be32toh(a.flow_label);
      r.from.sgid_index = a.gid_index;  // the local GID the MAD was addressed to
    }
    const bool cut = simulator_ && static_cast<size_t>(length) == kUmad2simPacket - header;
    const size_t received = static_cast<size_t>(length);
    if (cut) {
      // umad2sim cut a full MAD: the rest never reached this process.
      std::memset(recv_buf_.data() + header + length, 0, kMadSize - static_cast<size_t>(length));
      length = static_cast<int>(kMadSize);
      ++stats_.sim_tail_zeroed;
    } else if (simulator_ && static_cast<size_t>(length) < kMadSize) {
      // A sender's short MAD (OpenSM sends 56 + 64 bytes for a PathRecord
      // GetResp): umad2sim passes its length on, a real link carries 256.
      std::memset(recv_buf_.data() + header + length, 0, kMadSize - static_cast<size_t>(length));
      length = static_cast<int>(kMadSize);
    }
    if (simulator_) NormalizeSimRmpp(recv_buf_.data() + header, received);
    r.data = std::span<const uint8_t>(data, static_cast<size_t>(length));
    ++stats_.received;
    ++n;
    sink(r);
  }
  return n;
}

}  // namespace uscm::mad

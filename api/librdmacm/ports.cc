// The drop-in's RDMA ports and the addresses of each. See ports.h.
#include "api/librdmacm/ports.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <limits>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/c/router_on_demand.h"
#include "api/c/uscm_device.h"
#include "api/c/uscm_device_on.h"
#include "api/librdmacm/devices.h"
#include "api/librdmacm/fail.h"
#include "api/librdmacm/fork_locks.h"
#include "api/librdmacm/gid_watch.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"
#include "api/librdmacm/port_choice.h"
#include "mad/gid.h"
#include "verbs/gid_table.h"
#include "verbs/interface_addresses.h"
#include "verbs/ipoib.h"

namespace uscm::librdmacm {
namespace {

int QueryPort(ibv_context* verbs, uint8_t port, ibv_port_attr* attr) {
  return ibv_query_port(verbs, port, attr);
}

// A coarse monotonic clock (the vDSO's: no syscall), in nanoseconds.
int64_t CoarseNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

bool CountersWanted() {
  const char* v = getenv("USCM_CM_COUNTERS");
  return v != nullptr && *v != 0 && strcmp(v, "0") != 0;
}

// The CM counters of an opened port's uscm device ("" when they cannot be read).
std::string CountersOf(uscm_device* dev) {
  char text[1024];
  return uscm_device_cm_counters_text(dev, text, sizeof text) == 0 ? text : "";
}

// A miss lists the devices again at most this often (SyncPortsLocked).
constexpr int64_t kMinListIntervalNs = 100 * 1000 * 1000;

struct Table {
  bool listed = false;
  bool simulated = false;  // UsePortsForTesting's: a listing finds only AddPortForTesting's
  std::deque<Port> ports;  // a deque: pointers stay valid
  int (*query_port)(ibv_context*, uint8_t, ibv_port_attr*) = QueryPort;
  int64_t (*now_ns)() = CoarseNowNs;
  int64_t synced_ns = kNeverSynced;  // when a miss last listed the ports again
  uint64_t syncs = 0;
  // AddressChanges() when every port's generation was last asked, and
  // whether one of them was not followed then (asked at every call).
  uint64_t asked_at = kNeverAsked;
  bool unfollowed = false;
  static constexpr uint64_t kNeverAsked = ~uint64_t{0};
  static constexpr int64_t kNeverSynced = std::numeric_limits<int64_t>::min();
  // AddPortForTesting's ports, which the next listing of a simulated table finds.
  std::vector<Port> added_later;
};

Table& TheTable() {
  static Table* t = new Table;
  return *t;
}

Addr16 Mapped(const void* ipv4) {
  Addr16 a{};
  a[10] = a[11] = 0xff;
  memcpy(&a[12], ipv4, 4);
  return a;
}

// The IPs of an InfiniBand port: those of the IPoIB interfaces whose hardware
// address carries the port's GID (as uscm_device_open finds them).
std::vector<Addr16> IpoibPortIps(ibv_context* verbs, int port) {
  ibv_gid gid;
  if (ibv_query_gid(verbs, port, 0, &gid) != 0) return {};
  mad::Gid g;
  memcpy(g.raw.data(), gid.raw, 16);
  std::vector<Addr16> out;
  for (const verbs::InterfaceAddress& a : verbs::IpoibAddressesOf(g)) out.push_back(a.ip);
  return out;
}

// The port's non-zero GIDs, in index order: one ibv_query_gid_table call (one
// ioctl; verbs/gid_table.h, sysfs when it fails). A per-entry loop made 1,024
// calls on rxe at each program's first rdma_* call (strace -c of cmtime: 1,022
// of them failing with ENODATA for the empty entries), in cmtime's "create id"
// step.
std::vector<Addr16> GidsOf(ibv_context* verbs, const std::string& ca, int port, int count) {
  std::vector<Addr16> out;
  ibv_device_attr da;
  size_t max_entries = 0;
  if (count > 0 && QueryDeviceOnce(verbs, &da) == 0) {
    max_entries = static_cast<size_t>(count) * da.phys_port_cnt;
  }
  absl::StatusOr<std::vector<verbs::GidTableEntry>> table =
      verbs::ReadPortGidTable(verbs, ca, port, max_entries);
  if (!table.ok()) return out;
  for (const verbs::GidTableEntry& e : *table) {
    if (!e.gid.is_zero()) out.push_back(e.gid.raw);
  }
  return out;
}

// A port's addresses as the kernel has them now (a simulated port's stay). A
// RoCE port's are its GIDs (the netdev's IPs, IPv4 mapped; the same table,
// not read twice: it was 256 more sysfs files per process).
void ReadAddresses(Port* p) {
  if (p->testing) return;
  p->gids = GidsOf(p->verbs, p->ca, p->port_num, p->gid_count);
  p->ips = p->ethernet ? p->gids : IpoibPortIps(p->verbs, p->port_num);
}

// The generation of a port's addresses (ports.h PortOfAddressLocked).
uint64_t AddressGeneration(const Port& p) {
  if (p.testing) return 0;
  return p.ethernet ? GidTableGeneration(p.verbs) : IpAddressGeneration();
}

// The uscmds of real ports (router_on_demand.h); a simulated port has none.
void StartRoutersOf(const std::vector<const Port*>& ports) {
  std::vector<std::pair<std::string, int>> real;
  for (const Port* p : ports) {
    if (!p->testing) real.emplace_back(p->ca, p->port_num);
  }
  c_api::StartRoutersOnDemand(real);
}

struct DeviceHooks {
  uscm_device* (*open)(ibv_context*, int) = c_api::OpenDeviceOn;
  int (*close)(uscm_device*) = uscm_device_close;
  void (*start_routers)(const std::vector<const Port*>&) = StartRoutersOf;
};

DeviceHooks& TheDeviceHooks() {
  static DeviceHooks hooks;
  return hooks;
}

struct AddressHooks {
  uint64_t (*generation)(const Port&) = AddressGeneration;
  void (*read)(Port*) = ReadAddresses;
  uint64_t (*changes)() = AddressChanges;
  uint64_t rereads = 0;
  uint64_t generations_asked = 0;
};

AddressHooks& TheHooks() {
  static AddressHooks hooks;
  return hooks;
}

// Reads `p`'s addresses again, at generation `generation`, and tells its
// uscm device when it is open.
void RereadLocked(Port* p, uint64_t generation) {
  p->generation = generation;
  ++TheHooks().rereads;
  TheHooks().read(p);
  if (p->dev != nullptr && !p->testing && uscm_device_reread_addresses(p->dev) != 0) {
    Fail(errno, "port addresses", uscm_last_error());  // USCM_DEBUG: the device keeps its own
  }
}

}  // namespace

int EnsureDevicesListedLocked(const char* call) {
  return TheTable().listed ? 0 : EnsureDevices(call);
}

std::vector<Port*> PortsLocked() {
  std::vector<Port*> out;
  for (Port& p : TheTable().ports) out.push_back(&p);
  return out;
}

std::vector<Port*> LivePortsLocked() {
  std::vector<Port*> out;
  for (Port& p : TheTable().ports) {
    if (!p.gone) out.push_back(&p);
  }
  return out;
}

namespace {

Port* FindLocked(const uscm_addr& addr) {
  const Addr16 key = KeyOf(addr);
  for (Port* p : LivePortsLocked()) {
    const std::vector<Addr16>& set = addr.family == USCM_AF_IB ? p->gids : p->ips;
    if (std::find(set.begin(), set.end(), key) != set.end()) return p;
  }
  return nullptr;
}

}  // namespace

Addr16 KeyOf(const uscm_addr& addr) {
  if (addr.family == USCM_AF_INET) return Mapped(&addr.ip[12]);
  Addr16 a;
  memcpy(a.data(), addr.family == USCM_AF_IB ? addr.gid : addr.ip, 16);
  return a;
}

namespace {

// The ACTIVE ports (of those the listing's choice allows) of the devices
// listed now that were not in the table when the listing began, each with
// its addresses read: ibv_query_port once per allowed port not in the table,
// nothing for those in it. Takes no lock of the library's (devices.h has its
// own).
void ListPortsUnlocked(PortListing* l) {
  // Only the devices the choice allows are opened (librdmacm opens a device
  // when a call needs it: ucma_init_device).
  for (ibv_context* verbs :
       OpenListedDevices([&](const char* ca) { return DeviceChosen(l->choice, ca); })) {
    ibv_device_attr dattr;
    if (QueryDeviceOnce(verbs, &dattr) != 0) continue;
    const char* ca = ibv_get_device_name(verbs->device);
    for (int port = 1; port <= dattr.phys_port_cnt; ++port) {
      if (!PortChosen(l->choice, ca, port)) continue;
      const std::pair<ibv_context*, uint8_t> key(verbs, static_cast<uint8_t>(port));
      ibv_port_attr pattr;
      if (std::find(l->known.begin(), l->known.end(), key) != l->known.end() ||
          l->query_port(verbs, key.second, &pattr) != 0 || pattr.state != IBV_PORT_ACTIVE) {
        continue;
      }
      Port p;
      p.ca = ca;
      p.port_num = key.second;
      p.verbs = verbs;
      p.ethernet = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
      p.gid_count = pattr.gid_tbl_len;
      p.generation = TheHooks().generation(p);  // before the read: a change during it moves it
      TheHooks().read(&p);
      l->found.push_back(std::move(p));
    }
  }
}

// What a listing needs from the table (ports.h BeginPortListingLocked), with
// no spacing: the first listing's.
void BeginLocked(Table& t, PortListing* l) {
  l->simulated = t.simulated;
  l->query_port = t.query_port;
  for (const Port& p : t.ports) l->known.emplace_back(p.verbs, p.port_num);
}

}  // namespace

bool BeginPortListingLocked(PortListing* l, bool spaced) {
  Table& t = TheTable();
  if (t.simulated && t.added_later.empty()) return false;
  const int64_t now = t.now_ns();
  if (spaced && t.synced_ns != Table::kNeverSynced && now - t.synced_ns < kMinListIntervalNs) {
    return false;
  }
  t.synced_ns = now;
  ++t.syncs;
  BeginLocked(t, l);
  if (t.simulated) return true;
  std::string why;
  l->choice_ok = ParsePortChoice(getenv("USCM_DEVICE"), &l->choice, &why);
  return true;
}

void ListPorts(PortListing* l) {
  if (l->simulated || !l->choice_ok) return;
  SyncDevices("port lookup");  // none left (ENODEV): every port is marked gone
  ListPortsUnlocked(l);
}

bool FinishPortListingLocked(PortListing* l) {
  Table& t = TheTable();
  if (l->simulated) {
    const bool changed = !t.added_later.empty();
    for (Port& p : t.added_later) t.ports.push_back(std::move(p));
    t.added_later.clear();
    return changed;
  }
  bool changed = false;
  for (Port& p : t.ports) {
    if (!p.testing && !p.gone && DeviceGone(p.verbs)) p.gone = changed = true;
  }
  for (Port& p : l->found) {
    const bool listed = std::any_of(t.ports.begin(), t.ports.end(), [&](const Port& q) {
      return q.verbs == p.verbs && q.port_num == p.port_num;
    });
    if (listed) continue;  // a call's miss listed it meanwhile
    t.ports.push_back(std::move(p));
    changed = true;
  }
  l->found.clear();
  return changed;
}

namespace {

// A lookup's miss (PortOfAddressLocked): the devices and their ports listed
// again, as librdmacm lists the devices again when the kernel names one it
// does not have (ucma_get_device); a port that became ACTIVE or a device
// added since is then served. At most once per kMinListIntervalNs: a program
// that misses in a loop (a foreign source, a routing table's source on no
// RDMA port) pays a listing per 100 ms, not per call. Whether the table
// changed.
bool SyncPortsLocked() {
  PortListing listing;
  if (!BeginPortListingLocked(&listing, /*spaced=*/true)) return false;
  ListPorts(&listing);
  return FinishPortListingLocked(&listing);
}

}  // namespace

int EnsurePortsLocked(const char* call) {
  Table& t = TheTable();
  if (t.listed) return 0;
  if (EnsureDevices(call) != 0) return -1;
  PortChoice choice;
  std::string why;
  const char* env = getenv("USCM_DEVICE");
  if (!ParsePortChoice(env, &choice, &why)) return Fail(EINVAL, call, why.c_str());
  PortListing listing;
  BeginLocked(t, &listing);
  listing.choice = choice;
  ListPortsUnlocked(&listing);
  FinishPortListingLocked(&listing);
  if (LivePortsLocked().empty()) {
    return Fail(ENODEV, call,
                choice.ca.empty() ? "no ACTIVE port on any RDMA device"
                                  : ("USCM_DEVICE=" + std::string(env) +
                                     ": no such ACTIVE port (see ibv_devinfo)")
                                        .c_str());
  }
  t.listed = true;
  return 0;
}

void RefreshPortAddressesLocked() {
  AddressHooks& h = TheHooks();
  Table& t = TheTable();
  // Taken before the generations: a change while they are asked moves it
  // past what is kept, and the next call asks again.
  const uint64_t changes = h.changes();
  if (changes == t.asked_at && !t.unfollowed) return;
  bool unfollowed = false;
  for (Port* port : LivePortsLocked()) {  // a gone port's addresses are not looked up
    Port& p = *port;
    const uint64_t g = h.generation(p);
    ++h.generations_asked;
    if (g == kGidsNotFollowed) unfollowed = true;
    if (g == kGidsNotFollowed || g != p.generation) RereadLocked(&p, g);
  }
  t.asked_at = changes;
  t.unfollowed = unfollowed;
}

Port* PortOfAddressLocked(const uscm_addr& addr) {
  RefreshPortAddressesLocked();
  if (Port* p = FindLocked(addr)) return p;
  bool reread = false;
  for (Port* port : LivePortsLocked()) {
    Port& p = *port;
    if (p.missed_at == p.generation) continue;
    p.missed_at = p.generation;
    RereadLocked(&p, p.generation);
    reread = true;
  }
  if (reread) {
    if (Port* p = FindLocked(addr)) return p;
  }
  return SyncPortsLocked() ? FindLocked(addr) : nullptr;
}

bool AnyLivePortOpenLocked() {
  const std::deque<Port>& ports = TheTable().ports;
  return std::any_of(ports.begin(), ports.end(),
                     [](const Port& p) { return !p.testing && !p.gone && p.dev != nullptr; });
}

std::vector<Port*> PortsOfLocked(ibv_context* verbs) {
  std::vector<Port*> out;
  for (Port& p : TheTable().ports) {
    if (verbs != nullptr && p.verbs == verbs) out.push_back(&p);
  }
  return out;
}

OpenedPort ReleasePortLocked(Port* port) {
  const OpenedPort opened{port->dev, port->channel, port->testing};
  if (port->dev != nullptr && !port->testing && CountersWanted()) {
    port->counters_at_release = CountersOf(port->dev);  // USCM_CM_COUNTERS prints them at exit
  }
  port->dev = nullptr;
  port->channel = nullptr;
  port->verbs = nullptr;  // about to be closed: the pointer may come back for another device
  port->gone = true;
  port->ips.clear();
  port->gids.clear();
  return opened;
}

Port* ReplaceLostPortLocked(Port* port) {
  if (port->lost || port->gone || port->testing || port->verbs == nullptr ||
      DeviceGone(port->verbs)) {
    return nullptr;
  }
  Port fresh = *port;  // the device, the port and its addresses; not opened:
  fresh.dev = nullptr;
  fresh.channel = nullptr;
  fresh.opened_by_library = fresh.parents_open = false;
  fresh.resync_retry = {};
  fresh.resync_opening = false;
  fresh.counters_at_release.clear();
  fresh.replaces_lost = true;
  port->lost = port->gone = true;  // no new id on it, no lookup finds it
  TheTable().ports.push_back(std::move(fresh));
  return &TheTable().ports.back();
}

namespace {

bool HostHoldsAddressNow(const uscm_addr& addr) {
  if (addr.family != USCM_AF_INET && addr.family != USCM_AF_INET6) return false;
  const Addr16 key = KeyOf(addr);
  const std::vector<verbs::InterfaceAddress> held = verbs::InterfaceAddresses();
  return std::any_of(held.begin(), held.end(), [&](const verbs::InterfaceAddress& a) {
    return !a.loopback && a.ip == key;
  });
}

bool (*g_host_holds)(const uscm_addr&) = HostHoldsAddressNow;

}  // namespace

bool HostHoldsAddress(const uscm_addr& addr) { return g_host_holds(addr); }

void SetHostAddressesForTesting(bool (*holds)(const uscm_addr& addr)) {
  g_host_holds = holds != nullptr ? holds : HostHoldsAddressNow;
}

void SetPortAddressesForTesting(uint64_t (*generation)(const Port&), void (*read)(Port*),
                                uint64_t (*changes)()) {
  TheHooks().generation = generation != nullptr ? generation : AddressGeneration;
  TheHooks().read = read != nullptr ? read : ReadAddresses;
  TheHooks().changes = changes != nullptr ? changes : AddressChanges;
  TheTable().asked_at = Table::kNeverAsked;
}

void SetPortDevicesForTesting(uscm_device* (*open)(ibv_context* verbs, int port_num),
                              int (*close)(uscm_device* dev)) {
  TheDeviceHooks().open = open != nullptr ? open : c_api::OpenDeviceOn;
  TheDeviceHooks().close = close != nullptr ? close : uscm_device_close;
}


uint64_t PortAddressRereads() { return TheHooks().rereads; }

void SetPortQueryForTesting(int (*query)(ibv_context*, uint8_t, ibv_port_attr*),
                            int64_t (*now_ns)()) {
  TheTable().query_port = query != nullptr ? query : QueryPort;
  TheTable().now_ns = now_ns != nullptr ? now_ns : CoarseNowNs;
}

uint64_t PortListSyncs() { return TheTable().syncs; }
uint64_t PortGenerationsAsked() { return TheHooks().generations_asked; }

namespace {

// USCM_CM_COUNTERS=1, at exit: each opened port's CM counters (retries,
// duplicates, MADs that came in a state that ignores them), one line on
// stderr after the program's stdout is flushed (a line of its own: not under
// USCM_DEBUG, whose users parse the program's output). Under the library's
// lock, as every reader of the table: a thread still at work at exit (a
// progress hook, the uscm-ports thread, an rdma_destroy_id closing a removed
// device) may be changing it, and a port's device is closed only after
// ReleasePortLocked took it out under that lock, so the printer never reads
// a device being closed (the counters of one closed before are kept then).
// The lock is waited for at most 2 s (a call opening a port holds it up to
// 10 s): then the line says why there are no counters.
void PrintCmCounters() {
  fflush(stdout);
  std::unique_lock<std::mutex> lock(internal::g_mu, std::defer_lock);
  for (int waited_ms = 0; !lock.try_lock(); ++waited_ms) {
    if (waited_ms == 2000) {
      fprintf(stderr, "uscm librdmacm: pid %d CM counters not read: the library is busy at exit\n",
              static_cast<int>(getpid()));
      return;
    }
    usleep(1000);
  }
  fputs(CmCountersLinesLocked().c_str(), stderr);
}

}  // namespace

std::string CmCountersLinesLocked() {
  std::string out;
  for (const Port& p : TheTable().ports) {
    if (p.testing) continue;
    const std::string text = p.dev != nullptr ? CountersOf(p.dev) : p.counters_at_release;
    if (text.empty()) continue;
    char head[128];
    snprintf(head, sizeof head, "uscm librdmacm: pid %d %s port %d CM ", static_cast<int>(getpid()),
             p.ca.c_str(), p.port_num);
    const char* why = p.lost ? " (its uscmd exited)\n" : " (device removed)\n";
    out += head + text + (p.dev == nullptr ? why : "\n");
  }
  return out;
}

int OpenPortDevice(ibv_context* verbs, uint8_t port_num, bool testing, const char* call,
                   OpenedPort* out) {
  // On the library's own context of the device (devices.h: open for the
  // process): no device list and context of its own for the MTU and GIDs.
  uscm_device* dev;
  {
    const OwnFork own;  // a uscmd start forks and execs: no lock to take
    dev = TheDeviceHooks().open(verbs, port_num);
  }
  if (dev == nullptr) return Fail(errno, call, uscm_last_error());
  // Unpolled: the progress hook and every call drain it (ids.cc), so its
  // eventfd would only be written and read once per burst for no reader.
  uscm_event_channel* channel = uscm_create_event_channel_unpolled_on(dev);
  if (channel == nullptr) {
    int err = errno;
    std::string why = uscm_last_error();
    if (!testing) TheDeviceHooks().close(dev);
    return Fail(err, call, why.c_str());
  }
  *out = {dev, channel, testing};
  return 0;
}

bool InstallOpenedPortLocked(Port* port, const OpenedPort& opened, void (*on_open)(Port*)) {
  if (port->channel != nullptr) return false;
  port->dev = opened.dev;
  port->channel = opened.channel;
  port->opened_by_library = true;
  port->parents_open = false;
  if (on_open != nullptr) on_open(port);
  if (CountersWanted()) {
    static const bool registered = atexit(PrintCmCounters) == 0;
    (void)registered;
  }
  return true;
}

int CloseOpenedPort(const OpenedPort& opened) {
  if (opened.channel != nullptr) uscm_destroy_event_channel(opened.channel);
  if (opened.dev == nullptr || opened.testing) return 0;
  return TheDeviceHooks().close(opened.dev);
}

void StartRoutersOfUnopenedPortsLocked() {
  std::vector<const Port*> unopened;
  for (const Port* port : LivePortsLocked()) {
    if (port->channel == nullptr) unopened.push_back(port);
  }
  if (unopened.size() < 2) return;  // the open starts its own, as fast
  const OwnFork own;  // a uscmd start forks and execs: no lock to take
  TheDeviceHooks().start_routers(unopened);
}

void SetPortRouterStartForTesting(void (*start)(const std::vector<const Port*>& ports)) {
  TheDeviceHooks().start_routers = start != nullptr ? start : StartRoutersOf;
}

int OpenPortLocked(Port* port, const char* call, void (*on_open)(Port*)) {
  if (port->channel != nullptr) return 0;
  OpenedPort opened;
  if (OpenPortDevice(port->verbs, port->port_num, port->testing, call, &opened) != 0) {
    if (!port->parents_open) return -1;
    return Fail(errno, call,
                ("this process is a child of fork() whose parent had opened " + port->ca +
                 " port " + std::to_string(port->port_num) +
                 ": the parent's open stays the parent's, and the child's own failed (above)")
                    .c_str());
  }
  InstallOpenedPortLocked(port, opened, on_open);
  return 0;
}

namespace {

// The ports' devices and channels a fork's parent had opened: kept, never
// closed, in its child (LeaveOpenedPortsToParentLocked).
std::vector<OpenedPort>& ParentsPorts() {
  static auto* kept = new std::vector<OpenedPort>;
  return *kept;
}

}  // namespace

void LeaveOpenedPortsToParentLocked() {
  for (Port& p : TheTable().ports) {
    p.resync_opening = false;  // the parent's thread opens it, in the parent
    p.resync_retry = {};
    if (!p.opened_by_library || p.channel == nullptr) continue;
    RemoveOpenChannel(p.channel);  // no check reads it (the progress hook's are the parent's)
    ParentsPorts().push_back({p.dev, p.channel, p.testing});
    p.dev = nullptr;
    p.channel = nullptr;
    p.opened_by_library = false;
    p.parents_open = true;
  }
}

int UsePortsForTesting(const std::vector<uscm_device*>& devs,
                       const std::vector<std::vector<Addr16>>& ips) {
  Table& t = TheTable();
  if (t.listed) return Fail(EBUSY, "test ports", "ports are listed already");
  for (size_t i = 0; i < devs.size(); ++i) {
    Port p;
    p.ca = "sim" + std::to_string(i);
    p.port_num = static_cast<uint8_t>(i + 1);
    p.ips = i < ips.size() ? ips[i] : std::vector<Addr16>{};
    p.testing = true;
    p.dev = devs[i];
    p.channel = uscm_create_event_channel_unpolled_on(devs[i]);
    if (p.channel == nullptr) {
      int err = errno;
      for (Port& made : t.ports) uscm_destroy_event_channel(made.channel);
      t.ports.clear();
      return Fail(err, "test ports", uscm_last_error());
    }
    t.ports.push_back(std::move(p));
  }
  t.listed = true;
  t.simulated = true;
  return 0;
}

namespace {

// A simulated port the next listing finds (AddPortForTesting), with no
// device yet; NULL with errno EINVAL when the ports are not simulated.
Port* AddLaterForTesting(const std::vector<Addr16>& ips) {
  Table& t = TheTable();
  if (!t.simulated) {
    Fail(EINVAL, "test ports", "no simulated ports (UsePortsForTesting)");
    return nullptr;
  }
  Port p;
  p.port_num = static_cast<uint8_t>(t.ports.size() + t.added_later.size() + 1);
  p.ca = "sim" + std::to_string(p.port_num - 1);
  p.ips = ips;
  p.testing = true;
  t.added_later.push_back(std::move(p));
  return &t.added_later.back();
}

}  // namespace

uscm_event_channel* AddPortForTesting(uscm_device* dev, const std::vector<Addr16>& ips) {
  uscm_event_channel* channel = uscm_create_event_channel_unpolled_on(dev);
  if (channel == nullptr) {
    Fail(errno, "test ports", uscm_last_error());
    return nullptr;
  }
  Port* p = AddLaterForTesting(ips);
  if (p == nullptr) {
    uscm_destroy_event_channel(channel);
    return nullptr;
  }
  p->dev = dev;
  p->channel = channel;
  return channel;
}

int AddUnopenedPortForTesting(const std::vector<Addr16>& ips) {
  return AddLaterForTesting(ips) == nullptr ? -1 : 0;
}

void ResetPortsForTesting() {
  Table& t = TheTable();
  for (Port& p : t.ports) {
    if (p.testing && p.channel != nullptr) uscm_destroy_event_channel(p.channel);
  }
  for (Port& p : t.added_later) {
    if (p.channel != nullptr) uscm_destroy_event_channel(p.channel);
  }
  t.added_later.clear();
  t.ports.clear();
  t.listed = false;
  t.simulated = false;
  t.synced_ns = Table::kNeverSynced;
  t.syncs = 0;
  t.asked_at = Table::kNeverAsked;
}

}  // namespace uscm::librdmacm

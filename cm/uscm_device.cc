// uscm_device_open / uscm_device_close: a real port for C programs, owned by
// uscm (the transport, the Device and its progress thread).
#include "cm/uscm_device.h"

#include <errno.h>
#include <infiniband/umad.h>
#include <string.h>

#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "cm/rdma_cm.h"
#include "cm/router/router_transport.h"
#include "mad/umad_transport.h"

namespace {

struct OpenedDevice {
  std::unique_ptr<uscm::mad::Transport> transport;
  std::unique_ptr<uscm::Device> device;  // destroyed before its transport
};

std::mutex g_mu;
absl::flat_hash_map<uscm_device*, std::unique_ptr<OpenedDevice>>& Opened() {
  static auto* m = new absl::flat_hash_map<uscm_device*, std::unique_ptr<OpenedDevice>>();
  return *m;
}

int ErrnoFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kNotFound: return ENODEV;
    case absl::StatusCode::kPermissionDenied: return EACCES;
    case absl::StatusCode::kFailedPrecondition: return EBUSY;  // CM class taken, no router
    case absl::StatusCode::kUnavailable: return EBUSY;
    default: return EIO;
  }
}

uscm_device* Failed(int err, const std::string& message) {
  uscm_fail_with(err, message.c_str());
  return nullptr;
}

}  // namespace

extern "C" struct uscm_device* uscm_device_open(const char* ca_name, int port_num) {
  // The port: as given, or libibumad's default (the first ACTIVE one).
  umad_port_t p;
  memset(&p, 0, sizeof(p));
  if (umad_get_port(ca_name, port_num, &p) < 0) {
    return Failed(ENODEV, absl::StrCat(
        "device_open: no RDMA port ", ca_name != nullptr ? ca_name : "(first active)", ":",
        port_num, " (is a device present in /sys/class/infiniband and ib_umad loaded? "
        "without hardware use the simulated fabric)"));
  }
  const std::string ca = p.ca_name;
  const int port = p.portnum;
  const bool ethernet = strcmp(p.link_layer, "Ethernet") == 0;
  umad_release_port(&p);
  if (ethernet) {
    return Failed(ENOTSUP, absl::StrCat("device_open: ", ca, ":", port,
                                        " is a RoCE port; its GIDs and GRH need "
                                        "verbs::RoceAddressing: use the C++ API "
                                        "(tools/fabric_flags.cc shows how)"));
  }
  uscm::mad::UmadOptions o;
  o.ca_name = ca;
  o.port_num = port;
  // Another process owns the CM class (EINVAL from umad_register): the host's
  // uscmd for this port, as the tools do (docs/ROUTER.md).
  auto transport = uscm::router::OpenOwnerOrRouter(
      [&]() -> absl::StatusOr<std::unique_ptr<uscm::mad::Transport>> {
        auto u = uscm::mad::UmadTransport::Open(o);
        if (!u.ok()) return u.status();
        return std::unique_ptr<uscm::mad::Transport>(std::move(*u));
      },
      uscm::router::DefaultRouterSocket(ca, port));
  if (!transport.ok()) {
    return Failed(ErrnoFor(transport.status()),
                  absl::StrCat("device_open: ", transport.status().message()));
  }
  auto opened = std::make_unique<OpenedDevice>();
  opened->transport = std::move(*transport);
  auto device = uscm::Device::Create(*opened->transport, uscm::DeviceOptions{});
  if (!device.ok()) {
    return Failed(ErrnoFor(device.status()),
                  absl::StrCat("device_open: ", device.status().message()));
  }
  opened->device = std::move(*device);
  if (absl::Status s = opened->device->StartProgressThread(); !s.ok()) {
    return Failed(EIO, absl::StrCat("device_open: progress thread: ", s.message()));
  }
  uscm_device* handle = uscm_device_wrap(opened->device.get());
  std::lock_guard<std::mutex> lock(g_mu);
  Opened()[handle] = std::move(opened);
  return handle;
}

extern "C" int uscm_device_close(struct uscm_device* dev) {
  std::unique_ptr<OpenedDevice> opened;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Opened().find(dev);
    if (dev == nullptr || it == Opened().end()) {
      return uscm_fail_with(EINVAL, "device_close: unknown device (NULL, already closed, or "
                                    "not from uscm_device_open)");
    }
    if (const size_t ids = it->second->device->id_count(); ids != 0) {
      return uscm_fail_with(EBUSY, absl::StrCat("device_close: ", ids,
                                                " id(s) of this device still exist; destroy "
                                                "them (and its event channels) first")
                                       .c_str());
    }
    opened = std::move(it->second);
    Opened().erase(it);
  }
  opened->device->StopProgressThread();
  uscm_device_unwrap_free(dev);
  return 0;  // `opened` goes: the Device, then its transport
}

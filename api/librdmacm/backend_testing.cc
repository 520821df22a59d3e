// The seams through which tests put simulated uscm devices in place of the
// ports (ids.h UseDeviceForTesting and the rest): the ports' table of
// ports.h, each port's channel counted as open (open_channels.h) as
// OnPortOpen does for a real port.
#include <mutex>
#include <vector>

#include "api/librdmacm/ids.h"
#include "api/librdmacm/ids_internal.h"
#include "api/librdmacm/open_channels.h"
#include "api/librdmacm/ports.h"

namespace uscm::librdmacm {

using internal::g_mu;

int UseDeviceForTesting(uscm_device* dev) { return UseDevicesForTesting({dev}, {}); }

int UseDevicesForTesting(const std::vector<uscm_device*>& devs,
                         const std::vector<std::vector<Addr16>>& ips) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (UsePortsForTesting(devs, ips) != 0) return -1;
  for (Port* port : PortsLocked()) AddOpenChannel(port->channel);  // as OnPortOpen
  return 0;
}

int AddDeviceForTesting(uscm_device* dev, const std::vector<Addr16>& ips) {
  std::lock_guard<std::mutex> lock(g_mu);
  uscm_event_channel* channel = AddPortForTesting(dev, ips);
  if (channel == nullptr) return -1;
  AddOpenChannel(channel);  // as OnPortOpen
  return 0;
}

int AddUnopenedDeviceForTesting(const std::vector<Addr16>& ips) {
  std::lock_guard<std::mutex> lock(g_mu);
  return AddUnopenedPortForTesting(ips);
}

void ResetBackendForTesting() {
  std::lock_guard<std::mutex> lock(g_mu);
  ClearOpenChannelsForTesting();
  ResetPortsForTesting();
}

uscm_event_channel* BackendChannel() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<Port*> ports = PortsLocked();
  return ports.empty() ? nullptr : ports.front()->channel;
}

std::vector<uscm_event_channel*> PortChannelsForTesting() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<uscm_event_channel*> out;
  for (Port* port : PortsLocked()) out.push_back(port->channel);
  return out;
}

}  // namespace uscm::librdmacm

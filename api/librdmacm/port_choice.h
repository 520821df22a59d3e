// Which RDMA ports serve the process (ports.h). By default every ACTIVE one:
// an id goes to the port of the address it binds or resolves from, a
// wildcard listener listens on all. USCM_DEVICE restricts them to one
// ("rxe1" = that device's first ACTIVE port, "rxe1:2" = port 2); `uscm exec
// --device` sets it.
#ifndef USCM_API_LIBRDMACM_PORT_CHOICE_H_
#define USCM_API_LIBRDMACM_PORT_CHOICE_H_

#include <string>

namespace uscm::librdmacm {

struct PortChoice {
  std::string ca;  // empty: any device
  int port = 0;    // 0: any ACTIVE port of the device
};

// Parses USCM_DEVICE's value: "" or NULL = any; "CA" or "CA:PORT" (PORT
// 1..255). False with `why` set on anything else ("rxe1:", ":1", "rxe1:x").
bool ParsePortChoice(const char* value, PortChoice* out, std::string* why);

// True when a port of device `ca` may be one the choice allows (the device
// is opened only then: devices.h).
bool DeviceChosen(const PortChoice& choice, const char* ca);
// True when the port (ca, port) is one the choice allows.
bool PortChosen(const PortChoice& choice, const char* ca, int port);

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_PORT_CHOICE_H_

// Which RDMA port serves the process. The drop-in opens one port per process
// (ids.cc, EnsureBackendLocked): by default the first ACTIVE one; USCM_DEVICE
// names another ("rxe1" = that device's first ACTIVE port, "rxe1:2" = port 2),
// for hosts with several devices, where librdmacm would pick the device from
// the address the program binds (which the drop-in does not know yet when it
// opens the port, at rdma_create_id). `uscm exec --device` sets it.
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

// True when the port (ca, port) is one the choice allows.
bool PortChosen(const PortChoice& choice, const char* ca, int port);

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_PORT_CHOICE_H_

#include "api/librdmacm/port_choice.h"

#include <string.h>

namespace uscm::librdmacm {

bool ParsePortChoice(const char* value, PortChoice* out, std::string* why) {
  *out = PortChoice{};
  if (value == nullptr || value[0] == '\0') return true;
  const std::string v = value;
  const size_t colon = v.find(':');
  const std::string ca = v.substr(0, colon);
  if (ca.empty()) {
    *why = "USCM_DEVICE=" + v + ": no device name (expected CA or CA:PORT, e.g. rxe1 or rxe1:1)";
    return false;
  }
  int port = 0;
  if (colon != std::string::npos) {
    const std::string digits = v.substr(colon + 1);
    bool ok = !digits.empty() && digits.size() <= 3;
    for (char c : digits) ok = ok && c >= '0' && c <= '9';
    if (ok) port = std::stoi(digits);
    if (!ok || port < 1 || port > 255) {
      *why = "USCM_DEVICE=" + v + ": the port is not a number from 1 to 255 (expected CA or CA:PORT)";
      return false;
    }
  }
  out->ca = ca;
  out->port = port;
  return true;
}

bool DeviceChosen(const PortChoice& choice, const char* ca) {
  return choice.ca.empty() || (ca != nullptr && choice.ca == ca);
}

bool PortChosen(const PortChoice& choice, const char* ca, int port) {
  return DeviceChosen(choice, ca) && (choice.port == 0 || choice.port == port);
}

}  // namespace uscm::librdmacm

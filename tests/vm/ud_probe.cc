// Manual check of the verbs UD transport on a real device (e.g. Soft-RoCE in
// shared/vm): opens a UD QP and sends one REQ-shaped CM MAD to QP1 of a GID,
// or waits for one MAD. Prints "key=value" lines.
//   ud_probe open [--device D] [--qkey Q]
//   ud_probe send --gid G [--sgid-index N] [--device D] [--seed S]
//   ud_probe recv [--device D] [--timeout-ms N]
#include <poll.h>
#include <stdio.h>

#include <string>

#include "absl/strings/numbers.h"
#include "tests/ibsim/cm_pattern.h"
#include "verbs/ud_transport.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: ud_probe open|send|recv [options]\n");
    return 2;
  }
  const std::string cmd = argv[1];
  uscm::verbs::UdOptions o;
  std::string gid_text;
  uint32_t sgid_index = 0, seed = 1;
  int timeout_ms = 5000;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    bool ok = true;
    if (k == "--device") o.device = v;
    else if (k == "--qkey") ok = absl::SimpleHexAtoi(v, &o.qkey);
    else if (k == "--gid") gid_text = v;
    else if (k == "--sgid-index") ok = absl::SimpleAtoi(v, &sgid_index) && sgid_index < 256;
    else if (k == "--seed") ok = absl::SimpleAtoi(v, &seed);
    else if (k == "--timeout-ms") ok = absl::SimpleAtoi(v, &timeout_ms);
    else ok = false;
    if (!ok) {
      fprintf(stderr, "bad option %s %s\n", k.c_str(), v.c_str());
      return 2;
    }
  }
  auto t = uscm::verbs::UdTransport::Open(o);
  if (!t.ok()) {
    fprintf(stderr, "%s\n", t.status().ToString().c_str());
    return 1;
  }
  printf("device=%s\nport=%u\nqpn=%u\ngid=%s\n", (*t)->port().ca_name.c_str(),
         (*t)->port().port_num, (*t)->qpn(), (*t)->port().gid.ToString().c_str());
  if (cmd == "open") return 0;
  if (cmd == "send") {
    auto gid = uscm::mad::Gid::Parse(gid_text);
    if (!gid.ok()) {
      fprintf(stderr, "%s\n", gid.status().ToString().c_str());
      return 2;
    }
    uscm::mad::MadAddress to;
    to.has_grh = true;
    to.gid = *gid;
    to.sgid_index = static_cast<uint8_t>(sgid_index);
    const auto mad = uscm::mad::CmPatternMad(seed);
    if (auto s = (*t)->Send(to, mad); !s.ok()) {
      fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    // Reap the send completion so a failure shows.
    for (int i = 0; i < 200 && (*t)->stats().sent > 0; ++i) {
      pollfd pfd{(*t)->fd(), POLLIN, 0};
      poll(&pfd, 1, 5);
      (*t)->Drain([](const uscm::mad::ReceivedMad&) {});
    }
    printf("sent=%llu\nsend_errors=%llu\nhex=", static_cast<unsigned long long>((*t)->stats().sent),
           static_cast<unsigned long long>((*t)->stats().send_errors));
    for (uint8_t b : mad) printf("%02x", b);
    printf("\n");
    return (*t)->stats().send_errors == 0 ? 0 : 1;
  }
  if (cmd == "recv") {
    for (int waited = 0; waited < timeout_ms; waited += 5) {
      bool got = false;
      (*t)->Drain([&](const uscm::mad::ReceivedMad& r) {
        got = true;
        printf("from.qpn=%u\nfrom.gid=%s\nlength=%zu\n", r.from.qpn, r.from.gid.ToString().c_str(),
               r.data.size());
      });
      if (got) return 0;
      pollfd pfd{(*t)->fd(), POLLIN, 0};
      poll(&pfd, 1, 5);
    }
    fprintf(stderr, "nothing within %d ms\n", timeout_ms);
    return 1;
  }
  fprintf(stderr, "unknown command %s\n", cmd.c_str());
  return 2;
}

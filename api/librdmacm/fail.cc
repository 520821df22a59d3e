#include "api/librdmacm/fail.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

namespace uscm::librdmacm {

bool DebugEnabled() {
  const char* value = getenv("USCM_DEBUG");
  return value != nullptr && value[0] != '\0' && strcmp(value, "0") != 0;
}

int Fail(int err, const char* call, const char* why) {
  if (DebugEnabled()) {
    const char* name = strerrorname_np(err);
    fprintf(stderr, "uscm librdmacm: %s: %s [%s]\n", call, why, name ? name : "?");
  }
  errno = err;  // last: fprintf may change errno
  return -1;
}

}  // namespace uscm::librdmacm

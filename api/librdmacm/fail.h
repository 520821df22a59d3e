// How a drop-in librdmacm call fails: errno set as librdmacm sets it, nothing
// printed by default, and with USCM_DEBUG=1 in the environment one line on
// stderr saying which call failed and why
// ("uscm librdmacm: rdma_create_id: no RDMA device (ibv_get_device_list is empty) [ENODEV]").
#ifndef USCM_API_LIBRDMACM_FAIL_H_
#define USCM_API_LIBRDMACM_FAIL_H_

namespace uscm::librdmacm {

// Sets errno to `err`, prints "call: why" when USCM_DEBUG=1; always -1.
int Fail(int err, const char* call, const char* why);

// True when USCM_DEBUG is set to something other than "" or "0" (read at each
// failure: failures are not a fast path, and tests can switch it).
bool DebugEnabled();

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_FAIL_H_

// The uscm event channels of the opened ports, readable without the library's
// lock: the progress hook (ids.cc PumpAfterProgress) runs after every step of
// every port's progress thread, and most steps queue no event for the program
// (a retransmission, an RTU sent, a timer re-armed). It checks these channels'
// lock-free counts and takes the library's lock only when one has an event.
#ifndef USCM_API_LIBRDMACM_OPEN_CHANNELS_H_
#define USCM_API_LIBRDMACM_OPEN_CHANNELS_H_

#include <cstdint>

#include "api/c/uscm_cma.h"

namespace uscm::librdmacm {

// A port's channel, once it is opened (under the library's lock); past
// kMaxOpenChannels every check answers "maybe".
void AddOpenChannel(uscm_event_channel* channel);
// A removed device's port's channel, before it is destroyed (under the
// library's lock): once this returns no check reads it. It waits for the
// checks under way (each a few loads), not for a lock.
void RemoveOpenChannel(uscm_event_channel* channel);
// True when an added channel may hold an event. Lock-free.
bool AnyOpenChannelQueued();
// In a child of fork(): the checks the parent's threads had under way are
// not the child's (RemoveOpenChannel would wait for them for ever).
void ForgetOpenChannelReadersInChild();
// Tests: forget the added channels (no port may step any more).
void ClearOpenChannelsForTesting();

inline constexpr int kMaxOpenChannels = 64;

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_OPEN_CHANNELS_H_

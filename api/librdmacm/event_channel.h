// The drop-in's rdma_event_channel: `fd` is an eventfd that holds 1 exactly
// while events are queued, not yet retrieved (written when the queue goes
// empty -> non-empty, outside the channel's lock, and read when it drains:
// two syscalls per burst of events, not two per event), so the fd is readable
// exactly while events are queued;
// rdma_get_cm_event takes the oldest event, and with none queued waits in a
// read of the fd (blocking unless the program set O_NONBLOCK, then -1/EAGAIN),
// as SCHED_BATCH so that the write ending the wait does not preempt the
// writer on a busy CPU (batch_wait.h).
//
// rdma_create_event_channel fails as librdmacm's does when the machine has no
// RDMA device (-1/ENODEV; programs such as rping then print "No RDMA devices
// were detected"). NewEventChannel is the same channel without that check;
// QueueEvent is how the CM side hands an event to a program's channel. With
// the two, tests exercise the fd with no device.
#ifndef USCM_API_LIBRDMACM_EVENT_CHANNEL_H_
#define USCM_API_LIBRDMACM_EVENT_CHANNEL_H_

#include <rdma/rdma_cma.h>
#include <stddef.h>
#include <stdint.h>

namespace uscm::librdmacm {

// Most private data an event carries (REQ after the CMA header: 56; REP: 196;
// REJ: 148; SIDR: 216 for AF_IB).
inline constexpr size_t kMaxEventPrivateData = 256;

// A channel as rdma_create_event_channel makes it, whether or not there is
// an RDMA device; NULL with errno (ENOMEM, or eventfd's error).
rdma_event_channel* NewEventChannel();

// Copies `event` onto `channel`'s queue, with a copy of `private_data_len`
// bytes of private data as param.conn.private_data / private_data_len (the
// same bytes as param.ud's: both structs start with these two fields); 0
// bytes leaves the event's own fields as given. 0, or -1 with errno: EINVAL
// (NULL channel, more than kMaxEventPrivateData bytes), ENOMEM, or what
// writing the eventfd failed with.
int QueueEvent(rdma_event_channel* channel, const rdma_cm_event& event, const void* private_data,
               size_t private_data_len);

// As QueueEvent; rdma_ack_cm_event (or destroying the channel while the
// event is still queued) then calls on_ack(arg) once: the id layer counts an
// id's unacked events with it (rdma_destroy_id waits for them).
int QueueEventWithAck(rdma_event_channel* channel, const rdma_cm_event& event,
                      const void* private_data, size_t private_data_len, void (*on_ack)(void*),
                      void* arg);

// The `arg` an event of this library's channels was queued with
// (QueueEventWithAck; NULL for QueueEvent's).
const void* AckArgOf(const rdma_cm_event& event);

// Whether `channel` was made by the parent process, before a fork() of which
// this process is the child (fork_locks.h ForkGeneration): its
// rdma_get_cm_event, an rdma_create_id or rdma_migrate_id onto it fail with
// EACCES (kParentsChannel), as the kernel's ucma_write refuses the parent's
// fd in a child, and nothing reads or writes its eventfd, which the parent's
// copy shares. rdma_destroy_event_channel closes the child's copy only.
bool ChannelOfParent(rdma_event_channel* channel);
inline constexpr char kParentsChannel[] =
    "an event channel of the parent process, made before fork(): a child makes its own (the "
    "kernel refuses a child's use of the parent's rdma_cm fd)";

// Events queued and not yet retrieved; -1 for a NULL channel.
int QueuedEvents(rdma_event_channel* channel);

// Queued events `match` accepts, on `channel`.
using EventMatch = bool (*)(const rdma_cm_event& event, const void* arg);
int CountEvents(rdma_event_channel* channel, EventMatch match, const void* arg);

// Moves the queued events `match` accepts from `from` to the end of `to`, in
// their order (rdma_migrate_id); the number moved.
int MoveEvents(rdma_event_channel* from, rdma_event_channel* to, EventMatch match, const void* arg);

// Frees the queued events `match` accepts (each one's on_ack runs): what the
// kernel does with an id's undelivered events when the id is destroyed
// (rdma_destroy_id waits only for events the program retrieved). The number
// dropped.
int DropEvents(rdma_event_channel* channel, EventMatch match, const void* arg);

// The eventfd reads and writes the library made on `channel` so far (for the
// benches: two per burst of events, one more per get that found none).
uint64_t ChannelFdSyscalls(rdma_event_channel* channel);

// Tests: rdma_get_cm_event, finding nothing queued, calls fn(arg, false)
// before its wait in a read of the fd and fn(arg, true) when the read
// returns, both outside the channel's lock (NULL: nothing).
void SetWaitHookForTesting(void (*fn)(void* arg, bool woke), void* arg);

// Tests: QueueEvent(WithAck), having written the fd's 1 for an empty queue,
// calls fn(arg) before it takes the channel's lock again (NULL: nothing).
void SetAfterWakeHookForTesting(void (*fn)(void* arg), void* arg);

// What rdma_destroy_event_channel runs first, with the channel still whole:
// the id layer destroys the ids left on it (ids.cc CloseIdsOfChannel), as
// the kernel's close of the ucma fd does. NULL: nothing.
void SetChannelCloseHook(void (*hook)(rdma_event_channel* channel));

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_EVENT_CHANNEL_H_

// A program's thread blocked in rdma_get_cm_event waits as SCHED_BATCH, and
// is SCHED_OTHER again before the call returns.
//
// Why: cmtime's resolve steps queue one event per call from the main thread
// onto the channel an event thread is blocked on. Each time that thread had
// drained the queue and gone back to its read, the next event's eventfd
// write woke it, and on one CPU the woken thread preempted the caller at once
// (the scheduler's wakeup preemption: CFS on the VM's 6.1 kernel, EEVDF on
// newer ones): two context switches and two syscalls for a handful of
// events, where the same work in one thread took none (docs/API.md "Why
// the event thread kept waking: the batch wait"). A SCHED_BATCH task does
// not preempt the running one when it wakes (sched(7); kernel/sched/fair.c,
// check_preempt_wakeup: "Batch and idle tasks do not preempt non-idle
// tasks"): it runs when the caller blocks or yields, or at the next tick,
// and then finds the queue full. With more than one CPU it runs at once on
// another. SCHED_BATCH keeps the thread's nice value; no privilege is
// needed to move between SCHED_OTHER and SCHED_BATCH.
//
// Only a thread that is SCHED_OTHER is changed (a real-time, idle or batch
// thread of the program keeps its policy), and only around the blocking
// read: the program never sees the policy outside the call. A policy the
// program sets on the thread during the wait stays. USCM_BATCH_WAIT=0 in
// the environment turns it off (the kernel's librdmacm behaviour: a woken
// reader may preempt the thread that queued its event).
#ifndef USCM_API_LIBRDMACM_BATCH_WAIT_H_
#define USCM_API_LIBRDMACM_BATCH_WAIT_H_

#include <stdint.h>

namespace uscm::librdmacm {

// One rdma_get_cm_event call's waits: Enter() before each blocking read
// (the first one that finds the thread SCHED_OTHER makes it SCHED_BATCH);
// the destructor puts SCHED_OTHER back if Enter changed it.
class BatchWhileWaiting {
 public:
  BatchWhileWaiting() = default;
  BatchWhileWaiting(const BatchWhileWaiting&) = delete;
  BatchWhileWaiting& operator=(const BatchWhileWaiting&) = delete;
  ~BatchWhileWaiting();

  void Enter();

 private:
  bool checked_ = false;  // the thread's policy was read (once a call)
  bool changed_ = false;  // Enter made it SCHED_BATCH
};

// Waits that Enter turned into SCHED_BATCH so far (benches, tests).
uint64_t BatchWaits();

// Tests, benches: false leaves every thread's policy alone (the wait as
// before). On by default.
void SetBatchWaitsForTesting(bool on);

}  // namespace uscm::librdmacm

#endif  // USCM_API_LIBRDMACM_BATCH_WAIT_H_

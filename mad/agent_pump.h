// The I/O glue around a sans-IO Agent: moves received MADs from a Transport
// into the agent, runs its timers, and sends what it queued. Used by the
// epoll runtime and by simulation actors alike.
#ifndef USCM_MAD_AGENT_PUMP_H_
#define USCM_MAD_AGENT_PUMP_H_

#include "absl/status/status.h"
#include "mad/agent.h"
#include "mad/transport.h"

namespace uscm::mad {

// Drains `transport` into `agent`, fires due timers, then sends every queued
// MAD. Returns the first send error (the remaining MADs are still sent).
absl::Status Pump(TimePoint now, Transport& transport, Agent& agent);

// Sends everything the agent queued.
absl::Status FlushTransmit(Transport& transport, Agent& agent);

// An agent configured for `transport`: RMPP reassembly only when the kernel
// does not coalesce.
AgentConfig ConfigFor(const Transport& transport, AgentConfig base = {});

}  // namespace uscm::mad

#endif  // USCM_MAD_AGENT_PUMP_H_

#include "mad/agent_pump.h"

namespace uscm::mad {

absl::Status FlushTransmit(Transport& transport, Agent& agent) {
  absl::Status first;
  while (auto out = agent.PollTransmit()) {
    absl::Status s = transport.Send(out->to, out->data);
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::Status Pump(TimePoint now, Transport& transport, Agent& agent) {
  transport.Drain([&](const ReceivedMad& mad) { agent.OnReceive(now, mad); });
  agent.OnTimeout(now);
  return FlushTransmit(transport, agent);
}

AgentConfig ConfigFor(const Transport& transport, AgentConfig base) {
  base.rmpp_reassembly = !transport.caps().kernel_rmpp;
  return base;
}

}  // namespace uscm::mad

#include "sa/multicast.h"

#include "absl/strings/str_format.h"
#include "mad/wire/class_port_info.h"

namespace uscm::sa {

using mad::wire::JoinState;

McManager::McManager(mad::Agent* agent, SaClientConfig config)
    : client_(agent, std::move(config)) {}

void McManager::Fail(uint64_t ticket, absl::Status status) {
  McEvent e;
  e.ticket = ticket;
  e.status = std::move(status);
  events_.push_back(std::move(e));
  tickets_.erase(ticket);
}

absl::StatusOr<uint64_t> McManager::Join(TimePoint now, const McJoin& join) {
  if (join.join_state.bits() == 0 || join.join_state.bits() > 0xF) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "JoinState 0x%x: give one or more of FullMember (1), NonMember (2), "
        "SendOnlyNonMember (4), SendOnlyFullMember (8)",
        join.join_state.bits()));
  }
  const uint64_t ticket = next_ticket_++;
  tickets_[ticket] = Ticket{join, absl::nullopt};
  if (join.join_state.send_only_full_member() && !sa_cap2_) {
    waiting_for_cpi_.push_back(ticket);
    if (!cpi_pending_) {
      auto q = client_.GetClassPortInfo(now);
      if (!q.ok()) {
        tickets_.erase(ticket);
        waiting_for_cpi_.pop_back();
        return q.status();
      }
      ops_[*q] = {Op::kClassPortInfo, 0};
      cpi_pending_ = true;
    }
    return ticket;
  }
  StartJoin(now, ticket);
  return ticket;
}

void McManager::StartJoin(TimePoint now, uint64_t ticket) {
  Ticket& t = tickets_.at(ticket);
  const uint8_t bits = t.join.join_state.bits();
  if ((bits & JoinState::kSendOnlyFullMember) && sa_cap2_ &&
      (*sa_cap2_ & mad::wire::kSaCap2SendOnlyFullMemberSupported) == 0) {
    return Fail(ticket, absl::FailedPreconditionError(
                            "the SA does not support SendOnlyFullMember joins (ClassPortInfo "
                            "CapabilityMask2 bit 12 is clear)"));
  }
  if (!t.join.mgid.is_zero()) {
    auto it = entries_.find(Key{t.join.mgid, t.join.port_gid});
    if (it != entries_.end() && (it->second.sa_state & bits) == bits) {
      it->second.members[ticket] = bits;
      t.key = it->first;
      ++counters_.local_joins;
      McEvent e;
      e.ticket = ticket;
      e.group = it->second.group;
      e.group.join_state = JoinState(bits);
      e.from_table = true;
      events_.push_back(std::move(e));
      return;
    }
  }
  auto q = client_.Join(now, t.join);
  if (!q.ok()) return Fail(ticket, q.status());
  ops_[*q] = {Op::kJoin, ticket};
  ++counters_.sa_joins;
}

absl::Status McManager::Leave(TimePoint now, uint64_t ticket) {
  auto it = tickets_.find(ticket);
  if (it == tickets_.end()) {
    return absl::NotFoundError(absl::StrFormat("no multicast membership with ticket %d", ticket));
  }
  absl::optional<Key> key = it->second.key;
  tickets_.erase(it);
  if (!key) return absl::OkStatus();  // still joining: the answer will be dropped
  auto e = entries_.find(*key);
  if (e == entries_.end()) return absl::OkStatus();
  Entry& entry = e->second;
  entry.members.erase(ticket);
  uint8_t needed = 0;
  for (const auto& [other, bits] : entry.members) needed |= bits;
  const uint8_t drop = entry.sa_state & static_cast<uint8_t>(~needed);
  entry.sa_state = needed;
  if (entry.members.empty()) entries_.erase(e);
  McEvent ev;
  ev.ticket = ticket;
  ev.left = true;
  if (drop == 0) {
    ev.from_table = true;
    events_.push_back(std::move(ev));
    return absl::OkStatus();
  }
  auto q = client_.Leave(now, key->first, key->second, JoinState(drop));
  if (!q.ok()) return q.status();
  ops_[*q] = {Op::kLeave, ticket};
  ++counters_.sa_leaves;
  return absl::OkStatus();
}

void McManager::Process(TimePoint now) {
  while (auto r = client_.PollResult()) {
    auto op = ops_.find(r->id);
    if (op == ops_.end()) continue;
    const auto [kind, ticket] = op->second;
    ops_.erase(op);
    switch (kind) {
      case Op::kClassPortInfo: {
        cpi_pending_ = false;
        std::vector<uint64_t> waiting = std::move(waiting_for_cpi_);
        waiting_for_cpi_.clear();
        if (!r->status.ok()) {
          for (uint64_t t : waiting) {
            if (tickets_.contains(t)) {
              Fail(t, absl::Status(r->status.code(),
                                   absl::StrFormat("cannot check SendOnlyFullMember support: %s",
                                                   r->status.message())));
            }
          }
          break;
        }
        sa_cap2_ = r->class_port_info->capability_mask2;
        for (uint64_t t : waiting) {
          if (tickets_.contains(t)) StartJoin(now, t);
        }
        break;
      }
      case Op::kJoin: {
        auto t = tickets_.find(ticket);
        if (t == tickets_.end()) {
          // Left while joining: undo the SA membership if nobody else holds it.
          if (r->status.ok() && r->group) {
            Key key{r->group->mgid, r->members[0].port_gid};
            auto e = entries_.find(key);
            if (e == entries_.end()) {
              auto q = client_.Leave(now, key.first, key.second, r->members[0].join_state);
              if (q.ok()) ops_[*q] = {Op::kLeave, 0};
            }
          }
          break;
        }
        if (!r->status.ok()) {
          Fail(ticket, r->status);
          break;
        }
        const uint8_t bits = t->second.join.join_state.bits();
        Key key{r->group->mgid, t->second.join.port_gid};
        Entry& entry = entries_[key];
        entry.sa_state |= bits;
        entry.group = *r->group;
        entry.members[ticket] = bits;
        t->second.key = key;
        McEvent e;
        e.ticket = ticket;
        e.group = *r->group;
        events_.push_back(std::move(e));
        break;
      }
      case Op::kLeave: {
        if (!r->status.ok()) ++counters_.leave_errors;
        if (ticket == 0) break;
        McEvent e;
        e.ticket = ticket;
        e.left = true;
        e.status = r->status;
        events_.push_back(std::move(e));
        break;
      }
    }
  }
}

absl::optional<McEvent> McManager::PollEvent() {
  if (events_.empty()) return absl::nullopt;
  McEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

size_t McManager::members(const Gid& mgid, const Gid& port_gid) const {
  auto it = entries_.find(Key{mgid, port_gid});
  return it == entries_.end() ? 0 : it->second.members.size();
}

uint8_t McManager::sa_state(const Gid& mgid, const Gid& port_gid) const {
  auto it = entries_.find(Key{mgid, port_gid});
  return it == entries_.end() ? 0 : it->second.sa_state;
}

}  // namespace uscm::sa

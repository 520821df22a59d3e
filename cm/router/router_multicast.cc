// MCMemberRecord joins of the router's clients merged into one membership
// per group, the way the kernel's ib_sa multicast module serves the
// processes of a host (one SA membership per port, reference counted).
//
// The SA keeps one JoinState per (MGID, PortGID) (IBA 15.2.5.17: a Set ORs
// the requested bits in, a Delete clears the given bits), and every process
// behind the router has the same PortGID, so without merging the first
// process to leave would take the group away from all the others. Per group
// the router keeps each client's bits and the bits the SA has granted:
//
//   * a join whose bits are already granted is answered here with the SA's
//     last answer (TID and JoinState the client's); one whose bits are still
//     being asked for waits for that answer; only new bits go to the SA;
//   * a leave is answered here while other clients still hold the bits; the
//     SA sees a Delete only for bits no client holds any more;
//   * a client that goes away leaves the same way (the router sends the
//     Delete), and so does a join answered after its client went away.
//
// MAD offsets: IBA 13.4.2 (common header), 15.2.1.1 (SA header: component
// mask at 48, data from 56); MCMemberRecord (15.2.5.17): MGID at data byte 0,
// JoinState in the low nibble of data byte 48.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "cm/router/router.h"

namespace uscm::router {

namespace {

constexpr uint8_t kSaClass = 0x03;
constexpr uint8_t kSet = 0x02, kDelete = 0x15, kGetResp = 0x81, kDeleteResp = 0x95;
constexpr uint16_t kAttrMcMemberRecord = 0x0038;
constexpr size_t kMgidAt = 56;
constexpr size_t kJoinStateAt = 56 + 48;
// ComponentMask of a leave the router sends: MGID, PortGID, JoinState.
constexpr uint64_t kLeaveMask = (uint64_t{1} << 0) | (uint64_t{1} << 1) | (uint64_t{1} << 16);

Router::Mgid MgidOf(std::span<const uint8_t> mad) {
  Router::Mgid g;
  std::copy_n(mad.begin() + kMgidAt, g.size(), g.begin());
  return g;
}

bool IsZero(const Router::Mgid& g) {
  return std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == 0; });
}

uint8_t JoinBits(std::span<const uint8_t> mad) { return mad[kJoinStateAt] & 0x0F; }

void SetJoinBits(std::span<uint8_t> mad, uint8_t bits) {
  mad[kJoinStateAt] = static_cast<uint8_t>((mad[kJoinStateAt] & 0xF0) | (bits & 0x0F));
}

void SetTid(std::span<uint8_t> mad, uint64_t tid) {
  for (int i = 0; i < 8; ++i) mad[8 + i] = static_cast<uint8_t>(tid >> (56 - 8 * i));
}

uint16_t Status(std::span<const uint8_t> mad) {
  return static_cast<uint16_t>(mad[4] << 8 | mad[5]);
}

std::string MgidText(const Router::Mgid& g) {
  std::string s;
  for (size_t i = 0; i < g.size(); i += 2) {
    if (i) s += ':';
    absl::StrAppend(&s, absl::Hex(g[i] << 8 | g[i + 1], absl::kZeroPad4));
  }
  return s;
}

}  // namespace

bool Router::IsMcMemberChange(std::span<const uint8_t> mad) {
  return mad.size() > kJoinStateAt && mad[1] == kSaClass &&
         (mad[16] << 8 | mad[17]) == kAttrMcMemberRecord && (mad[3] == kSet || mad[3] == kDelete);
}

uint8_t Router::McGroup::held() const {
  uint8_t bits = 0;
  for (const auto& [slot, b] : members) bits |= b;
  return bits;
}

Router::McVerdict Router::HandleClientMcMember(uint8_t slot, uint64_t client_tid,
                                               uint32_t router_tid, const MadFrame& m,
                                               std::span<uint8_t> out) {
  const Mgid mgid = MgidOf(m.mad);
  const uint8_t bits = JoinBits(m.mad);
  if (m.mad[3] == kSet) {
    if (IsZero(mgid)) {  // the SA picks the MGID: known once it answers
      mc_txns_[router_tid] = McTxn{mgid, slot, bits, true, m.address};
      return McVerdict::kForward;
    }
    McGroup& g = mc_groups_[mgid];
    if (g.in_flight_tid == router_tid) return McVerdict::kForward;  // a retry of it
    if (g.in_flight_tid == 0 && !g.answer.empty() && (bits & ~g.granted) == 0) {
      g.members[slot] |= bits;
      AnswerJoin(g, slot, client_tid, bits);
      ++counters_.mc_joins_merged;
      return McVerdict::kHandled;
    }
    if (g.in_flight_tid != 0 && (bits & ~(g.granted | g.in_flight_bits)) == 0) {
      const bool known = std::any_of(g.waiters.begin(), g.waiters.end(), [&](const McWaiter& w) {
        return w.slot == slot && w.client_tid == client_tid;
      });
      if (!known) g.waiters.push_back(McWaiter{slot, client_tid, bits});
      return McVerdict::kHandled;
    }
    if (g.in_flight_tid == 0) {
      g.in_flight_tid = router_tid;
      g.in_flight_bits = bits;
    }
    mc_txns_[router_tid] = McTxn{mgid, slot, bits, true, m.address};
    return McVerdict::kForward;
  }

  // Delete.
  auto it = mc_groups_.find(mgid);
  if (it == mc_groups_.end()) return McVerdict::kForward;  // not joined through us
  McGroup& g = it->second;
  auto mine = g.members.find(slot);
  if (mine == g.members.end()) {
    Refuse(slot, absl::PermissionDeniedError(absl::StrCat(
                     "router: MCMember leave for MGID ", MgidText(mgid),
                     " which this client has not joined; other processes on this port are "
                     "members, and a Delete would end their membership too")));
    return McVerdict::kHandled;
  }
  mine->second &= static_cast<uint8_t>(~bits);
  if (mine->second == 0) g.members.erase(mine);
  const uint8_t leftover = g.in_flight_tid != 0 ? 0 : g.granted & ~g.held();
  if (leftover == 0) {  // others still hold these bits (or a join will settle it)
    std::vector<uint8_t> answer(m.mad.begin(), m.mad.end());
    answer[3] = kDeleteResp;
    answer[4] = answer[5] = 0;
    SetTid(answer, client_tid);
    ToClient(slot, g.answer_from, answer);
    ++counters_.mc_leaves_merged;
    return McVerdict::kHandled;
  }
  SetJoinBits(out, leftover);
  g.granted &= static_cast<uint8_t>(~leftover);
  mc_txns_[router_tid] = McTxn{mgid, slot, leftover, false, m.address};
  if (g.members.empty() && g.waiters.empty()) mc_groups_.erase(it);
  return McVerdict::kForward;
}

void Router::AnswerJoin(const McGroup& g, uint8_t slot, uint64_t client_tid, uint8_t bits) {
  std::vector<uint8_t> answer = g.answer;
  SetTid(answer, client_tid);
  SetJoinBits(answer, bits);
  ToClient(slot, g.answer_from, answer);
}

void Router::RouteWireMcMember(const mad::ReceivedMad& m, uint32_t router_tid) {
  auto t = mc_txns_.find(router_tid);
  if (t == mc_txns_.end()) return;
  const McTxn txn = t->second;
  mc_txns_.erase(t);
  if (!txn.join || m.data.size() <= kJoinStateAt || m.data[3] != kGetResp) return;
  const bool ok = Status(m.data) == 0;
  Mgid mgid = txn.mgid;
  if (IsZero(mgid)) {
    if (!ok) return;
    mgid = MgidOf(m.data);
  }
  McGroup& g = mc_groups_[mgid];
  if (ok) {
    g.answer.assign(m.data.begin(), m.data.end());
    g.answer_from = m.from;
    g.sa = txn.sa;
    g.granted |= txn.bits;
    if (LiveClient(txn.slot) != nullptr) g.members[txn.slot] |= txn.bits;
  }
  if (g.in_flight_tid == router_tid) {
    g.in_flight_tid = 0;
    g.in_flight_bits = 0;
    std::vector<McWaiter> waiters;
    waiters.swap(g.waiters);
    for (const McWaiter& w : waiters) {
      if (LiveClient(w.slot) == nullptr) continue;
      if (ok && (w.bits & ~g.granted) == 0) {
        g.members[w.slot] |= w.bits;
        AnswerJoin(g, w.slot, w.client_tid, w.bits);
        ++counters_.mc_joins_merged;
      } else {  // the SA refused the join they waited for: the same answer
        std::vector<uint8_t> answer(m.data.begin(), m.data.end());
        SetTid(answer, w.client_tid);
        ToClient(w.slot, m.from, answer);
      }
    }
  }
  Settle(mgid);
}

void Router::LeaveGroupsOf(uint8_t slot) {
  std::vector<Mgid> touched;
  for (auto& [mgid, g] : mc_groups_) {
    const bool member = g.members.erase(slot) > 0;
    const size_t before = g.waiters.size();
    std::erase_if(g.waiters, [slot](const McWaiter& w) { return w.slot == slot; });
    if (member || g.waiters.size() != before) touched.push_back(mgid);
  }
  for (const Mgid& mgid : touched) Settle(mgid);
}

void Router::Settle(const Mgid& mgid) {
  auto it = mc_groups_.find(mgid);
  if (it == mc_groups_.end()) return;
  McGroup& g = it->second;
  if (g.in_flight_tid != 0) return;  // settled again when its answer comes
  const uint8_t leftover = g.granted & ~g.held();
  if (leftover != 0 && !g.answer.empty()) {
    std::vector<uint8_t> leave = g.answer;
    leave[3] = kDelete;
    leave[4] = leave[5] = 0;
    uint32_t tid;
    do {
      tid = next_tid_++;
    } while (tid == 0 || tid_by_router_.contains(tid) || own_tids_.contains(tid));
    own_tids_.insert(tid);
    SetTid(leave, tid);
    for (int i = 0; i < 8; ++i) leave[48 + i] = static_cast<uint8_t>(kLeaveMask >> (56 - 8 * i));
    SetJoinBits(leave, leftover);
    ToWire(g.sa, leave);
    ++counters_.mc_leaves_for_gone;
    g.granted &= static_cast<uint8_t>(~leftover);
  }
  if (g.members.empty() && g.waiters.empty()) mc_groups_.erase(it);
}

bool Router::IsOwnTransaction(uint32_t router_tid) {
  return own_tids_.erase(router_tid) > 0;
}

size_t Router::mc_members(const Mgid& mgid) const {
  auto it = mc_groups_.find(mgid);
  return it == mc_groups_.end() ? 0 : it->second.members.size();
}

}  // namespace uscm::router

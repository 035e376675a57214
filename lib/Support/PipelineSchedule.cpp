//===- PipelineSchedule.cpp - pipeline schedules as data ------------------===//
#include "mp/Support/PipelineSchedule.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace mp::pipeline {

std::optional<ScheduleKind> parseSchedule(std::string_view name) {
  if (name == "gpipe")
    return ScheduleKind::GPipe;
  if (name == "1f1b")
    return ScheduleKind::OneFOneB;
  if (name == "interleaved")
    return ScheduleKind::Interleaved;
  return std::nullopt;
}

const char *scheduleName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe: return "gpipe";
  case ScheduleKind::OneFOneB: return "1f1b";
  case ScheduleKind::Interleaved: return "interleaved";
  }
  return "?";
}

const char *actionName(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward: return "forward";
  case ActionKind::Backward: return "backward";
  case ActionKind::SendActivation: return "send activation";
  case ActionKind::RecvActivation: return "receive activation";
  case ActionKind::SendGradient: return "send gradient";
  case ActionKind::RecvGradient: return "receive gradient";
  }
  return "?";
}

std::string Dims::text() const {
  return "pp=" + std::to_string(stages) + " vp=" + std::to_string(chunks) +
         ", " + std::to_string(microbatches) +
         (microbatches == 1 ? " microbatch" : " microbatches");
}

std::string checkDims(ScheduleKind kind, const Dims &d) {
  const std::string sizes =
      " (pp=" + std::to_string(d.stages) + " vp=" + std::to_string(d.chunks) +
      " microbatches=" + std::to_string(d.microbatches) + ")";
  if (d.stages < 1 || d.chunks < 1 || d.microbatches < 1)
    return "pipeline sizes must be at least 1" + sizes;
  if (d.stages > kMaxStages || d.chunks > kMaxChunks ||
      d.microbatches > kMaxMicrobatches ||
      d.stages * d.chunks * d.microbatches > kMaxActions)
    return "pipeline sizes too large" + sizes + ": at most " +
           std::to_string(kMaxStages) + " stages, " +
           std::to_string(kMaxChunks) + " chunks, " +
           std::to_string(kMaxMicrobatches) + " microbatches and " +
           std::to_string(kMaxActions) + " chunk-microbatches in all";
  if (kind != ScheduleKind::Interleaved && d.chunks != 1)
    return std::string("the ") + scheduleName(kind) +
           " schedule runs one chunk per stage; vp > 1 needs "
           "schedule=interleaved" +
           sizes;
  if (kind == ScheduleKind::Interleaved) {
    if (d.chunks < 2 || d.stages < 2)
      return "the interleaved schedule needs vp >= 2 and pp >= 2" + sizes;
    if (d.microbatches % d.stages != 0)
      return "the interleaved schedule needs a microbatch count that is a "
             "multiple of pp, as Megatron's does" +
             sizes;
  }
  return {};
}

namespace {

/// The transfers a stage's forward or backward needs, around it: before
/// (receives) and after (sends).
std::vector<std::pair<Action, bool>> neededTransfers(const Dims &d, int64_t r,
                                                     const Action &a) {
  std::vector<std::pair<Action, bool>> needed; // (transfer, before)
  int64_t s = d.virtualStage(r, a.chunk);
  int64_t prev = (r + d.stages - 1) % d.stages, next = (r + 1) % d.stages;
  bool first = s == 0, last = s + 1 == d.virtualStages();
  if (a.kind == ActionKind::Forward) {
    if (!first)
      needed.push_back(
          {{ActionKind::RecvActivation, a.chunk, a.microbatch, prev}, true});
    if (!last)
      needed.push_back(
          {{ActionKind::SendActivation, a.chunk, a.microbatch, next}, false});
  } else {
    if (!last)
      needed.push_back(
          {{ActionKind::RecvGradient, a.chunk, a.microbatch, next}, true});
    if (!first)
      needed.push_back(
          {{ActionKind::SendGradient, a.chunk, a.microbatch, prev}, false});
  }
  return needed;
}

/// Appends the actions of rank `r` running chunk `c` forward or backward on
/// microbatch `mb`, with the transfers around it (the rule validate checks).
struct Emitter {
  const Dims &d;
  int64_t r;
  std::vector<Action> &out;

  void step(ActionKind kind, int64_t c, int64_t mb) {
    const Action compute{kind, c, mb};
    const auto transfers = neededTransfers(d, r, compute);
    for (const auto &[t, before] : transfers)
      if (before)
        out.push_back(t);
    out.push_back(compute);
    for (const auto &[t, before] : transfers)
      if (!before)
        out.push_back(t);
  }
  void forward(int64_t c, int64_t mb) { step(ActionKind::Forward, c, mb); }
  void backward(int64_t c, int64_t mb) { step(ActionKind::Backward, c, mb); }
};

/// Interleaving's k-th chunk-microbatch of a rank: forward chunk, backward
/// chunk and microbatch (Megatron's order: p microbatches of chunk 0, then
/// the same p of chunk 1, ..., then the next p microbatches).
struct VirtualMicrobatch {
  int64_t forwardChunk, backwardChunk, microbatch;
};
VirtualMicrobatch virtualMicrobatch(const Dims &d, int64_t k) {
  int64_t group = k / d.stages;
  int64_t chunk = group % d.chunks;
  int64_t mb = (k / d.virtualStages()) * d.stages + k % d.stages;
  return {chunk, d.chunks - 1 - chunk, mb};
}

} // namespace

Schedule generate(ScheduleKind kind, const Dims &d) {
  Schedule schedule(d.stages);
  for (int64_t r = 0; r < d.stages; ++r) {
    Emitter emit{d, r, schedule[r]};
    const int64_t m = d.microbatches;
    if (kind == ScheduleKind::GPipe) {
      for (int64_t i = 0; i < m; ++i)
        emit.forward(0, i);
      for (int64_t i = 0; i < m; ++i)
        emit.backward(0, i);
      continue;
    }
    // 1F1B is the interleaved schedule with one chunk.
    const int64_t total = m * d.chunks;
    int64_t warmup = kind == ScheduleKind::OneFOneB
                         ? d.stages - r - 1
                         : 2 * (d.stages - r - 1) + (d.chunks - 1) * d.stages;
    if (kind == ScheduleKind::Interleaved && m == d.stages)
      warmup = total;
    warmup = std::min(warmup, total);
    for (int64_t k = 0; k < warmup; ++k) {
      VirtualMicrobatch f = virtualMicrobatch(d, k);
      emit.forward(f.forwardChunk, f.microbatch);
    }
    for (int64_t k = 0; k + warmup < total; ++k) {
      VirtualMicrobatch f = virtualMicrobatch(d, k + warmup);
      emit.forward(f.forwardChunk, f.microbatch);
      VirtualMicrobatch b = virtualMicrobatch(d, k);
      emit.backward(b.backwardChunk, b.microbatch);
    }
    for (int64_t k = std::max<int64_t>(total - warmup, 0); k < total; ++k) {
      VirtualMicrobatch b = virtualMicrobatch(d, k);
      emit.backward(b.backwardChunk, b.microbatch);
    }
  }
  return schedule;
}

Costs Costs::uniform(const Dims &d, double transfer) {
  Costs c;
  c.forward.assign(d.virtualStages(), 1.0 / d.chunks);
  c.backward.assign(d.virtualStages(), 2.0 / d.chunks);
  c.transfer = transfer;
  return c;
}

namespace {

/// What a transfer carries: activation or gradient, the virtual stage that
/// receives it, and the microbatch.
using TransferKey = std::tuple<bool, int64_t, int64_t>;

TransferKey keyOf(const Dims &d, int64_t rank, const Action &a) {
  int64_t s = d.virtualStage(rank, a.chunk);
  switch (a.kind) {
  case ActionKind::SendActivation: return {true, s + 1, a.microbatch};
  case ActionKind::RecvActivation: return {true, s, a.microbatch};
  case ActionKind::SendGradient: return {false, s - 1, a.microbatch};
  default: return {false, s, a.microbatch};
  }
}

bool isSend(ActionKind k) {
  return k == ActionKind::SendActivation || k == ActionKind::SendGradient;
}

std::string describeAction(int64_t rank, const Action &a) {
  return "rank " + std::to_string(rank) + "'s " + actionName(a.kind) +
         " of chunk " + std::to_string(a.chunk) + ", microbatch " +
         std::to_string(a.microbatch) +
         (a.peer >= 0 ? (isSend(a.kind) ? " to rank " : " from rank ") +
                            std::to_string(a.peer)
                      : "");
}

} // namespace

std::optional<Timeline> simulate(const Schedule &schedule, const Dims &d,
                                 const Costs &costs, std::string &error) {
  const size_t ranks = schedule.size();
  Timeline timeline;
  timeline.ranks.resize(ranks);
  std::vector<size_t> next(ranks, 0);
  std::vector<double> now(ranks, 0), busy(ranks, 0);
  std::map<TransferKey, double> arrivals;
  for (bool progress = true; progress;) {
    progress = false;
    for (size_t r = 0; r < ranks; ++r) {
      for (; next[r] < schedule[r].size(); ++next[r]) {
        const Action &a = schedule[r][next[r]];
        double start = now[r];
        int64_t s = d.virtualStage(static_cast<int64_t>(r), a.chunk);
        if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward) {
          double cost = a.kind == ActionKind::Forward ? costs.forward.at(s)
                                                      : costs.backward.at(s);
          now[r] += cost;
          busy[r] += cost;
        } else if (isSend(a.kind)) {
          arrivals[keyOf(d, static_cast<int64_t>(r), a)] =
              now[r] + costs.transfer;
        } else {
          auto arrived = arrivals.find(keyOf(d, static_cast<int64_t>(r), a));
          if (arrived == arrivals.end())
            break; // waits
          now[r] = std::max(now[r], arrived->second);
        }
        timeline.ranks[r].push_back({a, start, now[r]});
        progress = true;
      }
    }
  }
  std::string waits;
  for (size_t r = 0; r < ranks; ++r)
    if (next[r] < schedule[r].size())
      waits += (waits.empty() ? "" : "; ") +
               describeAction(static_cast<int64_t>(r), schedule[r][next[r]]) +
               " never arrives";
  if (!waits.empty()) {
    error = "the schedule deadlocks: " + waits;
    return std::nullopt;
  }
  timeline.makespan = ranks ? *std::max_element(now.begin(), now.end()) : 0;
  double compute = 0;
  for (double b : busy)
    compute += b;
  timeline.bubble =
      compute > 0
          ? (static_cast<double>(ranks) * timeline.makespan - compute) / compute
          : 0;
  return timeline;
}

namespace {

/// Whether each rank receives from each peer in the order the peer sends
/// (transports without tags deliver in order): the first difference, or "".
std::string checkOrder(const Schedule &schedule, const Dims &d) {
  const int64_t p = static_cast<int64_t>(schedule.size());
  // sent[a][b], received[b][a]: the transfers from a to b, in order.
  std::vector<std::vector<std::vector<std::pair<TransferKey, Action>>>> sent(
      p, std::vector<std::vector<std::pair<TransferKey, Action>>>(p)),
      received = sent;
  for (int64_t r = 0; r < p; ++r)
    for (const Action &a : schedule[r]) {
      if (a.peer < 0 || a.peer >= p)
        continue;
      if (isSend(a.kind))
        sent[r][a.peer].push_back({keyOf(d, r, a), a});
      else if (a.kind != ActionKind::Forward && a.kind != ActionKind::Backward)
        received[r][a.peer].push_back({keyOf(d, r, a), a});
    }
  for (int64_t a = 0; a < p; ++a)
    for (int64_t b = 0; b < p; ++b) {
      const auto &s = sent[a][b], &q = received[b][a];
      for (size_t i = 0; i < std::min(s.size(), q.size()); ++i)
        if (s[i].first != q[i].first)
          return "rank " + std::to_string(b) + " receives from rank " +
                 std::to_string(a) + " in another order than it sends (" +
                 describeAction(a, s[i].second) + " is its " +
                 std::to_string(i + 1) + "th send there, " +
                 describeAction(b, q[i].second) + " its " +
                 std::to_string(i + 1) +
                 "th receive): transports without tags deliver in order";
    }
  return {};
}

} // namespace

std::string validate(const Schedule &schedule, const Dims &d) {
  if (static_cast<int64_t>(schedule.size()) != d.stages)
    return "the schedule has " + std::to_string(schedule.size()) +
           " ranks for " + std::to_string(d.stages) + " stages";
  for (int64_t r = 0; r < d.stages; ++r) {
    const std::vector<Action> &list = schedule[r];
    // Where each action is on this rank (each at most once).
    std::map<std::tuple<ActionKind, int64_t, int64_t>, size_t> position;
    for (size_t i = 0; i < list.size(); ++i) {
      const Action &a = list[i];
      if (a.chunk < 0 || a.chunk >= d.chunks || a.microbatch < 0 ||
          a.microbatch >= d.microbatches)
        return describeAction(r, a) + " is out of range";
      if (!position.insert({{a.kind, a.chunk, a.microbatch}, i}).second)
        return describeAction(r, a) + " appears twice";
    }
    size_t transfers = 0;
    for (int64_t c = 0; c < d.chunks; ++c)
      for (int64_t mb = 0; mb < d.microbatches; ++mb) {
        auto f = position.find({ActionKind::Forward, c, mb});
        auto b = position.find({ActionKind::Backward, c, mb});
        Action fa{ActionKind::Forward, c, mb}, ba{ActionKind::Backward, c, mb};
        if (f == position.end())
          return describeAction(r, fa) + " is missing";
        if (b == position.end())
          return describeAction(r, ba) + " is missing";
        if (b->second < f->second)
          return describeAction(r, ba) + " comes before its forward";
        for (const auto &[compute, at] :
             {std::make_pair(fa, f->second), std::make_pair(ba, b->second)})
          for (const auto &[t, before] : neededTransfers(d, r, compute)) {
            auto p = position.find({t.kind, t.chunk, t.microbatch});
            if (p == position.end())
              return describeAction(r, t) + " is missing";
            if (list[p->second].peer != t.peer)
              return describeAction(r, list[p->second]) +
                     " names the wrong rank (its neighbour is rank " +
                     std::to_string(t.peer) + ")";
            if (before != (p->second < at))
              return describeAction(r, t) + " comes " +
                     (before ? "after" : "before") + " the " +
                     actionName(compute.kind) + " it serves";
            ++transfers;
          }
      }
    if (transfers + 2 * d.chunks * d.microbatches != list.size())
      for (const Action &a : list)
        if (a.kind != ActionKind::Forward && a.kind != ActionKind::Backward) {
          bool gradient = a.kind == ActionKind::SendGradient ||
                          a.kind == ActionKind::RecvGradient;
          Action compute{gradient ? ActionKind::Backward : ActionKind::Forward,
                         a.chunk, a.microbatch};
          bool needed = false;
          for (const auto &t : neededTransfers(d, r, compute))
            needed |= t.first.kind == a.kind;
          if (!needed)
            return describeAction(r, a) +
                   " has no peer stage (the first stage receives no "
                   "activation, the last no gradient)";
        }
  }
  if (std::string why = checkOrder(schedule, d); !why.empty())
    return why;
  std::string error;
  if (!simulate(schedule, d, Costs::uniform(d), error))
    return error;
  return {};
}

std::string describe(const Schedule &schedule) {
  std::string out;
  for (size_t r = 0; r < schedule.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const Action &a : schedule[r]) {
      static const char *const tokens[] = {"F", "B", "sa", "ra", "sg", "rg"};
      out += " ";
      out += tokens[static_cast<int>(a.kind)];
      out += std::to_string(a.chunk) + "." + std::to_string(a.microbatch);
      if (a.peer >= 0)
        out += (isSend(a.kind) ? ">" : "<") + std::to_string(a.peer);
    }
    out += "\n";
  }
  return out;
}

} // namespace mp::pipeline

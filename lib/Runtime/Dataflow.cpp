//===- Dataflow.cpp - checking a program's use of the arena ---------------===//
#include "Dataflow.h"

#include "mp/Support/OpContract.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>

namespace mp::rt {
namespace {

/// Which buffer last wrote each byte range of the arena.
class ArenaContents {
public:
  /// Buffer `writer` now holds [begin, end).
  void write(int64_t begin, int64_t end, int writer) {
    if (begin == end)
      return;
    auto it = ranges.lower_bound(begin);
    if (it != ranges.begin() && std::prev(it)->second.end > begin)
      --it;
    while (it != ranges.end() && it->first < end) {
      Range r = it->second;
      int64_t start = it->first;
      it = ranges.erase(it);
      if (start < begin)
        ranges[start] = {begin, r.writer};
      if (r.end > end)
        ranges[end] = {r.end, r.writer};
    }
    ranges[begin] = {end, writer};
  }

  /// The buffer whose value [begin, end) holds whole: -1 when nothing was
  /// written there, -2 when the bytes hold parts of several writes.
  int holder(int64_t begin, int64_t end) const {
    auto it = ranges.find(begin);
    if (it != ranges.end() && it->second.end == end)
      return it->second.writer;
    auto first = ranges.upper_bound(begin);
    if (first != ranges.begin() && std::prev(first)->second.end > begin)
      return -2;
    return first != ranges.end() && first->first < end ? -2 : -1;
  }

private:
  struct Range {
    int64_t end;
    int writer;
  };
  std::map<int64_t, Range> ranges; // begin -> (end, writer)
};

} // namespace

Status checkDataflow(const program::Program &prog,
                     const std::vector<int64_t> &bytes) {
  const int n = prog.buffers_size();
  auto isArena = [&](int id) {
    return id >= 0 && id < n &&
           prog.buffers(id).kind() == program::Buffer::ARENA;
  };
  auto begin = [&](int id) { return prog.buffers(id).offset(); };
  auto end = [&](int id) { return prog.buffers(id).offset() + bytes[id]; };
  // The instruction writing each buffer (-1: an input); buffers nothing
  // writes are views.
  std::vector<bool> written(n, false);
  std::vector<int> writerOf(n, -1);
  for (const auto &input : prog.inputs())
    if (isArena(input.buffer()))
      written[input.buffer()] = true;
  for (int i = 0; i < prog.instructions_size(); ++i)
    for (int id : prog.instructions(i).results())
      if (isArena(id)) {
        if (written[id])
          return Status::error("buffer " + std::to_string(id) +
                               " is written twice");
        written[id] = true;
        writerOf[id] = i;
      }

  ArenaContents arena;
  std::vector<int> lastWriter(n, -1); // instruction that wrote each range
  for (const auto &input : prog.inputs())
    if (isArena(input.buffer()))
      arena.write(begin(input.buffer()), end(input.buffer()), input.buffer());
  auto name = [&](int i) {
    const auto &inst = prog.instructions(i);
    return "instruction " + std::to_string(i) + " ('" + inst.op() + "' at '" +
           inst.location() + "')";
  };
  // Whether buffer `id`'s value is intact when instruction `now` (or the
  // end) reads it.
  auto intact = [&](int id, int now, const std::string &reader) -> Status {
    if (bytes[id] == 0)
      return Status::success();
    int holder = arena.holder(begin(id), end(id));
    if (holder >= 0 && (holder == id || !written[id]))
      return Status::success();
    std::string what = reader + " reads buffer " + std::to_string(id);
    if (!written[id])
      return Status::error(what + ", which no instruction writes and which "
                                  "is no view of the value in its bytes");
    if (writerOf[id] >= now)
      return Status::error(what + " before " + name(writerOf[id]) +
                           " writes it");
    if (holder == -1)
      return Status::error(what + " before anything wrote it");
    return Status::error(what + " after " +
                         (holder >= 0 && lastWriter[holder] >= 0
                              ? name(lastWriter[holder])
                              : std::string("another value")) +
                         " overwrote its bytes");
  };
  for (int i = 0; i < prog.instructions_size(); ++i) {
    const auto &inst = prog.instructions(i);
    for (int id : inst.operands())
      if (isArena(id))
        if (Status s = intact(id, i, name(i)); !s)
          return s;
    const std::optional<contract::OpKind> kind =
        contract::opKindFromName(inst.op());
    for (int k = 0; k < inst.results_size(); ++k) {
      const int r = inst.results(k);
      if (!isArena(r))
        continue;
      auto overlaps = [&](int id) {
        return isArena(id) && bytes[r] && bytes[id] && begin(r) < end(id) &&
               begin(id) < end(r);
      };
      // Only over exactly the bytes of the operand the contract allows, and
      // only where no other operand reads them.
      std::optional<int> inPlace =
          kind ? contract::inPlaceOperand(*kind, k) : std::nullopt;
      for (int j = 0; j < inst.operands_size(); ++j) {
        const int id = inst.operands(j);
        if (overlaps(id) && !(inPlace && j == *inPlace &&
                              begin(r) == begin(id) && end(r) == end(id)))
          return Status::error(name(i) + " writes its result buffer " +
                               std::to_string(r) + " over its operand buffer " +
                               std::to_string(id));
      }
      for (int j = 0; j < k; ++j)
        if (overlaps(inst.results(j)))
          return Status::error(name(i) + " writes its result buffers " +
                               std::to_string(inst.results(j)) + " and " +
                               std::to_string(r) + " over each other");
    }
    for (int r : inst.results())
      if (isArena(r)) {
        arena.write(begin(r), end(r), r);
        lastWriter[r] = i;
      }
  }
  for (const auto &output : prog.outputs())
    if (isArena(output.buffer()))
      if (Status s = intact(output.buffer(), prog.instructions_size(),
                            "output '" + output.name() + "'");
          !s)
        return s;
  return Status::success();
}

} // namespace mp::rt

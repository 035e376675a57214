//===- PipelineSplit.cpp - one function per pipeline chunk and phase ------===//
//
// After mp-pipeline (and mp-train), each op that depends on the inputs runs
// in one chunk (mp.stage) and phase (the backward carries mp.backward). The
// program becomes private functions @forward_k and @backward_k, one per
// chunk k, whose arguments and results say where each value comes from and
// goes:
//   mp.input = i    the program's input i
//   mp.recv = id    value `id` from the neighbouring chunk (the previous one
//                   forward, the next one backward)
//   mp.stash = id   value `id` the chunk's forward kept for its backward
// and on results mp.send = id, mp.stash = id, mp.output = i (the program's
// result i, with its attributes; `mp.partial` on a term of a gradient that
// chunks compute in parts). A value a later chunk reads skips no chunk:
// each chunk between passes it on (relays it). Values computed from
// parameters and constants alone are recomputed in each function that
// reads them.
//
//===----------------------------------------------------------------------===//
#include "mp/Analysis/Layers.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <functional>
#include <set>

namespace mp {
#define GEN_PASS_DEF_MPPIPELINESPLIT
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

enum Phase { Forward, Backward };

/// Where an op runs.
struct Place {
  int64_t stage;
  Phase phase;
};

/// Where a value defined by a placed op is needed beyond its function.
struct Need {
  int64_t id;
  Place def;
  int64_t forwardUntil;      // forward: the last chunk that needs it
  int64_t backwardDownTo;    // backward: the lowest chunk that needs it
  std::set<int64_t> stashAt; // forward: chunks whose backward reads it
};

class Splitter {
public:
  Splitter(ModuleOp module, func::FuncOp main, int64_t chunks)
      : module(module), main(main), chunks(chunks) {}

  LogicalResult run() {
    findPartialOutputs();
    if (failed(placeOps()) || failed(findNeeds()))
      return failure();
    for (auto &[op, place] : placeOf)
      training |= place.phase == Backward;
    findFirstReaders();
    OpBuilder b(main);
    for (int64_t k = 0; k < chunks; ++k)
      build(b, {k, Forward});
    if (training)
      for (int64_t k = chunks - 1; k >= 0; --k)
        build(b, {k, Backward});
    main.erase();
    return success();
  }

private:
  /// Places every op that depends on the inputs: by its mp.stage, or (the
  /// backward of parameter-only ops) where its operands are: the highest
  /// chunk of a forward op's, the lowest of a backward op's.
  /// A parameter read in several chunks (a tied embedding and LM head) has
  /// its gradient summed from terms the backward of each computes: rather
  /// than relaying a term through every chunk between, each chunk returns
  /// its term as a partial output (`mp.partial`), which the runtime sums
  /// once per step between the ranks that hold them, as Megatron's
  /// embedding group does.
  void findPartialOutputs();
  LogicalResult placeOps();
  /// Records, for each value crossing functions, where it is needed, and
  /// checks the data flows the way the pipeline runs.
  LogicalResult findNeeds();
  void build(OpBuilder &b, Place fn);
  /// The first chunk whose forward reads each parameter.
  void findFirstReaders();
  /// The function a result no chunk computes comes from: a parameter's
  /// gradient (a constant: the loss does not read the parameter), the
  /// backward of the first chunk reading the parameter, whose stage holds
  /// and updates it; anything else, the last function built.
  Place homeOfFreeResult(unsigned result) const;

  /// The ops placed in `fn`, in program order.
  SmallVector<Operation *> opsIn(Place fn) {
    SmallVector<Operation *> ops;
    for (Operation &op : main.getBody().front().without_terminator()) {
      auto at = placeOf.find(&op);
      if (at != placeOf.end() && at->second.stage == fn.stage &&
          at->second.phase == fn.phase)
        ops.push_back(&op);
    }
    return ops;
  }

  /// Whether `v` is computed from parameters and constants alone (each
  /// function recomputes it).
  bool isFree(Value v) const {
    Operation *def = v.getDefiningOp();
    return def && !placeOf.count(def);
  }

  ModuleOp module;
  func::FuncOp main;
  int64_t chunks;
  llvm::DenseMap<Operation *, Place> placeOf;
  bool training = false; // (a backward was placed)
  // Program result -> the terms chunks return for it, and the adds that
  // summed them (not run).
  std::map<unsigned, SmallVector<Value>> partialOutputs;
  llvm::DenseSet<Operation *> dissolved;
  llvm::MapVector<Value, Need> needs;   // in definition order
  llvm::StringMap<int64_t> firstReader; // parameter -> chunk
};

void Splitter::findPartialOutputs() {
  auto stageOf = [](Value v) -> int64_t {
    Operation *def = v.getDefiningOp();
    auto attr =
        def ? def->getAttrOfType<IntegerAttr>(MPDialect::getStageAttrName())
            : IntegerAttr();
    return attr ? attr.getInt() : -1;
  };
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  for (auto [i, result] : llvm::enumerate(ret.getOperands())) {
    // The leaves of a tree of backward adds, each used once.
    SmallVector<Value> terms, pending{result};
    SmallVector<Operation *> adds;
    while (!pending.empty()) {
      Value v = pending.pop_back_val();
      auto add = v.getDefiningOp<AddOp>();
      if (add && add->hasAttr(MPDialect::getBackwardAttrName()) &&
          (v == result || v.hasOneUse()) &&
          add.getLhs().getType() == add.getType() &&
          add.getRhs().getType() == add.getType()) {
        adds.push_back(add);
        pending.push_back(add.getRhs());
        pending.push_back(add.getLhs());
        continue;
      }
      terms.push_back(v);
    }
    std::set<int64_t> stages;
    for (Value t : terms)
      stages.insert(stageOf(t));
    if (adds.empty() || stages.size() < 2 || stages.count(-1))
      continue;
    partialOutputs[i] = terms;
    dissolved.insert(adds.begin(), adds.end());
  }
}

LogicalResult Splitter::placeOps() {
  llvm::DenseSet<Operation *> dependent = inputDependentOps(main);
  for (Operation &op : main.getBody().front().without_terminator()) {
    if (dissolved.contains(&op) || !dependent.contains(&op))
      continue;
    Phase phase =
        op.hasAttr(MPDialect::getBackwardAttrName()) ? Backward : Forward;
    int64_t stage = -1;
    if (auto attr =
            op.getAttrOfType<IntegerAttr>(MPDialect::getStageAttrName()))
      stage = attr.getInt();
    else
      for (Value v : op.getOperands()) {
        auto def = placeOf.find(v.getDefiningOp());
        if (def == placeOf.end())
          continue;
        int64_t s = def->second.stage;
        stage = stage < 0          ? s
                : phase == Forward ? std::max(stage, s)
                                   : std::min(stage, s);
      }
    if (stage < 0)
      stage = 0; // (reads only the program's inputs)
    if (stage >= chunks)
      return op.emitError() << "mp.stage " << stage << " is not one of the "
                            << chunks << " pipeline chunks";
    placeOf[&op] = {stage, phase};
  }
  return success();
}

LogicalResult Splitter::findNeeds() {
  auto needOf = [&](Value v, Place def) -> Need & {
    auto [it, inserted] =
        needs.insert({v, Need{static_cast<int64_t>(needs.size()),
                              def,
                              def.stage,
                              def.stage,
                              {}}});
    return it->second;
  };
  for (Operation &op : main.getBody().front().without_terminator()) {
    auto user = placeOf.find(&op);
    if (user == placeOf.end())
      continue;
    Place at = user->second;
    for (Value v : op.getOperands()) {
      auto defIt = placeOf.find(v.getDefiningOp());
      if (defIt == placeOf.end())
        continue; // an input or a free value
      Place def = defIt->second;
      if (def.phase == Forward && at.phase == Forward && def.stage == at.stage)
        continue;
      if (def.phase == Backward && at.phase == Backward &&
          def.stage == at.stage)
        continue;
      if (def.phase == Backward && at.phase == Forward)
        return op.emitError() << "a forward op reads a value of the backward";
      if (def.phase == Forward && at.stage < def.stage)
        return op.emitError()
               << "this op of pipeline chunk " << at.stage
               << (at.phase == Forward ? "'s forward" : "'s backward")
               << " reads a forward value of the later chunk " << def.stage;
      if (def.phase == Backward && at.stage > def.stage)
        return op.emitError()
               << "this backward op of pipeline chunk " << at.stage
               << " reads a gradient of the earlier chunk " << def.stage;
      Need &need = needOf(v, def);
      if (def.phase == Forward) {
        need.forwardUntil = std::max(need.forwardUntil, at.stage);
        if (at.phase == Backward)
          need.stashAt.insert(at.stage);
      } else {
        need.backwardDownTo = std::min(need.backwardDownTo, at.stage);
      }
    }
  }
  return success();
}

void Splitter::build(OpBuilder &b, Place fn) {
  const int64_t k = fn.stage;
  const bool forward = fn.phase == Forward;
  auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
  MLIRContext *ctx = module.getContext();
  auto idAttr = [&](StringRef name, int64_t id) {
    return NamedAttribute(StringAttr::get(ctx, name),
                          IntegerAttr::get(IntegerType::get(ctx, 64), id));
  };

  // Arguments: the inputs its ops read, then received values, then stash.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  SmallVector<Value> argValues; // the values they stand for
  auto addArg = [&](Value v, NamedAttribute how) {
    SmallVector<NamedAttribute> attrs{how};
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (auto dict = main.getArgAttrDict(arg.getArgNumber()))
        attrs.append(dict.begin(), dict.end());
    argTypes.push_back(v.getType());
    argAttrs.push_back(DictionaryAttr::get(ctx, attrs));
    argValues.push_back(v);
  };
  const SmallVector<Operation *> ops = opsIn(fn);
  llvm::SetVector<Value> inputs;
  for (Operation *op : ops)
    for (Value v : op->getOperands())
      if (isa<BlockArgument>(v))
        inputs.insert(v);
  for (Value v : inputs)
    addArg(v, idAttr(MPDialect::getInputAttrName(),
                     cast<BlockArgument>(v).getArgNumber()));
  for (auto &[v, need] : needs) {
    bool received = forward ? (need.def.phase == Forward &&
                               need.def.stage < k && k <= need.forwardUntil)
                            : (need.def.phase == Backward &&
                               need.backwardDownTo <= k && k < need.def.stage);
    if (received)
      addArg(v, idAttr("mp.recv", need.id));
  }
  if (!forward)
    for (auto &[v, need] : needs)
      if (need.def.phase == Forward && need.stashAt.count(k))
        addArg(v, idAttr(MPDialect::getStashAttrName(), need.id));

  // Results: sends, then stash, then the program's results it computes.
  SmallVector<Value> resultValues;
  SmallVector<DictionaryAttr> resultAttrs;
  auto addResult = [&](Value v, NamedAttribute how, DictionaryAttr extra) {
    SmallVector<NamedAttribute> attrs{how};
    if (extra)
      attrs.append(extra.begin(), extra.end());
    resultValues.push_back(v);
    resultAttrs.push_back(DictionaryAttr::get(ctx, attrs));
  };
  for (auto &[v, need] : needs) {
    bool sent = forward ? (need.def.phase == Forward && need.def.stage <= k &&
                           k < need.forwardUntil)
                        : (need.def.phase == Backward &&
                           need.backwardDownTo < k && k <= need.def.stage);
    if (sent)
      addResult(v, idAttr("mp.send", need.id), {});
  }
  if (forward)
    for (auto &[v, need] : needs)
      if (need.def.phase == Forward && need.stashAt.count(k))
        addResult(v, idAttr(MPDialect::getStashAttrName(), need.id), {});
  // A term no chunk computes comes from the last function built: the
  // first chunk's backward, or the last chunk's forward.
  bool lastBuilt =
      training ? (!forward && k == 0) : (forward && k == chunks - 1);
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    if (auto terms = partialOutputs.find(i); terms != partialOutputs.end()) {
      for (Value term : terms->second) {
        // (A term from parameters alone comes with the free results.)
        auto def = placeOf.find(term.getDefiningOp());
        bool mine = def != placeOf.end() ? def->second.stage == k &&
                                               def->second.phase == fn.phase
                                         : lastBuilt;
        if (!mine)
          continue;
        SmallVector<NamedAttribute> extra{NamedAttribute(
            StringAttr::get(ctx, MPDialect::getPartialAttrName()),
            UnitAttr::get(ctx))};
        if (DictionaryAttr dict = main.getResultAttrDict(i))
          extra.append(dict.begin(), dict.end());
        addResult(term, idAttr(MPDialect::getOutputAttrName(), i),
                  DictionaryAttr::get(ctx, extra));
      }
      continue;
    }
    auto def = placeOf.find(v.getDefiningOp());
    Place home = def != placeOf.end() ? def->second : homeOfFreeResult(i);
    if (home.stage == k && home.phase == fn.phase)
      addResult(v, idAttr(MPDialect::getOutputAttrName(), i),
                main.getResultAttrDict(i));
  }

  // The body.
  std::string name = (forward ? "forward_" : "backward_") + std::to_string(k);
  SmallVector<Type> resultTypes;
  for (Value v : resultValues)
    resultTypes.push_back(v.getType());
  b.setInsertionPoint(main);
  auto func = func::FuncOp::create(b, main.getLoc(), name,
                                   b.getFunctionType(argTypes, resultTypes));
  func.setPrivate();
  func.setAllArgAttrs(argAttrs);
  func.setAllResultAttrs(resultAttrs);
  func->setAttr(MPDialect::getChunkAttrName(), b.getI64IntegerAttr(k));
  Block *body = func.addEntryBlock();
  OpBuilder inner = OpBuilder::atBlockEnd(body);
  IRMapping map;
  for (auto [arg, v] : llvm::zip(body->getArguments(), argValues))
    map.map(v, arg);
  // Free values are recomputed where first read.
  std::function<void(Value)> materialize = [&](Value v) {
    if (map.contains(v) || !isFree(v))
      return;
    Operation *def = v.getDefiningOp();
    for (Value operand : def->getOperands())
      materialize(operand);
    inner.clone(*def, map);
  };
  for (Operation *op : ops) {
    for (Value v : op->getOperands())
      materialize(v);
    inner.clone(*op, map);
  }
  SmallVector<Value> returned;
  for (Value v : resultValues) {
    materialize(v);
    returned.push_back(map.lookup(v));
  }
  func::ReturnOp::create(inner, main.getLoc(), returned);
}

void Splitter::findFirstReaders() {
  main.walk([&](GetParamOp get) {
    // Through the free ops computed from it (recomputed where needed: a
    // mask made of a tril buffer), to the placed ones that read them.
    SmallVector<Value> work{get.getResult()};
    llvm::SmallPtrSet<Operation *, 8> seen;
    while (!work.empty())
      for (Operation *user : work.pop_back_val().getUsers()) {
        if (!seen.insert(user).second)
          continue;
        auto at = placeOf.find(user);
        if (at == placeOf.end()) {
          llvm::append_range(work, user->getResults());
          continue;
        }
        if (at->second.phase != Forward)
          continue;
        auto [it, inserted] =
            firstReader.try_emplace(get.getName(), at->second.stage);
        it->second = std::min(it->second, at->second.stage);
      }
  });
}

Place Splitter::homeOfFreeResult(unsigned result) const {
  Place last = training ? Place{0, Backward} : Place{chunks - 1, Forward};
  auto name = func::FuncOp(main).getResultAttrOfType<StringAttr>(
      result, MPDialect::getNameAttrName());
  if (!training || !name || !name.getValue().starts_with("grads/"))
    return last;
  auto first = firstReader.find(name.getValue().drop_front(strlen("grads/")));
  return first != firstReader.end() ? Place{first->second, Backward} : last;
}

struct PipelineSplitPass
    : public mp::impl::MPPipelineSplitBase<PipelineSplitPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto plan =
        module->getAttrOfType<DictionaryAttr>(MPDialect::getPipelineAttrName());
    if (!plan) {
      emitError(module.getLoc())
          << "mp-pipeline-split needs a program cut into pipeline chunks "
             "(run mp-pipeline)";
      return signalPassFailure();
    }
    auto pp = plan.getAs<IntegerAttr>("pp"), vp = plan.getAs<IntegerAttr>("vp");
    FailureOr<func::FuncOp> main = getEntryFunction(module);
    if (!pp || !vp || pp.getInt() < 1 || vp.getInt() < 1 || failed(main)) {
      emitError(module.getLoc()) << "an invalid mp.pipeline plan";
      return signalPassFailure();
    }
    if (failed(Splitter(module, *main, pp.getInt() * vp.getInt()).run()))
      signalPassFailure();
  }
};

} // namespace

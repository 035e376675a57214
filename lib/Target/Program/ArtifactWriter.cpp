//===- ArtifactWriter.cpp - mp IR -> runtime artifact ---------------------===//
//
// Each SSA value of the entry function becomes a buffer: parameters
// (mp.get_param) and constants keep their own storage, everything else sits
// at its offset in one arena as the memory plan (mp-plan-memory,
// mp/Analysis/MemoryPlan.h) placed it, so the runtime allocates once. Each
// op becomes an instruction naming its buffers and the attributes its
// kernel needs, as the op contract (mp/Support/OpContract.def) lists them.
//
//===----------------------------------------------------------------------===//
#include "WriteProgram.h"

#include "mp/Analysis/MemoryPlan.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Import/ONNXImporter.h"
#include "mp/Program/program.pb.h"
#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Npy.h"
#include "mp/Runtime/Safetensors.h"
#include "mp/Runtime/Shards.h"
#include "mp/Support/DType.h"
#include "mp/Support/Float16.h"
#include "mp/Support/OpContract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

#include <zlib.h>

#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace mlir;
using namespace mp;

namespace {

namespace fs = std::filesystem;

/// Little-endian bytes of a dense constant (i1 as one byte per element).
std::string constantBytes(DenseElementsAttr attr) {
  auto type = cast<RankedTensorType>(attr.getType());
  int64_t n = type.getNumElements();
  Type elem = type.getElementType();
  std::string bytes;
  if (elem.isInteger(1)) {
    for (bool b : attr.getValues<bool>())
      bytes.push_back(b ? 1 : 0);
    return bytes;
  }
  int64_t width = elem.getIntOrFloatBitWidth() / 8;
  bytes.resize(n * width);
  auto put = [&](int64_t i, const APInt &bits) {
    uint64_t raw = bits.getZExtValue();
    std::memcpy(bytes.data() + i * width, &raw, width);
  };
  int64_t i = 0;
  if (isa<FloatType>(elem)) {
    for (APFloat f : attr.getValues<APFloat>())
      put(i++, f.bitcastToAPInt());
  } else {
    for (APInt v : attr.getValues<APInt>())
      put(i++, v);
  }
  return bytes;
}

/// Converts little-endian fp32 bytes to bf16 or fp16 (round to nearest even).
std::string narrowFloats(const std::string &f32, Type target) {
  size_t n = f32.size() / 4;
  std::string out(n * 2, '\0');
  for (size_t i = 0; i < n; ++i) {
    float v;
    std::memcpy(&v, f32.data() + 4 * i, 4);
    uint16_t bits = target.isBF16() ? floatToBf16(v) : floatToHalf(v);
    std::memcpy(out.data() + 2 * i, &bits, 2);
  }
  return out;
}

LogicalResult readStoredParamData(ParamOp param, std::string &bytes);

/// Reads a parameter's data, converted to its type when it was narrowed
/// after import (`source_type`).
LogicalResult readParamData(ParamOp param, std::string &bytes) {
  if (failed(readStoredParamData(param, bytes)))
    return failure();
  auto source = param.getSourceType();
  Type elem = param.getTensorType().getElementType();
  if (source && *source != elem) {
    if (!source->isF32() || !(elem.isBF16() || elem.isF16()))
      return param.emitError()
             << "cannot convert stored " << *source << " data to " << elem;
    bytes = narrowFloats(bytes, elem);
  }
  if (static_cast<int64_t>(bytes.size()) != storageBytes(param.getType()))
    return param.emitError()
           << "parameter '" << param.getSymName() << "' has " << bytes.size()
           << " bytes of data for " << param.getType();
  return success();
}

LogicalResult readWholeStoredData(ParamOp param, std::string &bytes);

/// Reads a parameter's data from where the importer recorded it, in the
/// type it is stored in (a `part` cut from the whole stored tensor).
LogicalResult readStoredParamData(ParamOp param, std::string &bytes) {
  if (failed(readWholeStoredData(param, bytes)))
    return failure();
  auto part = param.getPart();
  if (!part)
    return success();
  RankedTensorType whole = param.getStoredType();
  int64_t elem = (whole.getElementTypeBitWidth() + 7) / 8;
  if (static_cast<int64_t>(bytes.size()) != whole.getNumElements() * elem)
    return param.emitError()
           << "parameter '" << param.getSymName() << "' is a part of " << whole
           << " but its stored data has " << bytes.size() << " bytes";
  int64_t axis = (*part)[0];
  bytes = rt::blockAlong(bytes, whole.getShape().vec(), elem, axis, (*part)[1],
                         param.getTensorType().getDimSize(axis));
  return success();
}

/// The bytes the parameter's data attributes locate.
LogicalResult readWholeStoredData(ParamOp param, std::string &bytes) {
  if (!param.getFile())
    return param.emitError()
           << "parameter '" << param.getSymName()
           << "' has no data (imported with --mp-shape-only?); an artifact "
              "needs the weights (or --mp-synthetic-weights to benchmark)";
  std::string file = param.getFile()->str(), error;
  if (auto offset = param.getOffset()) {
    std::ifstream in(file, std::ios::binary);
    int64_t length = static_cast<int64_t>(*param.getLength());
    // (The length is of the stored type.)
    bytes.resize(length);
    if (!in || !in.seekg(static_cast<int64_t>(*offset)) ||
        !in.read(bytes.data(), length))
      return param.emitError()
             << "cannot read " << length << " bytes at "
             << static_cast<int64_t>(*offset) << " of '" << file
             << "' for parameter '" << param.getSymName() << "'";
    return success();
  }
  std::string initializer =
      param.getInitializer().value_or(param.getSymName()).str();
  if (!readONNXInitializer(file, initializer, bytes, error))
    return param.emitError() << error;
  return success();
}

using contract::AttrName;

void addInt(program::Instruction &inst, AttrName name, int64_t v) {
  auto *a = inst.add_attributes();
  a->set_name(contract::attrName(name));
  a->set_i(v);
}
void addFloat(program::Instruction &inst, AttrName name, double v) {
  auto *a = inst.add_attributes();
  a->set_name(contract::attrName(name));
  a->set_f(v);
}
void addInts(program::Instruction &inst, AttrName name,
             ArrayRef<int64_t> values) {
  auto *a = inst.add_attributes();
  a->set_name(contract::attrName(name));
  for (int64_t v : values)
    a->mutable_ints()->add_values(v);
}
void addString(program::Instruction &inst, AttrName name, StringRef value) {
  auto *a = inst.add_attributes();
  a->set_name(contract::attrName(name));
  a->set_s(value.str());
}

/// Writes the attributes the runtime kernel of `op` reads (defaults made
/// explicit, axes normalized), as the op contract lists them.
void addAttributes(Operation *op, program::Instruction &inst) {
  llvm::TypeSwitch<Operation *>(op)
      .Case([&](CompareOp c) {
        addInt(inst, AttrName::Predicate,
               static_cast<int64_t>(c.getPredicate()));
      })
      .Case([&](GeluOp g) {
        addInt(inst, AttrName::Approximate,
               static_cast<int64_t>(g.getApproximate()));
      })
      .Case([&](LinearOp l) {
        addInt(inst, AttrName::TransposeWeight, l.getTransposeWeight());
        addInt(inst, AttrName::Activation,
               static_cast<int64_t>(l.getActivation()));
      })
      .Case([&](LayerNormOp l) {
        addInt(inst, AttrName::Axis, l.getNormalizedAxis());
        addFloat(inst, AttrName::Epsilon, l.getEpsilon().convertToFloat());
      })
      .Case([&](RMSNormOp r) {
        addFloat(inst, AttrName::Epsilon, r.getEpsilon().convertToFloat());
      })
      .Case([&](AddLayerNormOp l) {
        addInt(inst, AttrName::Axis, l.getNormalizedAxis());
        addFloat(inst, AttrName::Epsilon, l.getEpsilon().convertToFloat());
      })
      .Case([&](AddRMSNormOp r) {
        addFloat(inst, AttrName::Epsilon, r.getEpsilon().convertToFloat());
      })
      .Case([&](RotaryOp r) {
        addInt(inst, AttrName::RotaryDim, r.getRotaryDim());
        addInt(inst, AttrName::Interleaved, r.getInterleaved());
      })
      .Case([&](AllReduceAddLayerNormOp l) {
        addInt(inst, AttrName::GridAxis, l.getGridAxis());
        addInt(inst, AttrName::Axis, l.getNormalizedAxis());
        addFloat(inst, AttrName::Epsilon, l.getEpsilon().convertToFloat());
      })
      .Case([&](AllReduceAddRMSNormOp r) {
        addInt(inst, AttrName::GridAxis, r.getGridAxis());
        addFloat(inst, AttrName::Epsilon, r.getEpsilon().convertToFloat());
      })
      .Case([&](ReduceScatterAddLayerNormOp l) {
        addInt(inst, AttrName::GridAxis, l.getGridAxis());
        addInt(inst, AttrName::ScatterAxis, l.getScatterAxis());
        addInt(inst, AttrName::Axis, l.getNormalizedAxis());
        addFloat(inst, AttrName::Epsilon, l.getEpsilon().convertToFloat());
      })
      .Case([&](ReduceScatterAddRMSNormOp r) {
        addInt(inst, AttrName::GridAxis, r.getGridAxis());
        addInt(inst, AttrName::ScatterAxis, r.getScatterAxis());
        addFloat(inst, AttrName::Epsilon, r.getEpsilon().convertToFloat());
      })
      .Case([&](SoftmaxOp s) {
        addInt(inst, AttrName::Axis, s.getNormalizedAxis());
      })
      .Case([&](ReduceOp r) {
        addInt(inst, AttrName::Kind, static_cast<int64_t>(r.getKind()));
        SmallVector<int64_t> axes;
        for (int64_t a : r.getAxes())
          axes.push_back(mp::detail::nonNegativeAxis(a, r.getInput()));
        llvm::sort(axes);
        addInts(inst, AttrName::Axes, axes);
      })
      .Case([&](AttentionOp a) {
        addFloat(inst, AttrName::Scale, a.getScale().convertToFloat());
        addInt(inst, AttrName::Causal, a.getCausal());
      })
      .Case([&](EmbeddingOp e) {
        addInt(inst, AttrName::VocabParallel, e.getGrid().has_value());
        addInt(inst, AttrName::Vocab, e.getVocab().value_or(0));
      })
      .Case([&](shard::AllGatherOp g) {
        addInt(inst, AttrName::Axis, g.getGatherAxis().getSExtValue());
      })
      .Case([&](shard::ReduceScatterOp r) {
        addInt(inst, AttrName::Axis, r.getScatterAxis().getSExtValue());
      })
      .Case([&](shard::AllSliceOp r) {
        addInt(inst, AttrName::Axis, r.getSliceAxis().getSExtValue());
      })
      .Case([&](GatherOp g) {
        addInt(inst, AttrName::Axis, g.getNormalizedAxis());
      })
      .Case([&](EinsumOp e) {
        addString(inst, AttrName::Equation, e.getEquation());
      })
      .Case([&](TriluOp t) {
        addInt(inst, AttrName::Upper, t.getUpper());
        addInt(inst, AttrName::Diagonal, static_cast<int64_t>(t.getDiagonal()));
      })
      .Case([&](TransposeOp t) {
        addInts(inst, AttrName::Permutation, t.getPermutation());
      })
      .Case([&](SliceOp s) {
        addInts(inst, AttrName::Starts, s.getStarts());
        addInts(inst, AttrName::Strides, s.getStrides());
      })
      .Case([&](ConcatOp c) {
        addInt(inst, AttrName::Axis, c.getNormalizedAxis());
      })
      .Case([&](SplitOp s) {
        addInt(inst, AttrName::Axis, s.getNormalizedAxis());
      })
      .Case([&](DropoutOp d) {
        addFloat(inst, AttrName::Ratio, d.getRatio().convertToFloat());
        addInt(inst, AttrName::SeedId,
               d.getSeedId() ? static_cast<int64_t>(*d.getSeedId()) : -1);
        addInt(inst, AttrName::RankStream, d.getRankStream());
      })
      .Case([&](LinearWeightGradOp l) {
        addInt(inst, AttrName::TransposeWeight, l.getTransposeWeight());
      })
      .Case([&](LayerNormGradOp l) {
        addInt(inst, AttrName::Axis,
               mp::detail::nonNegativeAxis(l.getAxis(), l.getInput()));
        addFloat(inst, AttrName::Epsilon, l.getEpsilon().convertToFloat());
      })
      .Case([&](RMSNormGradOp r) {
        addFloat(inst, AttrName::Epsilon, r.getEpsilon().convertToFloat());
      })
      .Case([&](GeluGradOp g) {
        addInt(inst, AttrName::Approximate,
               static_cast<int64_t>(g.getApproximate()));
      })
      .Case([&](AttentionGradOp a) {
        addFloat(inst, AttrName::Scale, a.getScale().convertToFloat());
        addInt(inst, AttrName::Causal, a.getCausal());
      })
      .Case([&](EmbeddingGradOp e) {
        addInt(inst, AttrName::VocabParallel, e.getGrid().has_value());
        addInt(inst, AttrName::Vocab, e.getVocab().value_or(0));
      })
      .Case([&](VocabParallelCrossEntropyOp c) {
        addInt(inst, AttrName::Vocab, c.getVocab().value_or(0));
      })
      .Case([&](VocabParallelCrossEntropyGradOp c) {
        addInt(inst, AttrName::Vocab, c.getVocab().value_or(0));
      })
      .Case([&](SliceGradOp s) {
        addInts(inst, AttrName::Starts, s.getStarts());
        addInts(inst, AttrName::Strides, s.getStrides());
      });
}

/// Checks that `inst` carries exactly the attributes the contract lists for
/// its op (a writer that drifted from the contract is caught here, not by a
/// runtime that would misread the artifact).
LogicalResult checkAttributes(Operation *op, const contract::OpInfo &info,
                              const program::Instruction &inst) {
  bool ok = inst.attributes_size() == static_cast<int>(info.attributes.size());
  for (const contract::AttrInfo &a : info.attributes)
    ok &= llvm::any_of(inst.attributes(), [&](const program::Attribute &w) {
      return w.name() == contract::attrName(a.name);
    });
  if (!ok)
    return op->emitError() << "internal error: the artifact writer's "
                              "attributes for '"
                           << info.name << "' differ from the op contract";
  return success();
}

/// The operand list by contract position: absent optional (trailing)
/// operands are null.
SmallVector<Value> positionalOperands(Operation *op,
                                      const contract::OpInfo &info) {
  // (An op with two optional operands: the first absent is a -1 before the
  // second.)
  if (auto fused = dyn_cast<AllReduceAddLayerNormOp>(op))
    return {fused.getPartial(), fused.getResidual(), fused.getScale(),
            fused.getBias(), fused.getAddend()};
  if (auto fused = dyn_cast<ReduceScatterAddLayerNormOp>(op))
    return {fused.getPartial(), fused.getResidual(), fused.getScale(),
            fused.getBias(), fused.getAddend()};
  SmallVector<Value> operands(op->getOperands());
  if (!info.variadicOperands())
    operands.resize(std::max<size_t>(operands.size(), info.operands));
  return operands;
}

/// Rank `rank`'s shard of a parameter's global bytes: dimension `axis` is
/// `groups` blocks, each split evenly over `ranks`.
std::string shardOf(const std::string &bytes, ParamOp param, int64_t rank,
                    int64_t ranks) {
  int64_t groups = param.getShardGroups()
                       ? static_cast<int64_t>(*param.getShardGroups())
                       : 1;
  return rt::shardOf(bytes, param.getTensorType().getShape().vec(),
                     static_cast<int64_t>(*param.getShardAxis()), groups, ranks,
                     rank);
}

/// The name of a program input or output: the model's (mp.name), or a
/// pipeline chunk's transfer ("recv:ID", "send:ID") or stash ("stash:ID"),
/// else `fallback` and its position.
std::string bindingName(DictionaryAttr attrs, StringRef fallback, size_t i) {
  if (attrs) {
    if (auto name = attrs.getAs<StringAttr>(MPDialect::getNameAttrName()))
      return name.str();
    for (StringRef role : {"recv", "send", "stash"})
      if (auto id = attrs.getAs<IntegerAttr>(("mp." + role).str()))
        return (role + ":" + Twine(id.getInt())).str();
    // A pipeline chunk's: named by the program's own index.
    if (auto index = attrs.getAs<IntegerAttr>(("mp." + fallback).str()))
      return (fallback + Twine(index.getInt())).str();
  }
  return (fallback + Twine(i)).str();
}

class Lowering {
public:
  Lowering(func::FuncOp func, const MemoryPlan &plan, program::Program &prog,
           std::vector<rt::SafetensorsWriter> &params, ArtifactSummary &summary)
      : func(func), plan(plan), prog(prog), params(params), summary(summary) {}

  LogicalResult run();

private:
  FailureOr<int> newBuffer(Value v, program::Buffer::Kind kind);
  FailureOr<int> arenaBuffer(Value v);
  FailureOr<int> paramBuffer(GetParamOp op);
  LogicalResult lowerOp(Operation *op);

  func::FuncOp func;
  const MemoryPlan &plan;
  program::Program &prog;
  std::vector<rt::SafetensorsWriter> &params; // one per rank
  ArtifactSummary &summary;
  llvm::DenseMap<Value, int> bufferOf;
  llvm::StringMap<int> paramBuffers;
};

FailureOr<int> Lowering::newBuffer(Value v, program::Buffer::Kind kind) {
  FailureOr<DType> dtype = runtimeDType(v.getType(), v.getLoc());
  if (failed(dtype))
    return failure();
  int id = prog.buffers_size();
  auto *b = prog.add_buffers();
  b->set_kind(kind);
  b->set_dtype(dtypeName(*dtype));
  for (int64_t d : cast<RankedTensorType>(v.getType()).getShape())
    b->add_shape(d);
  bufferOf[v] = id;
  return id;
}

/// A buffer at the value's offset in the memory plan.
FailureOr<int> Lowering::arenaBuffer(Value v) {
  FailureOr<int> id = newBuffer(v, program::Buffer::ARENA);
  if (succeeded(id))
    prog.mutable_buffers(*id)->set_offset(plan.offset(v));
  return id;
}

FailureOr<int> Lowering::paramBuffer(GetParamOp op) {
  auto found = paramBuffers.find(op.getName());
  if (found != paramBuffers.end())
    return bufferOf[op.getResult()] = found->second;
  auto param =
      SymbolTable::lookupNearestSymbolFrom<ParamOp>(op, op.getNameAttr());
  std::string bytes;
  if (!prog.synthetic_weights() && prog.parameters_from().empty() &&
      failed(readParamData(param, bytes)))
    return failure();
  FailureOr<int> id = newBuffer(op.getResult(), program::Buffer::PARAMETER);
  if (failed(id))
    return failure();
  auto *p = prog.add_parameters();
  p->set_name(op.getName().str());
  p->set_dtype(prog.buffers(*id).dtype());
  p->mutable_shape()->CopyFrom(prog.buffers(*id).shape());
  if (auto part = param.getPart()) {
    p->set_part_of(param.getPartOf()->str());
    p->set_part_axis((*part)[0]);
    p->set_part_start((*part)[1]);
    p->set_part_whole((*part)[2]);
  }
  prog.mutable_buffers(*id)->set_parameter(prog.parameters_size() - 1);
  DType dtype;
  parseDType(p->dtype(), dtype);
  std::vector<int64_t> localShape(p->shape().begin(), p->shape().end());
  // Borrowed (a pipeline chunk's backward): the forward's file has them.
  if (prog.synthetic_weights() || !prog.parameters_from().empty()) {
    if (prog.parameters_from().empty())
      summary.parameterBytes += storageBytes(op.getType());
    paramBuffers[op.getName()] = *id;
    return id;
  }
  int64_t ranks = static_cast<int64_t>(params.size());
  for (int64_t rank = 0; rank < ranks; ++rank) {
    // Replicated parameters: every rank's file gets the bytes (moved last).
    std::string shard = param.getGrid()     ? shardOf(bytes, param, rank, ranks)
                        : rank + 1 == ranks ? std::move(bytes)
                                            : bytes;
    uint32_t crc = static_cast<uint32_t>(crc32(
        crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef *>(shard.data()),
        static_cast<uInt>(shard.size())));
    if (rank == 0)
      p->set_crc32(crc);
    if (ranks > 1)
      p->add_rank_crc32(crc);
    summary.parameterBytes += static_cast<int64_t>(shard.size());
    params[rank].add(p->name(), dtype, localShape, std::move(shard));
  }
  paramBuffers[op.getName()] = *id;
  return id;
}

LogicalResult Lowering::lowerOp(Operation *op) {
  if (auto get = dyn_cast<GetParamOp>(op))
    return paramBuffer(get);
  if (auto constant = dyn_cast<ConstantOp>(op)) {
    auto attr = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!attr)
      return op->emitError() << "only dense constants can be lowered";
    FailureOr<int> id =
        newBuffer(constant.getResult(), program::Buffer::CONSTANT);
    if (failed(id))
      return failure();
    // A splat is stored as its one value (the runtime repeats it).
    bool splat = attr.isSplat() && attr.getNumElements() > 1;
    std::string bytes = constantBytes(
        splat ? DenseElementsAttr::get(
                    RankedTensorType::get({1}, attr.getElementType()),
                    attr.getSplatValue<Attribute>())
              : attr);
    summary.constantBytes += static_cast<int64_t>(bytes.size());
    prog.mutable_buffers(*id)->set_data(std::move(bytes));
    prog.mutable_buffers(*id)->set_splat(splat);
    return success();
  }
  // mp ops by mnemonic; of the shard dialect, the collectives the runtime
  // has (shard.gather is not mp.gather).
  std::optional<contract::OpKind> kind;
  ArrayRef<shard::GridAxis> gridAxes;
  if (isa_and_nonnull<MPDialect>(op->getDialect()))
    kind = contract::opKindFromName(op->getName().stripDialect());
  else
    llvm::TypeSwitch<Operation *>(op)
        .Case<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp,
              shard::AllSliceOp>([&](auto collective) {
          kind = contract::opKindFromName(op->getName().stripDialect());
          gridAxes = collective.getGridAxes();
        });
  if (!kind)
    return op->emitError() << "'" << op->getName()
                           << "' cannot be lowered to the runtime";
  const contract::OpInfo &info = contract::info(*kind);
  if (auto reduce = dyn_cast<shard::AllReduceOp>(op))
    if (reduce.getReduction() != shard::ReductionKind::Sum)
      return op->emitError() << "only sum all-reduces are supported";
  // A view of a parameter likewise: a parameter buffer of the view's
  // shape, and no instruction.
  if (op->getNumResults() == 1 && plan.isParameterView(op->getResult(0))) {
    int parameter = prog.buffers(bufferOf.at(op->getOperand(0))).parameter();
    FailureOr<int> id = newBuffer(op->getResult(0), program::Buffer::PARAMETER);
    if (succeeded(id))
      prog.mutable_buffers(*id)->set_parameter(parameter);
    return success(succeeded(id));
  }
  // A view of an arena value (a reshape, an inference dropout) is the same
  // bytes: a buffer at its source's offset, and no instruction.
  if (op->getNumResults() == 1 && plan.isView(op->getResult(0)))
    return success(arenaBuffer(op->getResult(0)));
  bool isCollective = isa<shard::ShardDialect>(op->getDialect());
  if (isCollective && gridAxes.size() != 1)
    return op->emitError() << "collectives over exactly one grid axis are "
                              "supported";
  auto *inst = prog.add_instructions();
  inst->set_op(info.name);
  if (auto name = dyn_cast<NameLoc>(op->getLoc()))
    inst->set_location(name.getName().str());
  for (Value operand : positionalOperands(op, info)) {
    if (!operand) {
      inst->add_operands(-1);
      continue;
    }
    inst->add_operands(bufferOf.at(operand));
  }
  for (Value result : op->getResults()) {
    FailureOr<int> id = arenaBuffer(result);
    if (failed(id))
      return failure();
    inst->add_results(*id);
  }
  addAttributes(op, *inst);
  if (isCollective)
    addInt(*inst, AttrName::GridAxis, gridAxes.front());
  return checkAttributes(op, info, *inst);
}

LogicalResult Lowering::run() {
  Block &body = func.getBody().front();
  for (auto [i, arg] : llvm::enumerate(body.getArguments())) {
    FailureOr<int> id = arenaBuffer(arg);
    if (failed(id))
      return failure();
    auto *binding = prog.add_inputs();
    binding->set_name(bindingName(func.getArgAttrDict(i), "input", i));
    binding->set_buffer(*id);
    if (auto axis = func.getArgAttrOfType<IntegerAttr>(
            i, MPDialect::getShardAxisAttrName())) {
      binding->mutable_sharding()->set_axis(axis.getInt());
      binding->mutable_sharding()->set_groups(1);
    }
  }
  for (Operation &op : body.without_terminator())
    if (failed(lowerOp(&op)))
      return failure();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto *binding = prog.add_outputs();
    binding->set_name(bindingName(func.getResultAttrDict(i), "output", i));
    binding->set_buffer(bufferOf.at(v));
    binding->set_partial(
        func.getResultAttr(i, MPDialect::getPartialAttrName()) != nullptr);
    if (auto axis = func.getResultAttrOfType<IntegerAttr>(
            i, MPDialect::getShardAxisAttrName())) {
      auto groups = func.getResultAttrOfType<IntegerAttr>(
          i, MPDialect::getShardGroupsAttrName());
      binding->mutable_sharding()->set_axis(axis.getInt());
      binding->mutable_sharding()->set_groups(groups ? groups.getInt() : 1);
      if (auto size = func.getResultAttrOfType<IntegerAttr>(
              i, MPDialect::getShardSizeAttrName()))
        binding->mutable_sharding()->set_size(size.getInt());
    }
  }
  summary.unplannedBytes = plan.unplannedBytes();
  summary.arenaBytes = plan.peakBytes();
  if (auto forward = func->getAttrOfType<IntegerAttr>(
          MPDialect::getForwardArenaBytesAttrName()))
    summary.forwardArenaBytes = forward.getInt();
  summary.instructions = prog.instructions_size();
  prog.set_arena_bytes(summary.arenaBytes);
  return success();
}

} // namespace

FailureOr<DType> mp::runtimeDType(Type type, Location loc) {
  Type elem = cast<RankedTensorType>(type).getElementType();
  if (elem.isF32())
    return DType::F32;
  if (elem.isF64())
    return DType::F64;
  if (elem.isF16())
    return DType::F16;
  if (elem.isBF16())
    return DType::BF16;
  if (elem.isInteger(64))
    return DType::I64;
  if (elem.isInteger(32))
    return DType::I32;
  if (elem.isInteger(8))
    return DType::I8;
  if (elem.isInteger(1))
    return DType::Bool;
  return emitError(loc) << "element type " << elem
                        << " has no runtime representation";
}

/// `dir` without a trailing separator ("out/" is "out"), so that names made
/// from it (out.tmp-PID) are its siblings, not its children.
static fs::path directoryName(const fs::path &dir) {
  fs::path name = dir.lexically_normal();
  return name.has_filename() || !name.has_parent_path() ? name
                                                        : name.parent_path();
}

LogicalResult mp::makeTemporaryDirectory(const fs::path &given, fs::path &tmp,
                                         Location loc) {
  const fs::path dir = directoryName(given);
  tmp = dir.string() + ".tmp-" + std::to_string(getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  if (!fs::create_directories(tmp, ec) || ec)
    return emitError(loc) << "cannot create '" << tmp.string()
                          << "': " << ec.message();
  return success();
}

LogicalResult mp::finishArtifact(const fs::path &tmp, const fs::path &dir,
                                 ModuleOp module, ModuleOp reference,
                                 bool syntheticWeights) {
  ArtifactSummary referenceSummary;
  if (reference &&
      failed(writeArtifact(reference, (tmp / "reference").string(),
                           referenceSummary, nullptr, syntheticWeights)))
    return failure();
  return commitDirectory(tmp, dir, module.getLoc());
}

LogicalResult mp::commitDirectory(const fs::path &tmp, const fs::path &given,
                                  Location loc) {
  const fs::path dir = directoryName(given);
  std::error_code ec;
  fs::path old = dir.string() + ".old-" + std::to_string(getpid());
  bool hadOld = fs::exists(dir, ec);
  if (hadOld && !fs::exists(dir / "program.pb", ec) &&
      !fs::exists(dir / "pipeline.pb", ec) && !fs::is_empty(dir, ec))
    return emitError(loc) << "'" << dir.string()
                          << "' exists and is not an mp artifact; refusing "
                             "to replace it";
  if (hadOld)
    fs::rename(dir, old, ec);
  if (!ec)
    fs::rename(tmp, dir, ec);
  if (ec) {
    if (hadOld && !fs::exists(dir))
      fs::rename(old, dir, ec);
    return emitError(loc) << "cannot move the artifact into '" << dir.string()
                          << "': " << ec.message();
  }
  // The new name on disk before the old artifact goes (its files were
  // flushed as they were written).
  fs::path parent = fs::absolute(dir, ec).parent_path();
  if (int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY); fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  if (hadOld)
    fs::remove_all(old, ec);
  return success();
}

/// Writes `func` as program.pb and its parameter files into `dir` (which
/// exists): the grid, data parallelism and ZeRO of `module`; parameters
/// read from `parametersFrom` (a sibling directory) when not empty.
LogicalResult mp::writeProgram(ModuleOp module, func::FuncOp func,
                               StringRef dirName, ArtifactSummary &summary,
                               bool syntheticWeights,
                               StringRef parametersFrom) {
  if (!func.getBody().hasOneBlock())
    return func.emitError()
           << "'" << func.getSymName() << "' must have a single block";
  fs::path dir(dirName.str());
  program::Program prog;
  prog.set_version(rt::kProgramVersion);
  prog.set_producer("mp-opt");
  prog.set_synthetic_weights(syntheticWeights);
  prog.set_parameters_from(parametersFrom.str());
  if (auto source =
          module->getAttrOfType<StringAttr>(MPDialect::getSourceAttrName()))
    prog.set_source(source.str());
  int64_t ranks = 1;
  for (auto grid : module.getOps<shard::GridOp>()) {
    if (ranks != 1 || prog.grid_shape_size())
      return module.emitError() << "only one shard.grid is supported";
    for (int64_t d : grid.getShape()) {
      if (d <= 0)
        return grid.emitError() << "the grid must have a static shape";
      prog.add_grid_shape(d);
      ranks *= d;
    }
  }
  if (auto dp = module->getAttrOfType<IntegerAttr>(
          MPDialect::getDataParallelAttrName()))
    prog.set_data_parallel(dp.getInt());
  if (auto zero =
          module->getAttrOfType<IntegerAttr>(MPDialect::getZeroAttrName()))
    prog.set_zero(static_cast<int32_t>(zero.getInt()));
  summary.ranks = ranks;
  std::vector<rt::SafetensorsWriter> params;
  const bool ownParams = parametersFrom.empty();
  if (ranks == 1) {
    prog.set_parameter_file(ownParams ? "params.safetensors" : "");
    if (ownParams)
      params.emplace_back((dir / "params.safetensors").string());
  } else if (ownParams) {
    prog.set_parameter_file("params.rank{rank}.safetensors");
    for (int64_t r = 0; r < ranks; ++r)
      params.emplace_back(
          (dir / ("params.rank" + std::to_string(r) + ".safetensors"))
              .string());
  }
  // The plan mp-plan-memory recorded, else one made now.
  FailureOr<MemoryPlan> plan = MemoryPlan::isAttached(func)
                                   ? MemoryPlan::read(func)
                                   : MemoryPlan::compute(func);
  if (failed(plan) ||
      failed(Lowering(func, *plan, prog, params, summary).run()))
    return failure();
  rt::Status written = rt::Status::success();
  for (rt::SafetensorsWriter &writer : params)
    if (written && !syntheticWeights)
      written = writer.finish();
  std::string bytes;
  if (written && !prog.SerializeToString(&bytes))
    written = rt::Status::error("cannot serialize the program");
  if (written)
    written = rt::writeFileAtomically((dir / "program.pb").string(),
                                      rt::sealProgram(bytes));
  if (!written)
    return module.emitError() << written.message;
  return success();
}

/// Fails when `module` asks for a training layout (replicas, a sharded
/// optimizer, recompute) but has no train step to apply it to: an artifact
/// would silently run without it.
static LogicalResult checkTrainingOptionsHaveATrainStep(ModuleOp module) {
  std::string asked;
  if (auto dp = module->getAttrOfType<IntegerAttr>(
          MPDialect::getDataParallelAttrName());
      dp && dp.getInt() > 1)
    asked = "dp=" + std::to_string(dp.getInt());
  else if (auto zero =
               module->getAttrOfType<IntegerAttr>(MPDialect::getZeroAttrName());
           zero && zero.getInt() != 0)
    asked = "zero=" + std::to_string(zero.getInt());
  else if (module->hasAttr(MPDialect::getRecomputeAttrName()))
    asked = "recompute";
  if (asked.empty())
    return success();
  if (isTrainStep(module))
    return success();
  return emitError(module.getLoc())
         << asked
         << " is a training option, but the program has no train step: add "
            "--mp-train after --mp-parallelize (or leave the option out for "
            "inference)";
}

LogicalResult mp::writeArtifact(ModuleOp module, StringRef dirName,
                                ArtifactSummary &summary, ModuleOp reference,
                                bool syntheticWeights) {
  if (failed(checkTrainingOptionsHaveATrainStep(module)))
    return failure();
  if (module->hasAttr(MPDialect::getPipelineAttrName()))
    return writePipelineArtifact(module, dirName, summary, syntheticWeights,
                                 reference);
  FailureOr<func::FuncOp> entry = getEntryFunction(module);
  if (failed(entry))
    return failure();
  fs::path dir(dirName.str());
  fs::path tmp;
  if (failed(makeTemporaryDirectory(dir, tmp, module.getLoc())))
    return failure();
  std::error_code ec;
  auto cleanup = [&] { fs::remove_all(tmp, ec); };
  if (failed(writeProgram(module, *entry, tmp.string(), summary,
                          syntheticWeights))) {
    cleanup();
    return failure();
  }
  if (failed(finishArtifact(tmp, dir, module, reference, syntheticWeights))) {
    cleanup();
    return failure();
  }
  return success();
}

//===- Loss.cpp - append the language-model training loss -----------------===//
#include "VocabPadding.h"
#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Transforms/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mp {
#define GEN_PASS_DEF_MPLOSS
#include "mp/Transforms/Passes.h.inc"
} // namespace mp

using namespace mlir;
using namespace mp;

namespace {

StringAttr nameOfArgument(func::FuncOp func, unsigned i) {
  return func.getArgAttrOfType<StringAttr>(i, MPDialect::getNameAttrName());
}

/// The token ids: the integer argument named `input_ids`, else the first
/// integer argument an embedding reads.
BlockArgument findTokenIds(func::FuncOp func) {
  BlockArgument readByEmbedding;
  for (BlockArgument arg : func.getArguments()) {
    if (!isa<IntegerType>(getElementTypeOrSelf(arg.getType())))
      continue;
    StringAttr name = nameOfArgument(func, arg.getArgNumber());
    if (name && name.getValue() == "input_ids")
      return arg;
    bool embedded = llvm::any_of(arg.getUsers(), [&](Operation *user) {
      auto embedding = dyn_cast<EmbeddingOp>(user);
      return embedding && embedding.getIndices() == arg;
    });
    if (embedded && !readByEmbedding)
      readByEmbedding = arg;
  }
  return readByEmbedding;
}

/// The index of the float result shaped `ids + [V]`, or -1.
int64_t findLogits(func::FuncOp func, RankedTensorType ids) {
  for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (!tensor || !isa<FloatType>(tensor.getElementType()) ||
        tensor.getRank() != ids.getRank() + 1 ||
        tensor.getShape().drop_back() != ids.getShape())
      continue;
    return static_cast<int64_t>(i);
  }
  return -1;
}

/// The local logits `local` (this rank's block of what `gather` gathers)
/// with the padding columns, those from `vocab` on, pushed far below any
/// real logit, so that they add nothing to the softmax and get no gradient:
/// a whole constant row of 0 and -1e30, cut to the rank's block. (Finite: a
/// rank whose block is all padding must not subtract -inf from -inf.)
Value maskPadding(OpBuilder &b, Value local, shard::AllGatherOp gather,
                  int64_t vocab) {
  auto localType = cast<RankedTensorType>(local.getType());
  int64_t padded = gather.getType().getShape().back();
  auto elem = cast<FloatType>(localType.getElementType());
  auto wholeType = RankedTensorType::get({padded}, elem);
  APFloat zero = APFloat::getZero(elem.getFloatSemantics());
  APFloat far(-1e30);
  bool lost;
  far.convert(elem.getFloatSemantics(), APFloat::rmNearestTiesToEven, &lost);
  if (far.isInfinity()) // (f16)
    far = APFloat::getLargest(elem.getFloatSemantics(), /*Negative=*/true);
  SmallVector<APFloat> row(padded, zero);
  std::fill(row.begin() + vocab, row.end(), far);
  Location loc = gather.getLoc();
  Value whole =
      ConstantOp::create(b, loc, DenseElementsAttr::get(wholeType, row));
  Value mine = shard::AllSliceOp::create(
      b, loc, RankedTensorType::get({localType.getShape().back()}, elem),
      gather.getGridAttr(), gather.getGridAxesAttr(), whole, b.getIndexAttr(0));
  return AddOp::create(b, loc, local, mine);
}

struct LossPass : public mp::impl::MPLossBase<LossPass> {
  void runOnOperation() override {
    FailureOr<func::FuncOp> entry = getEntryFunction(getOperation());
    if (failed(entry))
      return signalPassFailure();
    func::FuncOp func = *entry;
    BlockArgument ids = findTokenIds(func);
    if (!ids) {
      func.emitError() << "cannot append the loss: no integer argument "
                          "named 'input_ids' or read by an embedding (the "
                          "token ids the labels follow)";
      return signalPassFailure();
    }
    auto idsType = cast<RankedTensorType>(ids.getType());
    int64_t logits = findLogits(func, idsType);
    if (logits < 0) {
      func.emitError() << "cannot append the loss: no float result shaped "
                          "like the token ids plus a vocabulary dimension ("
                       << idsType << " -> [..., V])";
      return signalPassFailure();
    }
    MLIRContext *ctx = &getContext();
    auto nameAttr = [&](StringRef name) {
      return DictionaryAttr::get(ctx,
                                 {NamedAttribute(MPDialect::getNameAttrName(),
                                                 StringAttr::get(ctx, name))});
    };
    unsigned labelsIndex = func.getNumArguments();
    if (failed(func.insertArgument(labelsIndex, idsType, nameAttr("labels"),
                                   func.getLoc())))
      return signalPassFailure();
    Value labels = func.getArgument(labelsIndex);

    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    OpBuilder b(ret);
    Location loc = NameLoc::get(StringAttr::get(ctx, "loss"));
    auto lossType = RankedTensorType::get({}, Float32Type::get(ctx));
    Value logitsValue = ret.getOperand(logits), loss;
    // Logits gathered over the vocabulary (a column-parallel LM head),
    // possibly then cast to fp32 (bf16 storage): the loss of the local
    // slices, cast alike, as Megatron's, never gathering them.
    auto widen = logitsValue.getDefiningOp<CastOp>();
    Value gathered = widen ? widen.getInput() : logitsValue;
    // A vocabulary padded to divide by the ranks: sliced back once gathered.
    auto unpad = gathered.getDefiningOp<SliceOp>();
    if (unpad && !isVocabularyPrefix(unpad))
      unpad = nullptr;
    auto gather = (unpad ? unpad.getInput() : gathered)
                      .getDefiningOp<shard::AllGatherOp>();
    int64_t lastDim =
        cast<RankedTensorType>(logitsValue.getType()).getRank() - 1;
    if (gather && gather.getGatherAxis().getSExtValue() == lastDim &&
        gather.getGridAxes().size() == 1) {
      auto lse =
          RankedTensorType::get(idsType.getShape(), Float32Type::get(ctx));
      Value local = gather.getInput();
      if (widen)
        local = CastOp::create(b, widen.getLoc(),
                               cast<RankedTensorType>(local.getType())
                                   .clone(widen.getType().getElementType()),
                               local);
      if (unpad)
        local =
            maskPadding(b, local, gather, unpad.getType().getShape().back());
      IntegerAttr vocab =
          unpad ? b.getI64IntegerAttr(unpad.getType().getShape().back())
                : IntegerAttr();
      loss = VocabParallelCrossEntropyOp::create(b, loc, lossType, lse, local,
                                                 labels, gather.getGridAttr(),
                                                 vocab)
                 .getLoss();
    } else {
      loss = CrossEntropyOp::create(b, loc, lossType, logitsValue, labels);
    }
    // The loss runs in the pipeline chunk of the logits (the last).
    if (Operation *head = logitsValue.getDefiningOp())
      if (Attribute stage = head->getAttr(MPDialect::getStageAttrName()))
        loss.getDefiningOp()->setAttr(MPDialect::getStageAttrName(), stage);
    func::ReturnOp::create(b, ret.getLoc(), loss);
    ret.erase();
    if (widen && widen->use_empty())
      widen.erase();
    if (unpad && unpad->use_empty())
      unpad.erase();
    if (gather && gather->use_empty())
      gather.erase();
    func.setFunctionType(
        FunctionType::get(ctx, func.getArgumentTypes(), {lossType}));
    func.setAllResultAttrs(ArrayRef<DictionaryAttr>{nameAttr("loss")});
  }
};

} // namespace

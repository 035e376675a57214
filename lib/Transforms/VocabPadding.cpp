//===- VocabPadding.cpp - a vocabulary padded to divide by the ranks ------===//
#include "VocabPadding.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mp;

FailureOr<ParamOp> mp::padParameter(ParamOp param, int64_t axis, int64_t size,
                                    function_ref<bool(Operation *)> mayRead) {
  auto module = param->getParentOfType<ModuleOp>();
  SmallVector<GetParamOp> reads;
  WalkResult walk =
      module.walk([&](GetParamOp get) {
        if (get.getName() != param.getSymName())
          return WalkResult::advance();
        for (Operation *user : get->getUsers())
          if (!mayRead(user)) {
            user->emitError()
                << "the vocabulary of parameter '" << param.getSymName()
                << "' (" << param.getTensorType().getDimSize(axis)
                << ") would be padded to " << size
                << " to divide by the tensor-parallel size, but this op reads "
                   "the parameter too";
            return WalkResult::interrupt();
          }
        reads.push_back(get);
        return WalkResult::advance();
      });
  if (walk.wasInterrupted())
    return failure();
  if (module.lookupSymbol(param.getPartName(axis, 0, size)))
    return param.emitError() << "cannot pad parameter '" << param.getSymName()
                             << "': the name of its padded part is taken";
  ParamOp padded = param.clonePart(axis, 0, size);
  for (GetParamOp get : reads) {
    get.setName(padded.getSymName());
    get.getResult().setType(padded.getTensorType());
  }
  param.erase();
  return padded;
}

Value mp::unpadLogits(OpBuilder &b, Value gathered, int64_t size) {
  int64_t last = cast<RankedTensorType>(gathered.getType()).getRank() - 1;
  b.setInsertionPointAfterValue(gathered);
  return SliceOp::create(b, gathered.getLoc(), gathered, last, 0, size);
}

bool mp::isVocabularyPrefix(SliceOp slice) {
  RankedTensorType in = slice.getInput().getType(), out = slice.getType();
  int64_t last = in.getRank() - 1;
  for (int64_t d = 0; d <= last; ++d)
    if (slice.getStarts()[d] != 0 || slice.getStrides()[d] != 1 ||
        (d != last && out.getDimSize(d) != in.getDimSize(d)))
      return false;
  return true;
}

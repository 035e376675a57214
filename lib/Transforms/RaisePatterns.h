//===- RaisePatterns.h - what mp-raise's pattern files share ----*- C++ -*-===//
//
// Matching helpers used by the patterns of mp-raise in more than one file,
// and the patterns each file adds.
//
//===----------------------------------------------------------------------===//
#ifndef MP_TRANSFORMS_RAISEPATTERNS_H
#define MP_TRANSFORMS_RAISEPATTERNS_H

#include "mp/Dialect/MP/IR/MPOps.h"
#include "mp/Support/Shape.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>

namespace mp {

inline mlir::RankedTensorType tensorType(mlir::Value v) {
  return llvm::cast<mlir::RankedTensorType>(v.getType());
}

inline Shape shapeOf(mlir::Value v) {
  llvm::ArrayRef<int64_t> shape = tensorType(v).getShape();
  return Shape(shape.begin(), shape.end());
}

/// The value of a constant whose elements are all equal.
inline std::optional<double> splatValue(mlir::Value v) {
  mlir::DenseElementsAttr attr;
  if (!mlir::matchPattern(v, mlir::m_Constant(&attr)) || !attr.isSplat())
    return std::nullopt;
  if (llvm::isa<mlir::FloatType>(attr.getElementType()))
    return attr.getSplatValue<llvm::APFloat>().convertToDouble();
  return static_cast<double>(attr.getSplatValue<llvm::APInt>().getSExtValue());
}

/// A constant of `type` whose every element is `value`.
inline mlir::Value splatConstant(mlir::PatternRewriter &rewriter,
                                 mlir::Location loc,
                                 mlir::RankedTensorType type, double value) {
  auto attr = mlir::DenseElementsAttr::get(
      type, rewriter.getFloatAttr(type.getElementType(), value));
  return ConstantOp::create(rewriter, loc, attr);
}

/// `v` reshaped to `shape` (`v` itself when it has that shape already).
inline mlir::Value reshaped(mlir::PatternRewriter &rewriter, mlir::Location loc,
                            mlir::Value v, llvm::ArrayRef<int64_t> shape) {
  if (tensorType(v).getShape() == shape)
    return v;
  auto type =
      mlir::RankedTensorType::get(shape, tensorType(v).getElementType());
  return ReshapeOp::create(rewriter, loc, type, v);
}

/// `v` with its dims permuted (mp.transpose: result dim i is `v`'s dim
/// perm[i]).
inline mlir::Value transposed(mlir::PatternRewriter &rewriter,
                              mlir::Location loc, mlir::Value v,
                              llvm::ArrayRef<int64_t> perm) {
  return TransposeOp::create(rewriter, loc, v,
                             rewriter.getDenseI64ArrayAttr(perm));
}

/// Einsums that are linears (a parameter weight of any rank, viewed 2-D)
/// or batched matmuls (RaiseEinsum.cpp).
void populateRaiseEinsumPatterns(mlir::RewritePatternSet &patterns);

/// Einsums against experts' weights stacked in one parameter [experts, ...]
/// ("bsd,edf->bsef", "bsef,efd->bsed") rewritten as an einsum per expert
/// against its block of the parameter (a part of it, mp.param's
/// part_of/part), which the einsum patterns then make a linear; the
/// results concatenated along the experts (RaiseEinsum.cpp).
void unstackExpertWeights(mlir::ModuleOp module);

/// softmax(q·kᵀ·scale [masked]) · v -> mp.attention (RaiseAttention.cpp).
void populateRaiseAttentionPatterns(mlir::RewritePatternSet &patterns);

/// op(reshape [B, H, ...] -> [B*H, ...]) -> reshape(op batched over B, H)
/// (SinkLeadingMerges.cpp).
void populateSinkLeadingMergePatterns(mlir::RewritePatternSet &patterns);

/// matmul(reshape [P, S, H*K] -> [P, S*H, K], y) -> batched over H, and
/// the reshapes and transposes that then undo each other folded
/// (UnmergeHeadRows.cpp).
void populateUnmergeHeadRowsPatterns(mlir::RewritePatternSet &patterns);

} // namespace mp

#endif // MP_TRANSFORMS_RAISEPATTERNS_H

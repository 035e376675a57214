//===- OpContract.h - the op contract of compiler and runtime ---*- C++ -*-===//
//
// What an artifact's instructions mean, defined once for the artifact writer
// and the runtime: op kinds and names, operand positions (optional ones
// marked), attributes, and the values of enum attributes. The table is
// OpContract.def; the dialect ties its ODS enums to the ones here with
// static_asserts (MPOps.cpp). Plain C++: the runtime links no LLVM.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_OPCONTRACT_H
#define MP_SUPPORT_OPCONTRACT_H

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace mp::contract {

enum class OpKind : uint8_t {
#define MP_OP(KIND, NAME, OPERANDS, FIRST_OPTIONAL, RESULTS) KIND,
#include "mp/Support/OpContract.def"
};

enum class AttrType : uint8_t { Int, Float, Ints, String };

enum class AttrName : uint8_t {
#define MP_ATTR_NAME(IDENT, NAME) IDENT,
#include "mp/Support/OpContract.def"
};

struct AttrInfo {
  AttrName name;
  AttrType type;
};

struct OpInfo {
  const char *name;
  int operands;      // -1: variadic (at least one)
  int firstOptional; // -1: none; optional positions are trailing
  int results;       // -1: variadic (at least one)
  std::vector<AttrInfo> attributes;

  bool variadicOperands() const { return operands < 0; }
  /// The fewest operands an instruction of this op can have.
  int requiredOperands() const {
    return operands < 0 ? 1 : firstOptional < 0 ? operands : firstOptional;
  }
  bool isOptional(int position) const {
    return firstOptional >= 0 && position >= firstOptional;
  }
};

const OpInfo &info(OpKind kind);
/// The kind of the op named `name`; nullopt for a name not in the contract.
std::optional<OpKind> opKindFromName(std::string_view name);
/// The operand whose bytes result `result` of `kind` may be written over
/// (exactly), if any.
std::optional<int> inPlaceOperand(OpKind kind, int result);
/// Whether `kind` is one of the gradient ops a train step's backward holds.
bool isGradient(OpKind kind);
const char *attrName(AttrName name);
const char *attrTypeName(AttrType type);

/// Operand positions of the ops with optional operands.
namespace linear {
enum Operand : int { Input, Weight, Bias };
}
namespace layer_norm {
enum Operand : int { Input, Scale, Bias };
}
namespace add_norm { // add_layer_norm, add_rms_norm
enum Operand : int { Lhs, Rhs, Scale, Bias };
enum Result : int { Sum, Normalized };
} // namespace add_norm
namespace all_reduce_add_norm { // all_reduce_add_*_norm, reduce_scatter_add_*
enum Operand : int { Partial, Residual, Scale, LayerBias, LayerAddend };
constexpr int RMSAddend = 3; // (an rms_norm has no bias)
} // namespace all_reduce_add_norm
namespace attention {
enum Operand : int { Query, Key, Value, Mask };
}
namespace attention_grad {
enum Operand : int { Query, Key, Value, Result, ResultGrad, Mask };
}

/// Enum attribute values ('predicate', 'approximate', 'kind',
/// 'activation'). The dialect's ODS enums have the same values (checked where
/// it is compiled).
enum class ComparePredicate : int32_t { Eq, Ne, Lt, Le, Gt, Ge };
enum class GeluApproximation : int32_t { None, Tanh };
enum class LinearActivation : int32_t { None, Gelu, GeluTanh, Silu };
enum class ReduceKind : int32_t { Sum, Mean, Max, Min };

template <class Enum> constexpr int32_t enumCount();
template <> constexpr int32_t enumCount<ComparePredicate>() { return 6; }
template <> constexpr int32_t enumCount<GeluApproximation>() { return 2; }
template <> constexpr int32_t enumCount<LinearActivation>() { return 4; }
template <> constexpr int32_t enumCount<ReduceKind>() { return 4; }

/// `value` as an `Enum`, or nullopt when it is not one of its values.
template <class Enum> std::optional<Enum> enumFromInt(int64_t value) {
  if (value < 0 || value >= enumCount<Enum>())
    return std::nullopt;
  return static_cast<Enum>(value);
}

} // namespace mp::contract

#endif // MP_SUPPORT_OPCONTRACT_H

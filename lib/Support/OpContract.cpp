//===- OpContract.cpp - the op contract of compiler and runtime -----------===//
#include "mp/Support/OpContract.h"

namespace mp::contract {
namespace {

std::vector<AttrInfo> attributesOf(OpKind kind) {
  std::vector<AttrInfo> attrs;
#define MP_OP_ATTR(KIND, IDENT, TYPE)                                          \
  if (kind == OpKind::KIND)                                                    \
    attrs.push_back({AttrName::IDENT, AttrType::TYPE});
#include "mp/Support/OpContract.def"
  return attrs;
}

std::vector<OpInfo> makeTable() {
  std::vector<OpInfo> table;
#define MP_OP(KIND, NAME, OPERANDS, FIRST_OPTIONAL, RESULTS)                   \
  table.push_back(                                                             \
      {NAME, OPERANDS, FIRST_OPTIONAL, RESULTS, attributesOf(OpKind::KIND)});
#include "mp/Support/OpContract.def"
  return table;
}

const std::vector<OpInfo> &table() {
  static const std::vector<OpInfo> kTable = makeTable();
  return kTable;
}

} // namespace

const OpInfo &info(OpKind kind) { return table()[static_cast<size_t>(kind)]; }

std::optional<int> inPlaceOperand(OpKind kind, int result) {
#define MP_IN_PLACE(KIND, RESULT, OPERAND)                                     \
  if (kind == OpKind::KIND && result == RESULT)                                \
    return OPERAND;
#include "mp/Support/OpContract.def"
  return std::nullopt;
}

bool isGradient(OpKind kind) {
  switch (kind) {
  case OpKind::LinearWeightGrad:
  case OpKind::LayerNormGrad:
  case OpKind::RMSNormGrad:
  case OpKind::GeluGrad:
  case OpKind::AttentionGrad:
  case OpKind::EmbeddingGrad:
  case OpKind::CrossEntropyGrad:
  case OpKind::SliceGrad:
  case OpKind::VocabParallelCrossEntropyGrad: return true;
  default: return false;
  }
}

std::optional<OpKind> opKindFromName(std::string_view name) {
  const std::vector<OpInfo> &ops = table();
  for (size_t i = 0; i < ops.size(); ++i)
    if (name == ops[i].name)
      return static_cast<OpKind>(i);
  return std::nullopt;
}

const char *attrName(AttrName name) {
  static const char *const kNames[] = {
#define MP_ATTR_NAME(IDENT, NAME) NAME,
#include "mp/Support/OpContract.def"
  };
  return kNames[static_cast<size_t>(name)];
}

const char *attrTypeName(AttrType type) {
  switch (type) {
  case AttrType::Int: return "an integer";
  case AttrType::Float: return "a float";
  case AttrType::Ints: return "a list of integers";
  case AttrType::String: return "a string";
  }
  return "?";
}

} // namespace mp::contract

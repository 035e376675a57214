//===- Routing.h - mixture-of-experts routers -------------------*- C++ -*-===//
//
// The router of a mixture of experts, found by what is done with its
// outputs.
//
//===----------------------------------------------------------------------===//
#ifndef MP_ANALYSIS_ROUTING_H
#define MP_ANALYSIS_ROUTING_H

#include "mp/Dialect/MP/IR/MPOps.h"

namespace mp {

/// Whether `linear`'s output features are scores that a top-k or an argmax
/// selects among (a max or min reduction along them, reached through
/// elementwise ops, a softmax and views that keep them last), with fewer
/// outputs than inputs: a mixture-of-experts router. Megatron keeps it
/// whole under tensor parallelism and computes it in fp32.
bool isRouter(LinearOp linear);

} // namespace mp

#endif // MP_ANALYSIS_ROUTING_H

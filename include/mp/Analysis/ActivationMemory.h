//===- ActivationMemory.h - a layer's activations, in closed form -*- C++
//-*-===//
//
// What one transformer layer keeps from its forward for its backward:
// Korthikanti et al. 2022's closed forms (table 2: 16-bit activations,
// 1-byte dropout masks), and the same reconciled with how mp keeps a layer,
// which its memory plan matches exactly. Shared by mp-report (beside the
// plan) and mp-auto-plan (which prices layouts with it).
//
//===----------------------------------------------------------------------===//
#ifndef MP_ANALYSIS_ACTIVATIONMEMORY_H
#define MP_ANALYSIS_ACTIVATIONMEMORY_H

#include <string>

namespace mp {

/// A layer in the papers' notation, and how it is split and recomputed.
struct LayerSetting {
  double s = 0, b = 0, h = 0, a = 0; // sequence, micro-batch, hidden, heads
  double t = 1;                      // tensor-parallel size
  bool sp = false;
  std::string recompute = "none"; // none, selective, full
};

/// Korthikanti's bytes of one layer for `l`, and the form's name.
struct LayerForm {
  double bytes;
  std::string name;
};
LayerForm korthikantiLayer(const LayerSetting &l);

/// The form term by term reconciled with how mp keeps a layer of
/// `activationBytes`-byte elements: fused attention stores no s x s scores,
/// softmax or their dropout mask (its backward recomputes them, as
/// FlashAttention's); dropout masks are drawn again from the seed, not
/// stored; the attention output is kept twice, in the heads' layout for
/// the attention's backward and in the model's for the output projection's
/// weight gradient, unless attention is recomputed.
double keptLayerBytes(const LayerSetting &l, double activationBytes);

} // namespace mp

#endif // MP_ANALYSIS_ACTIVATIONMEMORY_H

//===- ActivationMemory.cpp - a layer's activations, in closed form -------===//
#include "mp/Analysis/ActivationMemory.h"

namespace mp {

LayerForm korthikantiLayer(const LayerSetting &l) {
  const double sbh = l.s * l.b * l.h, t = l.t;
  const double attn = 5.0 * l.a * l.s / l.h;
  if (l.recompute == "full")
    return l.sp ? LayerForm{2 * sbh / t, "full recompute, sp: 2sbh/t"}
                : LayerForm{2 * sbh, "full recompute: 2sbh"};
  if (t == 1)
    return l.recompute == "selective"
               ? LayerForm{34 * sbh, "selective: 34sbh"}
               : LayerForm{sbh * (34 + attn), "sbh(34 + 5as/h)"};
  if (l.recompute == "selective")
    return l.sp ? LayerForm{34 * sbh / t, "tp + sp + selective: 34sbh/t"}
                : LayerForm{sbh * (10 + 24 / t),
                            "tp + selective: sbh(10 + 24/t)"};
  return l.sp ? LayerForm{sbh / t * (34 + attn), "tp + sp: sbh/t(34 + 5as/h)"}
              : LayerForm{sbh * (10 + 24 / t + attn / t),
                          "tp: sbh(10 + 24/t + 5as/(ht))"};
}

double keptLayerBytes(const LayerSetting &l, double activationBytes) {
  // (The forms count 16-bit activations; a program of another width keeps
  // its terms at that width.)
  const double width = activationBytes / 2;
  const double formula = korthikantiLayer(l).bytes;
  if (l.recompute == "full")
    return formula * width;
  const double sbh = l.s * l.b * l.h, t = l.t;
  const bool selective = l.recompute == "selective";
  const double scores = selective ? 0 : 5.0 * l.a * l.s / l.h * sbh / t;
  const double masks = 2 * sbh / (l.sp ? t : 1.0);
  const double outputTwice = selective ? 0 : 2 * sbh / t;
  return (formula - scores - masks + outputTwice) * width;
}

} // namespace mp

//===- TimelineSvg.h - a pipeline timeline as a picture ---------*- C++ -*-===//
//
// One step of a pipeline schedule drawn as SVG: a row per rank, forwards
// and backwards as boxes numbered with their microbatch (lighter for later
// chunks), waits for a transfer hatched, idle time left blank, and the
// bubble fraction under it. The compiler draws the planned timeline from
// the cost model; the runtime will draw the measured one the same way.
//
//===----------------------------------------------------------------------===//
#ifndef MP_SUPPORT_TIMELINESVG_H
#define MP_SUPPORT_TIMELINESVG_H

#include "mp/Support/PipelineSchedule.h"

#include <string>

namespace mp::pipeline {

/// The SVG document of `timeline` (times in `unit`, e.g. "ms"), titled.
std::string timelineSvg(const Timeline &timeline, const Dims &dims,
                        const std::string &title, const std::string &unit);

} // namespace mp::pipeline

#endif // MP_SUPPORT_TIMELINESVG_H

//===- TimelineSvg.cpp - a pipeline timeline as a picture -----------------===//
#include "mp/Support/TimelineSvg.h"

#include <algorithm>
#include <cstdio>

namespace mp::pipeline {

namespace {

constexpr double kLeft = 80, kWidth = 960, kRow = 30, kTop = 40;

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

/// Forward blue, backward orange, later chunks lighter.
std::string fill(ActionKind kind, int64_t chunk, int64_t chunks) {
  const double light = chunks > 1 ? 0.45 * chunk / (chunks - 1) : 0;
  const int base[2][3] = {{78, 121, 167}, {242, 142, 43}};
  const int *rgb = base[kind == ActionKind::Backward];
  std::string out = "rgb(";
  for (int i = 0; i < 3; ++i)
    out += std::to_string(static_cast<int>(rgb[i] + (255 - rgb[i]) * light)) +
           (i < 2 ? "," : ")");
  return out;
}

} // namespace

std::string timelineSvg(const Timeline &timeline, const Dims &dims,
                        const std::string &title, const std::string &unit) {
  const size_t ranks = timeline.ranks.size();
  const double span = timeline.makespan > 0 ? timeline.makespan : 1;
  const double height = kTop + kRow * ranks + 50;
  auto x = [&](double t) { return kLeft + t / span * kWidth; };
  std::string svg =
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
      number(kLeft + kWidth + 20) + "\" height=\"" + number(height) +
      "\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<defs><pattern id=\"wait\" width=\"6\" height=\"6\" "
      "patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#999\" "
      "stroke-width=\"2\"/></pattern></defs>\n"
      "<text x=\"" +
      number(kLeft) + "\" y=\"20\" font-size=\"13\">" + title + "</text>\n";
  for (size_t r = 0; r < ranks; ++r) {
    const double y = kTop + kRow * r;
    svg += "<text x=\"8\" y=\"" + number(y + kRow / 2 + 4) + "\">rank " +
           std::to_string(r) + "</text>\n";
    svg += "<rect class=\"idle\" x=\"" + number(kLeft) + "\" y=\"" +
           number(y + 2) + "\" width=\"" + number(kWidth) + "\" height=\"" +
           number(kRow - 4) + "\" fill=\"#f4f4f4\"/>\n";
    for (const TimedAction &t : timeline.ranks[r]) {
      const Action &a = t.action;
      const bool compute =
          a.kind == ActionKind::Forward || a.kind == ActionKind::Backward;
      if (!compute && t.end <= t.start)
        continue; // a send, or a receive that did not wait
      const std::string what = std::string(actionName(a.kind)) + ", chunk " +
                               std::to_string(a.chunk) + ", microbatch " +
                               std::to_string(a.microbatch) + ": " +
                               number(t.start) + "-" + number(t.end) + " " +
                               unit;
      svg += "<rect class=\"" +
             std::string(!compute                        ? "wait"
                         : a.kind == ActionKind::Forward ? "forward"
                                                         : "backward") +
             "\" x=\"" + number(x(t.start)) + "\" y=\"" + number(y + 2) +
             "\" width=\"" + number(std::max(x(t.end) - x(t.start), 0.5)) +
             "\" height=\"" + number(kRow - 4) + "\" fill=\"" +
             (compute ? fill(a.kind, a.chunk, dims.chunks) : "url(#wait)") +
             "\" stroke=\"white\"><title>" + what + "</title></rect>\n";
      if (compute)
        svg += "<text x=\"" + number((x(t.start) + x(t.end)) / 2) + "\" y=\"" +
               number(y + kRow / 2 + 4) +
               "\" text-anchor=\"middle\" fill=\"white\">" +
               std::to_string(a.microbatch) + "</text>\n";
    }
  }
  const double bottom = kTop + kRow * ranks + 20;
  svg += "<text x=\"" + number(kLeft) + "\" y=\"" + number(bottom) + "\">0 " +
         unit + "</text>\n<text x=\"" + number(kLeft + kWidth) + "\" y=\"" +
         number(bottom) + "\" text-anchor=\"end\">" +
         number(timeline.makespan) + " " + unit + "</text>\n";
  char bubble[96];
  std::snprintf(bubble, sizeof bubble,
                "bubble %.1f%% (forward blue, backward orange, numbers: "
                "microbatches)",
                100 * timeline.bubble);
  svg += "<text class=\"bubble\" x=\"" + number(kLeft) + "\" y=\"" +
         number(bottom + 18) + "\">" + bubble + "</text>\n</svg>\n";
  return svg;
}

} // namespace mp::pipeline

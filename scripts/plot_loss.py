#!/usr/bin/python3
"""Plots the loss curve of an mp-run --train --log file as an SVG (no
plotting library needed).

  scripts/plot_loss.py LOG.jsonl OUT.svg [--title TEXT] [--hline Y:LABEL ...]
"""
import argparse
import json


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("log")
    parser.add_argument("out")
    parser.add_argument("--title", default="training loss")
    parser.add_argument("--hline", action="append", default=[],
                        help="a dashed reference line, Y:LABEL")
    args = parser.parse_args()
    with open(args.log) as f:
        steps = [json.loads(line) for line in f if line.strip()]
    xs = [s["step"] for s in steps]
    ys = [s["loss"] for s in steps]
    lines = [(float(h.split(":", 1)[0]), h.split(":", 1)[1]) for h in args.hline]
    width, height, left, right, top, bottom = 640, 360, 60, 20, 40, 50
    y_max = max(ys + [y for y, _ in lines]) * 1.05
    y_min = 0.0
    x_max = max(xs)

    def px(x):
        return left + (width - left - right) * (x - 1) / max(x_max - 1, 1)

    def py(y):
        return top + (height - top - bottom) * (1 - (y - y_min) / (y_max - y_min))

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'font-family="sans-serif" font-size="12">' % (width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" font-size="14">%s</text>' % (left, args.title)]
    # Axes, ticks and grid.
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
               % (left, height - bottom, width - right, height - bottom))
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>'
               % (left, top, left, height - bottom))
    y = 0.0
    while y <= y_max:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>'
                   % (left, py(y), width - right, py(y)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%g</text>'
                   % (left - 6, py(y) + 4, y))
        y += 1.0
    for i in range(5):
        x = 1 + (x_max - 1) * i / 4
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>'
                   % (px(x), height - bottom + 18, round(x)))
    out.append('<text x="%d" y="%d" text-anchor="middle">step</text>'
               % ((left + width - right) // 2, height - 10))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" '
               'text-anchor="middle">loss (nats per byte)</text>'
               % ((top + height - bottom) // 2, (top + height - bottom) // 2))
    for y, label in lines:
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#c33" '
                   'stroke-dasharray="6 4"/>' % (left, py(y), width - right, py(y)))
        out.append('<text x="%d" y="%.1f" text-anchor="end" fill="#c33">%s</text>'
                   % (width - right - 4, py(y) - 5, label))
    points = " ".join("%.1f,%.1f" % (px(x), py(y)) for x, y in zip(xs, ys))
    out.append('<polyline fill="none" stroke="#1f5fbf" stroke-width="1.5" '
               'points="%s"/>' % points)
    out.append("</svg>")
    with open(args.out, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()

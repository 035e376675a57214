#!/usr/bin/python3
"""Checks mp-report's per-layer activation bytes of GPT-3 175B (bf16,
micro-batch 1, s = 2048) under the layout OPTIONS: the formula it prints
against Korthikanti's closed form computed here, and the plan against the
reconciled formula.

report_layer.py REPORT.json "tp=8 sp=true recompute=selective"
"""
import json
import sys

S, B, H, A = 2048, 1, 12288, 96


def closed_form(t, sp, recompute):
    sbh = S * B * H
    attn = 5 * A * S / H
    if recompute == "full":
        return ("2sbh/t", 2 * sbh / t) if sp else ("2sbh", 2 * sbh)
    if t == 1:
        return ("34sbh", 34 * sbh) if recompute == "selective" else \
            ("sbh(34 + 5as/h)", sbh * (34 + attn))
    if recompute == "selective":
        return ("34sbh/t", 34 * sbh / t) if sp else \
            ("sbh(10 + 24/t)", sbh * (10 + 24 / t))
    return ("sbh/t(34 + 5as/h)", sbh / t * (34 + attn)) if sp else \
        ("sbh(10 + 24/t + 5as/(ht))", sbh * (10 + 24 / t + attn / t))


def main():
    report = json.load(open(sys.argv[1]))["layer"]
    options = dict(o.split("=") for o in sys.argv[2].split())
    t = int(options.get("tp", 1))
    name, value = closed_form(t, options.get("sp") == "true",
                              options.get("recompute", "none"))
    formula = report["activation_bytes_formula"]
    plan, reconciled = report["activation_bytes_plan"], \
        report["activation_bytes_formula_reconciled"]
    print("%s: formula %s %s, plan = reconciled %s" % (
        sys.argv[2], name, "ok" if formula == value else "FAIL %s != %s" % (formula, value),
        "ok" if plan == reconciled else "FAIL %s != %s" % (plan, reconciled)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

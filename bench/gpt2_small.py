#!/usr/bin/python3
"""Benchmark: a GPT-2-small-shaped model (12 layers, hidden 768, 12 heads,
vocab 50304, batch 4 x 128 tokens, forward) run by mp-run on CPU against
PyTorch eager on the same model with the same number of threads, and
against PyTorch's own oneDNN path (torch.utils.mkldnn.to_mkldnn, its
linears as nn.Linear). --model llama runs a Llama-style shape of similar
size instead (12 layers, hidden 768, 12 heads, SwiGLU 2048, RMSNorm, rotary,
vocab 32000, untied head); --model neox the zoo's GPT-NeoX at GPT-2-small's
size (parallel residual blocks, untied head; its --tensor-parallel rows add
"tp=2 sums apart", the attention's and the MLP's sums all-reduced one by one
as before mp-merge-partial-sums). --dtype bf16 runs both in bf16 (mp: parameters
and activations bf16, GEMMs through oneDNN's bf16 kernels with f32
accumulation; PyTorch: the model converted with .to(torch.bfloat16)); its
oneDNN path is fp32-only and is skipped then.

Prints tokens/s of each, the ratios, mp's achieved GFLOP/s and the
machine's sgemm rate (a 2048^3 float32 GEMM through PyTorch), and checks
that all produce the same logits. Not a test: run it by hand.

  /usr/bin/python3 bench/gpt2_small.py [--model gpt2|llama] [--dtype f32|bf16]
                                       [--threads N] [--iterations N]
                                       [--tensor-parallel] [--fusions]
                                       [--rounds N]
"""
import argparse
import atexit
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "models"))
sys.dont_write_bytecode = True
import gen_tiny  # noqa: E402  (the bundled GPT-2 definition, at full size)

CONFIGS = {
    "gpt2": dict(arch="gpt2", layers=12, hidden=768, heads=12, vocab=50304,
                 max_positions=1024, activation="gelu_erf", tied=True, ffn=3072),
    "llama": dict(arch="llama", layers=12, hidden=768, heads=12, kv_heads=12,
                  ffn=2048, vocab=32000, eps=1e-6, rope_theta=10000.0,
                  max_positions=None, tied=False),
    # The zoo's GPT-NeoX (models/gen_zoo.py) at this size: parallel
    # residual blocks, x + attn(ln1(x)) + mlp(ln2(x)).
    "neox": dict(arch="neox", layers=12, hidden=768, heads=12, vocab=50304,
                 ffn=3072, tied=False),
}
LABELS = {"gpt2": "GPT-2-small shape", "llama": "Llama-style shape",
          "neox": "GPT-NeoX-style shape"}
CONFIG = CONFIGS["gpt2"]
BATCH, SEQ = 4, 128


def build_model():
    torch.manual_seed(0)
    if CONFIG["arch"] == "llama":
        model = gen_tiny.Llama(CONFIG).eval()
    elif CONFIG["arch"] == "neox":
        import gen_zoo  # its modules read their sizes from these globals
        gen_zoo.SEQ, gen_zoo.VOCAB = SEQ, CONFIG["vocab"]
        gen_zoo.HIDDEN, gen_zoo.HEADS = CONFIG["hidden"], CONFIG["heads"]
        gen_zoo.LAYERS, gen_zoo.HEAD_DIM = CONFIG["layers"], CONFIG["hidden"] // CONFIG["heads"]
        model = gen_zoo.NeoX().eval()
    else:
        model = gen_tiny.GPT2(CONFIG, tied=True).eval()
    with torch.no_grad():  # GPT-2-like weight scale keeps activations sane
        for p in model.parameters():
            p.mul_(0.1)
    return model


def median_seconds(fn, warmup, iterations):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def sgemm_gflops(threads):
    torch.set_num_threads(threads)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    seconds = median_seconds(lambda: torch.mm(a, b), 2, 5)
    return 2 * n ** 3 / seconds / 1e9


def model_flops():
    """Multiply-add FLOPs of the forward pass (GEMMs and attention)."""
    h, l, v, t = CONFIG["hidden"], CONFIG["layers"], CONFIG["vocab"], BATCH * SEQ
    f = CONFIG["ffn"]
    mlp = 3 * h * f if CONFIG["arch"] == "llama" else 2 * h * f
    per_layer = 2 * t * (h * 3 * h + h * h + mlp) + 2 * 2 * BATCH * SEQ * SEQ * h
    return l * per_layer + 2 * t * h * v


def mkldnn_model(model):
    """PyTorch's own oneDNN path: the model with its Conv1D linears as
    nn.Linear, converted by torch.utils.mkldnn.to_mkldnn (weights reordered
    once); what a PyTorch user would run for CPU inference."""
    import copy
    import torch.utils.mkldnn as mkldnn
    model = copy.deepcopy(model)

    def convert(module):
        for name, child in module.named_children():
            if isinstance(child, gen_tiny.Conv1D):
                nin, nout = child.weight.shape
                lin = torch.nn.Linear(nin, nout, bias=child.bias is not None)
                with torch.no_grad():
                    lin.weight.copy_(child.weight.t())
                    if child.bias is not None:
                        lin.bias.copy_(child.bias)
                setattr(module, name, lin)
            else:
                convert(child)
    convert(model)
    return mkldnn.to_mkldnn(model.eval())


def temporary_workdir(prefix):
    """A temp dir for the model and artifacts, removed when the bench exits
    (the tensor-parallel run's artifacts hold about 6 GB)."""
    work = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    return work


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(CONFIGS), default="gpt2")
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved rounds of --tensor-parallel and "
                             "--fusions (medians are printed)")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--tensor-parallel", action="store_true",
                        help="also time tp=2 and tp=2 with sequence parallelism on 2 "
                             "ranks (mpirun) with half the threads each, against one "
                             "rank with all of them")
    parser.add_argument("--fusions", action="store_true",
                        help="also time the artifact without mp's fusions (none, and "
                             "the linears' epilogues only) against the default, "
                             "interleaved, with each one's profile of the ops they fuse")
    parser.add_argument("--workdir", default=None,
                        help="where the ONNX model and artifacts go, kept (default: a temp dir, removed at exit)")
    args = parser.parse_args()
    global CONFIG
    CONFIG = CONFIGS[args.model]
    mp_opt = os.path.join(args.build, "bin", "mp-opt")
    mp_run = os.path.join(args.build, "bin", "mp-run")

    work = args.workdir or temporary_workdir("mp-bench-")
    os.makedirs(work, exist_ok=True)
    model = build_model()
    ids = torch.randint(0, CONFIG["vocab"], (BATCH, SEQ), generator=torch.Generator().manual_seed(1))
    label = LABELS[args.model]
    onnx_path = os.path.join(work, args.model + "_small.onnx")
    ids_path = os.path.join(work, "input_ids.npy")
    np.save(ids_path, ids.numpy())
    print("exporting %s (%.1fM parameters) to %s ..."
          % (label, sum(p.numel() for p in model.parameters()) / 1e6, onnx_path), flush=True)
    torch.onnx.export(model, (ids,), onnx_path, opset_version=17,
                      input_names=["input_ids"], output_names=["logits"],
                      do_constant_folding=False)

    artifact = os.path.join(work, "artifact")
    start = time.perf_counter()
    precision = [] if args.dtype == "f32" else ["--mp-convert-precision=dtype=" + args.dtype]
    subprocess.run([mp_opt, onnx_path, "--artifact", artifact] + precision, check=True)
    print("compiled in %.1f s" % (time.perf_counter() - start))

    out_dir = os.path.join(work, "out")
    proc = subprocess.run([mp_run, artifact, "--input", "input_ids=" + ids_path,
                           "--threads", str(args.threads), "--warmup", "1",
                           "--iterations", str(args.iterations), "--output-dir", out_dir,
                           "--profile"],
                          check=True, capture_output=True, text=True)
    print(proc.stdout, end="")
    mp_ms = float(re.search(r"([0-9.]+) ms/run \(median", proc.stdout).group(1))
    linear_ms = float(re.search(r"\n  linear +([0-9.]+) ms", proc.stdout).group(1))

    torch.set_num_threads(args.threads)
    with torch.no_grad():
        reference = model(ids)
        if args.dtype == "bf16":  # the fp32 logits stay the reference
            timed = model.to(torch.bfloat16)
            torch_out = timed(ids).float()
            torch_s = median_seconds(lambda: timed(ids), 1, args.iterations)
            mkldnn_ref, mkldnn_s = None, None
        else:
            torch_out = reference
            torch_s = median_seconds(lambda: model(ids), 1, args.iterations)
            fast = mkldnn_model(model)
            mkldnn_ref = fast(ids)
            mkldnn_s = median_seconds(lambda: fast(ids), 1, args.iterations)

    logits = np.load(os.path.join(out_dir, "logits.npy"))
    ref = reference.numpy()
    rel = float(np.max(np.abs(logits - ref)) / np.max(np.abs(ref)))
    rel_torch = float(np.max(np.abs(torch_out.numpy() - ref)) / np.max(np.abs(ref)))
    rel_mkldnn = (float(np.max(np.abs(mkldnn_ref.numpy() - ref)) / np.max(np.abs(ref)))
                  if mkldnn_ref is not None else None)

    tokens = BATCH * SEQ
    mp_tps = tokens / (mp_ms / 1e3)
    torch_tps = tokens / torch_s
    flops = model_flops()
    linear_flops = flops - CONFIG["layers"] * 2 * 2 * BATCH * SEQ * SEQ * CONFIG["hidden"]
    peak = sgemm_gflops(args.threads)
    linear_rate = linear_flops / (linear_ms / 1e3) / 1e9
    print()
    print("%s, batch %d x %d tokens, forward, %s, %d threads"
          % (label, BATCH, SEQ, args.dtype, args.threads))
    print("  PyTorch %s eager:  %8.1f ms/run  %8.0f tokens/s"
          % (torch.__version__, torch_s * 1e3, torch_tps))
    if mkldnn_s:
        print("  PyTorch oneDNN (to_mkldnn): %8.1f ms/run  %8.0f tokens/s"
              % (mkldnn_s * 1e3, tokens / mkldnn_s))
    print("  mp-run (cpu):               %8.1f ms/run  %8.0f tokens/s" % (mp_ms, mp_tps))
    print("  ratio mp/PyTorch eager:  %.2fx tokens/s" % (mp_tps / torch_tps))
    if mkldnn_s:
        print("  ratio mp/PyTorch oneDNN: %.2fx tokens/s" % (mp_tps / (tokens / mkldnn_s)))
    print("  mp achieved:       %.1f GFLOP/s; the f32 sgemm rate: %.1f GFLOP/s (%.0f%%)"
          % (flops / (mp_ms / 1e3) / 1e9, peak, 100 * flops / (mp_ms / 1e3) / 1e9 / peak))
    print("  mp's linears:      %.1f GFLOP/s (%.0f%% of the f32 sgemm rate)"
          % (linear_rate, 100 * linear_rate / peak))
    print("  logits against fp32 PyTorch: max |mp - ref| / max |ref| = %.2e "
          "(PyTorch %s: %.2e%s)" % (rel, args.dtype, rel_torch,
                                   "" if rel_mkldnn is None else
                                   ", PyTorch oneDNN: %.2e" % rel_mkldnn))
    tolerance = 1e-3 if args.dtype == "f32" else 5e-2
    ok = rel < tolerance
    if args.fusions:
        ok = compare_fusions(args, mp_opt, mp_run, onnx_path, ids_path, artifact,
                             work, precision, ref, tolerance) and ok
    if args.tensor_parallel:
        ok = compare_tensor_parallel(args, mp_opt, mp_run, onnx_path, ids_path,
                                     artifact, work, ref, tolerance) and ok
    return 0 if ok else 1


def run_ms(command, env=None):
    """mp-run's median ms/run and its rank-0 profile of collectives."""
    proc = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
    ms = float(re.search(r"([0-9.]+) ms/run \(median", proc.stdout).group(1))
    comm = {}
    # (The fused collectives hold their bias, residual add and norm too.)
    collective = (r"(?:all_reduce|reduce_scatter)_add_(?:layer|rms)_norm|all_reduce|all_gather|"
                  r"reduce_scatter")
    for name, value in re.findall(r"\n  (%s) +([0-9.]+) ms" % collective, proc.stdout):
        comm.setdefault(name, float(value))  # the first profile printed
    return ms, comm


FUSED_OPS = ("add", "layer_norm", "rms_norm", "add_layer_norm", "add_rms_norm",
             "gelu", "silu", "linear", "rotary", "mul", "neg", "slice", "concat")


def compare_fusions(args, mp_opt, mp_run, onnx_path, ids_path, artifact, work,
                    precision, ref, tolerance):
    """The default artifact (every fusion) against ones compiled without
    the rotary and residual-norm fusions, without the rotary one (a model
    with rotary embeddings) and without any fusion: --artifact fuses only
    where the pipeline planned no memory, so naming mp-plan-memory (after
    mp-fuse-epilogues, or alone) leaves the rest out. Runs interleaved."""
    variants = {"no fusion": ["--mp-plan-memory"],
                "epilogues only": ["--mp-fuse-epilogues", "--mp-plan-memory"],
                "all but rotary": ["--mp-fuse-epilogues", "--mp-fuse-residual-norms",
                                   "--mp-plan-memory"]}
    paths = {"every fusion (default)": artifact}
    for name, passes in variants.items():
        paths[name] = os.path.join(work, name.replace(" ", "-"))
        subprocess.run([mp_opt, onnx_path] + precision + passes +
                       ["--artifact", paths[name]], check=True, capture_output=True)
    common = ["--input", "input_ids=" + ids_path, "--threads", str(args.threads),
              "--warmup", "1", "--iterations", str(args.iterations), "--profile"]
    times, profiles, ok = {}, {}, True
    rounds = 5
    for _ in range(rounds):
        for name, path in paths.items():
            out = os.path.join(work, "out-" + os.path.basename(path))
            proc = subprocess.run([mp_run, path, "--output-dir", out] + common,
                                  check=True, capture_output=True, text=True)
            times.setdefault(name, []).append(
                float(re.search(r"([0-9.]+) ms/run \(median", proc.stdout).group(1)))
            profiles.setdefault(name, []).append(dict(
                (op, float(ms)) for op, ms in
                re.findall(r"\n  ([a-z_]+) +([0-9.]+) ms", proc.stdout)))
            logits = np.load(os.path.join(out, "logits.npy"))
            rel = float(np.max(np.abs(logits - ref)) / np.max(np.abs(ref)))
            ok = ok and rel < tolerance
    default = "every fusion (default)"
    median = {name: sorted(t)[rounds // 2] for name, t in times.items()}
    print()
    print("Fusions, same run (%d interleaved rounds, medians; ms/run of the ops "
          "they touch, from --profile):" % rounds)
    for name in paths:
        ops = ", ".join("%s %.1f" % (op, sorted(p.get(op, 0.0) for p in profiles[name])
                                     [rounds // 2])
                        for op in FUSED_OPS
                        if any(op in p for p in profiles[name]) and op != "linear")
        print("  %-24s %8.1f ms/run  default %.3fx faster  (%s)"
              % (name, median[name], median[name] / median[default], ops))
    return ok


def compare_tensor_parallel(args, mp_opt, mp_run, onnx_path, ids_path, artifact,
                            work, ref, tolerance):
    """One rank with every thread against tp=2 (and tp=2 with sequence
    parallelism) on 2 ranks with half the threads each, the runs
    interleaved so that drift in the machine's speed hits all alike."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    precision = [] if args.dtype == "f32" else ["dtype=" + args.dtype]
    # name: (parallelize options, extra environment, extra mp-opt flags);
    # "tp=2 MPI" runs the tp=2 artifact with MPI's own collectives, and
    # "tp=2 gathered" gathers the logits in every run, as before
    # mp-shard-outputs left them sharded until they are written; "tp=2 bias
    # folded" adds the row-parallel biases in the GEMMs rather than after
    # the all-reduces (mp-fold-row-parallel-bias, which --artifact does not
    # run by default; the default's fusions named, then the memory plan).
    folded = ["--mp-fuse-epilogues", "--mp-fold-row-parallel-bias",
              "--mp-fuse-residual-norms", "--mp-fuse-reduced-norms",
              "--mp-shard-outputs", "--mp-plan-memory"]
    # "tp=2 norms whole": without mp-fuse-reduced-norms, every rank adds the
    # bias and residual and normalizes every row after each all-reduce;
    # "tp=2 sp unfused": sequence parallelism's reduce_scatter, norm and
    # all_gather as three steps, not one collective.
    unfused = ["--mp-fuse-epilogues", "--mp-fuse-residual-norms",
               "--mp-shard-outputs", "--mp-plan-memory"]
    layouts = {"tp=2": (["tp=2"], {}, []), "tp=2 sp": (["tp=2", "sp=true"], {}, []),
               "tp=2 MPI": (["tp=2"], {"MP_SHM_COLLECTIVES": "0"}, []),
               "tp=2 gathered": (["tp=2"], {}, ["--mp-gather-outputs"]),
               "tp=2 bias folded": (["tp=2"], {}, folded),
               "tp=2 norms whole": (["tp=2"], {}, unfused),
               "tp=2 sp unfused": (["tp=2", "sp=true"], {}, unfused)}
    # (mp-opt's arguments, extra environment) of each layout.
    commands = {name: (["--mp-parallelize=" + " ".join(options + precision)] + flags, extra)
                for name, (options, extra, flags) in layouts.items()}
    if CONFIG["arch"] == "neox":
        # The passes of --mp-parallelize=tp=2 without mp-merge-partial-sums.
        convert = [] if args.dtype == "f32" else ["--mp-convert-precision=dtype=" + args.dtype]
        commands["tp=2 sums apart"] = (["--mp-raise"] + convert + ["--mp-tensor-parallel=tp=2"], {})

    def artifact_of(name):
        return os.path.join(work, re.sub(r"[^A-Za-z0-9]+", "-", name))

    for name, (arguments, _) in commands.items():
        subprocess.run([mp_opt, onnx_path, "--artifact", artifact_of(name)] + arguments,
                       check=True, capture_output=True)
    per_rank = max(1, args.threads // 2)
    common = ["--input", "input_ids=" + ids_path, "--warmup", "1",
              "--iterations", str(args.iterations), "--profile"]
    times = {"1 rank": []}
    comm = {}
    ok = True
    rounds = max(1, args.rounds)
    for _ in range(rounds):
        single, _ = run_ms([mp_run, artifact, "--threads", str(args.threads)] + common)
        times["1 rank"].append(single)
        for name, (_, extra) in commands.items():
            path = artifact_of(name)
            out = os.path.join(work, "out-" + os.path.basename(path))
            ms, comm[name] = run_ms(["mpirun", "-np", "2", mp_run, path, "--threads",
                                     str(per_rank), "--output-dir", out] + common,
                                    dict(env, **extra))
            times.setdefault(name, []).append(ms)
            logits = np.load(os.path.join(out, "logits.npy"))
            rel = float(np.max(np.abs(logits - ref)) / np.max(np.abs(ref)))
            ok = ok and rel < tolerance
    median = {name: sorted(t)[rounds // 2] for name, t in times.items()}
    print()
    print("Tensor parallelism, same run (%d interleaved rounds, medians; 'MPI': the\n"
          "ranks' collectives through MPI instead of each other's memory; the\n"
          "range is of each round's ratio to the 1-rank run beside it):" % rounds)
    print("  1 rank x %d threads:               %8.1f ms/run" % (args.threads, median["1 rank"]))
    for name in commands:
        collectives = ", ".join("%s %.1f ms" % item for item in sorted(comm[name].items()))
        paired = sorted(a / b for a, b in zip(times["1 rank"], times[name]))
        print("  %-13s 2 ranks x %d thread%s: %8.1f ms/run  %.2fx the 1-rank run "
              "(rounds %.2f-%.2fx)  (rank 0: %s)"
              % (name, per_rank, "" if per_rank == 1 else "s", median[name],
                 median["1 rank"] / median[name], paired[0], paired[-1], collectives))
    return ok


if __name__ == "__main__":
    sys.exit(main())

//===- mp-run.cpp - run an mp artifact ------------------------------------===//
//
// mp-run DIR --input NAME=FILE.npy ... [--output-dir OUT] [--threads N]
//            [--warmup N] [--iterations N]
//
// Loads the artifact, checks the inputs against what it expects, runs it,
// writes every output as OUT/NAME.npy and prints timing and throughput.
// Links no LLVM/MLIR.
//
//===----------------------------------------------------------------------===//
#include "mp/Runtime/Executable.h"
#include "mp/Runtime/Kernels.h"
#include "mp/Runtime/Npy.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <sys/stat.h>
#include <vector>

using namespace mp::rt;

namespace {

const char *kUsage = R"(usage: mp-run ARTIFACT_DIR [options]

Runs an artifact written by `mp-opt MODEL.onnx --artifact ARTIFACT_DIR`.

options:
  --input NAME=FILE.npy   an input (repeat for each; --input NAME FILE also works)
  --output-dir DIR        write each output as DIR/NAME.npy
  --threads N             threads for kernels and BLAS (default: all cores)
  --warmup N              untimed runs before timing (default 1)
  --iterations N          timed runs (default 3)
  --profile               print the time spent in each op kind
  --quiet                 print only errors
  --help                  this text
)";

struct Options {
  std::string artifact, outputDir;
  std::vector<std::pair<std::string, std::string>> inputs;
  int threads = 0, warmup = 1, iterations = 3;
  bool quiet = false, profile = false;
};

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "mp-run: error: %s\n", message.c_str());
  std::exit(1);
}

int parseCount(const std::string &flag, const char *value, int min) {
  char *end = nullptr;
  long n = std::strtol(value, &end, 10);
  if (!*value || *end || n < min || n > 1000000)
    die(flag + " expects an integer >= " + std::to_string(min) + ", got '" +
        value + "'");
  return static_cast<int>(n);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc)
        die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--input") {
      std::string v = value();
      size_t eq = v.find('=');
      if (eq != std::string::npos)
        o.inputs.push_back({v.substr(0, eq), v.substr(eq + 1)});
      else
        o.inputs.push_back({v, value()});
    } else if (arg.rfind("--input=", 0) == 0) {
      std::string v = arg.substr(8);
      size_t eq = v.find('=');
      if (eq == std::string::npos)
        die("--input expects NAME=FILE.npy, got '" + v + "'");
      o.inputs.push_back({v.substr(0, eq), v.substr(eq + 1)});
    } else if (arg == "--output-dir") {
      o.outputDir = value();
    } else if (arg == "--threads") {
      o.threads = parseCount(arg, value(), 1);
    } else if (arg == "--warmup") {
      o.warmup = parseCount(arg, value(), 0);
    } else if (arg == "--iterations") {
      o.iterations = parseCount(arg, value(), 1);
    } else if (arg == "--profile") {
      o.profile = true;
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if (!arg.empty() && arg[0] == '-') {
      die("unknown option '" + arg + "' (see --help)");
    } else if (o.artifact.empty()) {
      o.artifact = arg;
    } else {
      die("unexpected argument '" + arg + "' (see --help)");
    }
  }
  if (o.artifact.empty())
    die("no artifact directory given (see --help)");
  return o;
}

std::string describe(const IOSpec &spec) {
  return spec.name + " (" + dtypeName(spec.dtype) + " " +
         formatShape(spec.shape) + ")";
}

/// Reads the inputs in the artifact's order, with errors naming what was
/// expected.
std::vector<HostBuffer> readInputs(const Options &o, const Executable &exe) {
  std::map<std::string, std::string> given;
  for (const auto &[name, file] : o.inputs) {
    bool known = std::any_of(exe.inputs().begin(), exe.inputs().end(),
                             [&](const IOSpec &s) { return s.name == name; });
    if (!known) {
      std::string expected;
      for (const IOSpec &s : exe.inputs())
        expected += (expected.empty() ? "" : ", ") + describe(s);
      die("the artifact has no input '" + name + "' (inputs: " + expected + ")");
    }
    given[name] = file;
  }
  std::vector<HostBuffer> buffers;
  for (const IOSpec &spec : exe.inputs()) {
    auto it = given.find(spec.name);
    if (it == given.end())
      die("input " + describe(spec) + " was not given: pass --input " +
          spec.name + "=FILE.npy");
    HostBuffer buffer;
    if (Status s = readNpy(it->second, buffer); !s)
      die("input '" + spec.name + "': " + s.message);
    if (buffer.dtype != spec.dtype || buffer.shape != spec.shape)
      die("input '" + spec.name + "' expects " + dtypeName(spec.dtype) + " " +
          formatShape(spec.shape) + " but '" + it->second + "' holds " +
          dtypeName(buffer.dtype) + " " + formatShape(buffer.shape));
    buffers.push_back(std::move(buffer));
  }
  return buffers;
}

/// Tokens per run: the element count of the first integer input (token ids).
int64_t tokensPerRun(const Executable &exe) {
  for (const IOSpec &s : exe.inputs())
    if (s.dtype == DType::I64 || s.dtype == DType::I32)
      return Tensor{nullptr, s.dtype, s.shape}.numel();
  return 0;
}

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  cpu::setNumThreads(o.threads);

  double t0 = seconds();
  std::unique_ptr<Executable> exe;
  if (Status s = Executable::load(o.artifact, exe); !s)
    die(s.message);
  double loadSeconds = seconds() - t0;
  std::vector<HostBuffer> inputBuffers = readInputs(o, *exe);
  std::vector<Tensor> inputs, outputs;
  for (HostBuffer &b : inputBuffers)
    inputs.push_back(b.view());

  if (!o.quiet)
    std::printf("mp-run: %s: %zu instructions, arena %.1f MiB, parameters "
                "%.1f MiB, loaded in %.2f s, %d threads\n",
                o.artifact.c_str(), exe->numInstructions(),
                exe->arenaBytes() / 1048576.0, exe->parameterBytes() / 1048576.0,
                loadSeconds, cpu::getNumThreads());
  for (int i = 0; i < o.warmup; ++i)
    if (Status s = exe->run(inputs, outputs); !s)
      die(s.message);
  std::vector<double> times;
  exe->enableProfiling(o.profile);
  for (int i = 0; i < o.iterations; ++i) {
    double start = seconds();
    if (Status s = exe->run(inputs, outputs); !s)
      die(s.message);
    times.push_back(seconds() - start);
  }
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2];
  if (!o.quiet) {
    std::printf("mp-run: %d runs: %.3f ms/run (median, min %.3f ms)",
                o.iterations, median * 1e3, times.front() * 1e3);
    if (int64_t tokens = tokensPerRun(*exe))
      std::printf(", %.0f tokens/s", tokens / median);
    if (exe->flopsPerRun() > 0)
      std::printf(", %.1f GFLOP/s", exe->flopsPerRun() / median / 1e9);
    std::printf("\n");
  }

  if (o.profile) {
    double total = 0;
    for (const auto &row : exe->profile())
      total += std::get<1>(row);
    std::printf("mp-run: profile over %d runs (op, ms/run, share, calls/run):\n",
                o.iterations);
    for (const auto &[op, secs, calls] : exe->profile())
      std::printf("  %-14s %9.3f ms %5.1f%% %6lld\n", op.c_str(),
                  secs * 1e3 / o.iterations, total > 0 ? 100 * secs / total : 0.0,
                  static_cast<long long>(calls / o.iterations));
  }

  if (!o.outputDir.empty()) {
    mkdir(o.outputDir.c_str(), 0755);
    struct stat st;
    if (stat(o.outputDir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      die("cannot create output directory '" + o.outputDir + "'");
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string path = o.outputDir + "/" + exe->outputs()[i].name + ".npy";
      if (Status s = writeNpy(path, outputs[i]); !s)
        die(s.message);
      if (!o.quiet)
        std::printf("mp-run: wrote %s (%s %s)\n", path.c_str(),
                    dtypeName(outputs[i].dtype),
                    formatShape(outputs[i].shape).c_str());
    }
  }
  return 0;
}

# -*- Python -*-
# lit configuration for mp: FileCheck tests of the dialect, importer and passes.
import os

import lit.formats

config.name = "mp"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".mlir", ".test"]
config.excludes = ["Inputs", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.mp_obj_root, "test")

config.environment["PATH"] = os.pathsep.join(
    [config.mp_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", "")]
)
config.substitutions.append(("%mp_models", os.path.join(config.mp_src_root, "models")))
config.substitutions.append(("%mp_src", config.mp_src_root))
config.substitutions.append(("%mp_tools", config.mp_tools_dir))
config.substitutions.append(("%python", config.python_executable))

# Multi-rank tests run mpirun as root on machines with fewer cores than ranks.
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"

# GPU-dependent expectations: "no-gpu" where nvidia-smi lists no device,
# else "gpu", and "multi-gpu" with two or more (NCCL needs one per rank).
import subprocess
try:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                            text=True, timeout=20)
    gpus = sum(line.startswith("GPU ") for line in listed.stdout.splitlines()
               ) if listed.returncode == 0 else 0
except (OSError, subprocess.TimeoutExpired):
    gpus = 0
if gpus == 0:
    config.available_features.add("no-gpu")
else:
    config.available_features.add("gpu")
if gpus >= 2:
    config.available_features.add("multi-gpu")

# "cuda-backend" where this build made the CUDA backend plugin (libmp-cuda.so).
if config.mp_cuda_backend.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("cuda-backend")
# "nvidia-device-nodes" where mp-run's default-device check sees a GPU
# (Device.cpp: nvidiaDeviceNodesPresent), so it loads the CUDA backend.
if any(os.path.exists(n) for n in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg")):
    config.available_features.add("nvidia-device-nodes")

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

# GPU-dependent expectations: "no-gpu" where nvidia-smi lists no device.
import subprocess
try:
    has_gpu = subprocess.run(["nvidia-smi", "-L"], capture_output=True,
                             timeout=20).returncode == 0
except (OSError, subprocess.TimeoutExpired):
    has_gpu = False
if not has_gpu:
    config.available_features.add("no-gpu")

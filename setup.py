"""What pyproject.toml cannot yet say stably: the simulator's runner in C (autoplan/sim/_runner.c), an optional
extension. Where no C compiler is found the install goes on without it and autoplan runs the same loop in Python
(autoplan/sim/pipeline.py, sim/fluid.py), to the same bits, several times slower on long pipelines."""

import sys

from setuptools import Extension, setup

# the same floats as Python's: IEEE operations one by one, never a fused multiply-add (GCC contracts by default
# where the target has FMA, as on aarch64)
flags = [] if sys.platform == "win32" else ["-ffp-contract=off"]
setup(ext_modules=[Extension("autoplan.sim._runner", ["autoplan/sim/_runner.c"], optional=True,
                             extra_compile_args=flags)])

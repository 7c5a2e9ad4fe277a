"""What pyproject.toml cannot yet say stably: two optional C extensions, the simulator's runner
(autoplan/sim/_runner.c) and link sharing's tally (autoplan/hardware/_links.c). Where no C compiler is found the
install goes on without them and autoplan runs the same loops in Python and numpy (sim/pipeline.py, sim/fluid.py,
hardware/topology.py), to the same bits, several times slower on long pipelines."""

import sys

from setuptools import Extension, setup

# the same floats as Python's: IEEE operations one by one, never a fused multiply-add (GCC contracts by default
# where the target has FMA, as on aarch64)
flags = [] if sys.platform == "win32" else ["-ffp-contract=off"]
setup(ext_modules=[Extension(name, [source], optional=True, extra_compile_args=flags)
                   for name, source in (("autoplan.sim._runner", "autoplan/sim/_runner.c"),
                                        ("autoplan.hardware._links", "autoplan/hardware/_links.c"))])

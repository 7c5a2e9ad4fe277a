"""The layer rule of ARCHITECTURE.md, read from the source with ``ast`` (imports inside functions count too).

Data flows one way: specs → hardware → families → sim → search → analysis (validate, inspect) → report → cli. A
module may import its own layer and the layers below it, never one above; a model family's package imports the
family interface (``families.base``, ``families.costs``) and its own package, never another family nor the
registry; the engine imports nothing from autoplan; search reaches the simulator only through ``evaluate``
(``autoplan.sim.simulate``) and its trace writer; each heavy third-party package stays in the one module that
needs it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "autoplan"

LAYERS = {
    "autoplan.errors": 0, "autoplan.files": 0,
    "autoplan.specs": 1,
    "autoplan.hardware": 2,
    "autoplan.families": 3,
    "autoplan.sim": 4,
    "autoplan.search": 5,
    "autoplan.validate": 6, "autoplan.inspect": 6, "autoplan.calibrate": 6,
    "autoplan.report": 7,
    "autoplan.cli": 8, "autoplan.__main__": 8, "autoplan": 8,
}
"""Each top-level part of the package and its layer (lower layers never import higher ones)."""

NO_AUTOPLAN_IMPORTS = ("autoplan.sim.engine", "autoplan.errors", "autoplan.files")
"""Modules that import nothing from autoplan at all."""

SIM_SEEN_FROM_SEARCH = ("autoplan.sim.simulate", "autoplan.sim.trace")
"""The only simulator modules search may import: it scores a plan with ``evaluate`` and nothing else."""

CONFINED = {"optuna": "autoplan.search.study", "ray": "autoplan.search.executors",
            "networkx": "autoplan.hardware.topology", "plotly": "autoplan.report.html",
            "torch": "autoplan.calibrate.profile"}
"""Third-party packages and the one module allowed to import each."""


FAMILY_INTERFACE = ("autoplan.families.base", "autoplan.families.costs")
"""What a family package may import of ``autoplan.families`` besides its own package."""
FAMILY_PACKAGES = tuple(sorted(f"autoplan.families.{p.parent.name}" for p in (PACKAGE / "families").glob("*/__init__.py")))
"""The model-family packages (``autoplan/families/<name>/``)."""


def family_of_module(name: str) -> str | None:
    """The family package ``name`` belongs to, or None."""
    return next((f for f in FAMILY_PACKAGES if name == f or name.startswith(f + ".")), None)


def module_name(path: Path) -> str:
    """``autoplan/search/run.py`` → ``autoplan.search.run`` (a package's ``__init__`` is the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import in ``source``, at any depth; relative imports resolved."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[:-node.level]
                base = ".".join(anchor + ([base] if base else []))
            found.append((node.lineno, base))
            if base == "autoplan" or (node.level and not node.module):
                found += [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return found


def layer_of(name: str) -> int:
    """The layer of an autoplan module: its longest prefix in LAYERS."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in LAYERS:
            return LAYERS[".".join(parts[:n])]
    raise KeyError(f"{name} is in no layer: add it to LAYERS in tests/test_architecture.py")


def problems(module: str, source: str) -> list[str]:
    """Every import of ``module`` that breaks the rules above, as 'module:line imports X (why)'."""
    out = []
    for line, target in imports(source, module):
        where = f"{module}:{line} imports {target}"
        top = target.split(".")[0]
        if top in CONFINED and module != CONFINED[top]:
            out.append(f"{where} ({top} belongs in {CONFINED[top]} only)")
        if top != "autoplan" or target == "autoplan" and module == "autoplan":
            continue
        if module in NO_AUTOPLAN_IMPORTS:
            out.append(f"{where} ({module} imports nothing from autoplan)")
        elif layer_of(target) > layer_of(module):
            out.append(f"{where} (a lower layer imports a higher one)")
        elif (module.startswith("autoplan.search") and target.startswith("autoplan.sim")
              and not target.startswith(SIM_SEEN_FROM_SEARCH)):
            out.append(f"{where} (search reaches the simulator through evaluate only)")
        elif family_of_module(module) and target.startswith("autoplan.families") and not (
                target.startswith(FAMILY_INTERFACE) or family_of_module(target) == family_of_module(module)):
            out.append(f"{where} (a family imports only the family interface and its own package)")
        elif module.startswith(FAMILY_INTERFACE) and family_of_module(target):
            out.append(f"{where} (the family interface imports no family)")
    return out


def package_sources() -> list[tuple[str, str]]:
    """(module name, source) of every module of the package."""
    return [(module_name(p), p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))]


def test_the_package_keeps_the_layer_rule() -> None:
    found = [p for module, source in package_sources() for p in problems(module, source)]
    assert found == [], "\n".join(found)


def test_every_module_is_in_a_layer() -> None:
    for module, _ in package_sources():
        layer_of(module)


@pytest.mark.parametrize("module, source", [
    ("autoplan.hardware.compute", "from autoplan.sim.workload import lower\n"),
    ("autoplan.specs.model", "def f():\n    from autoplan.search import run\n"),
    ("autoplan.sim.engine", "from autoplan.specs import ModelSpec\n"),
    ("autoplan.sim.workload", "import autoplan.report.html\n"),
    ("autoplan.search.exhaustive", "from autoplan.sim.workload import lower\n"),
    ("autoplan.families.transformer.memory", "from ...search import study\n"),
    ("autoplan.report.runs", "def f():\n    import optuna\n"),
    ("autoplan.cli", "import ray\n"),
    ("autoplan.sim.simulate", "from networkx import DiGraph\n"),
    ("autoplan.hardware.network", "from autoplan.families.costs import StepCosts\n"),
    ("autoplan.specs.plan", "from autoplan.families.strategy import Strategy\n"),
    ("autoplan.families.cnn.family", "from autoplan.families.transformer.layer import layer_compute\n"),
    ("autoplan.families.dlrm.family", "def f():\n    from autoplan.families.strategy import Strategy\n"),
    ("autoplan.families.transformer.moe", "from autoplan.families import registry\n"),
    ("autoplan.families.costs", "from autoplan.families.cnn.spec import CNNSpec\n"),
])
def test_a_planted_violation_is_found(module: str, source: str) -> None:
    assert problems(module, source)


@pytest.mark.parametrize("module, source", [
    ("autoplan.sim.workload", "from autoplan.hardware import compute\nfrom autoplan.families.strategy import Strategy\n"),
    ("autoplan.search.run", "from autoplan.sim.simulate import evaluate\n"),
    ("autoplan.cli", "def f():\n    from autoplan.report.html import write_report\n"),
    ("autoplan.search.study", "import optuna\n"),
    ("autoplan.families.transformer.memory", "from .layer import LayerCompute\n"),
    ("autoplan.families.cnn.family", "from autoplan.families.costs import StageMemory\nfrom autoplan.hardware import network\n"),
    ("autoplan.families.dlrm.export", "from autoplan.families.dlrm.spec import dlrm_of\n"),
    ("autoplan.families.registry", "from autoplan.families.cnn.family import FAMILIES\n"),
])
def test_an_allowed_import_passes(module: str, source: str) -> None:
    assert problems(module, source) == []


def import_graph() -> dict[str, set[str]]:
    """Module → the autoplan modules it imports (at any depth; a package import counts as its ``__init__``)."""
    sources = dict(package_sources())
    graph: dict[str, set[str]] = {m: set() for m in sources}
    for module, source in sources.items():
        for _, target in imports(source, module):
            while target and target not in sources:
                target = target.rpartition(".")[0]      # `from autoplan.hardware import compute` names a module
            if target and target != module:
                graph[module].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles of ``graph``, each as the modules around it (Tarjan's strongly connected components)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def test_a_planted_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]

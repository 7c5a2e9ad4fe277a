"""Vendor the names each framework accepts (Megatron-LM's argument parser, torchtitan's config dataclasses,
DeepSpeed's ds_config keys) into ``tests/fixtures/frameworks/*.json``, read from snapshots of their source.

CI has no network, so ``tests/families/transformer/test_export_frameworks.py`` checks every emitted flag and field
against these extracts. Re-run after updating a snapshot (a git directory with no work tree is fine):

    python tools/vendor_frameworks.py --megatron DIR --torchtitan DIR --deepspeed DIR

Everything is read with ``ast`` from the source text, nothing is imported (the frameworks need torch and CUDA):
Megatron-LM's literal ``add_argument`` calls plus the flags its ``ArgumentGroupFactory`` derives from config
dataclasses (megatron/training/argument_utils.py: ``--name``; a bool defaulting to anything but False becomes
``--no-name``/``--disable-name``; ``argparse_meta`` overrides), torchtitan's ``Config`` dataclass fields and the
names its modules define, DeepSpeed's config key constants and the fields (and aliases) of its pydantic sections.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "frameworks"

TORCH_SCHEDULES = ["1F1B", "Interleaved1F1B", "GPipe", "LoopedBFS", "InterleavedZeroBubble",
                   "PipelineScheduleSingle", "PipelineScheduleMulti", "ZBVZeroBubble", "DualPipeV"]
"""The keys of ``get_schedule_class`` in torch/distributed/pipelining/schedules.py (pytorch/pytorch
0138610331c90b8053a0bfc6df0175b200a1cad2), the names torchtitan's ``pipeline_parallel_schedule`` takes; copied by
hand: the PyTorch snapshot (4 GB) is too large to fetch here."""


class Repo:
    """A git directory read at HEAD (``git show``), or a checked-out folder."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self.bare = not (self.path / ".git").exists() and (self.path / "HEAD").exists()

    def git(self, *args: str) -> str:
        flag = ["--git-dir", str(self.path)] if self.bare else ["-C", str(self.path)]
        return subprocess.run(["git", *flag, *args], check=True, capture_output=True, text=True).stdout

    @property
    def commit(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def read(self, rel: str) -> str:
        return self.git("show", f"HEAD:{rel}")

    def files(self, under: str) -> list[str]:
        return [f for f in self.git("ls-tree", "-r", "--name-only", "HEAD", under).split() if f.endswith(".py")]


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return None


def _classes(tree: ast.AST) -> dict[str, ast.ClassDef]:
    """Every class of a module by dotted name (nested ones as ``Outer.Config``)."""
    out: dict[str, ast.ClassDef] = {}

    def walk(body: list, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                out[prefix + node.name] = node
                walk(node.body, prefix + node.name + ".")
    walk(tree.body, "")
    return out


# ------------------------------------------------------------------------------------------------ Megatron-LM

def _unwrap_optional(ann: ast.AST) -> ast.AST:
    """``X`` of ``Optional[X]`` or ``X | None`` (argument_utils.py unwraps them the same way)."""
    if isinstance(ann, ast.Subscript) and ast.unparse(ann.value).endswith("Optional"):
        return ann.slice
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr) and _literal(ann.right) is None \
            and isinstance(ann.right, ast.Constant):
        return ann.left
    return ann


def _literal_choices(ann: ast.AST) -> list | None:
    """The values of a ``Literal[...]`` annotation (None for other types)."""
    if isinstance(ann, ast.Subscript) and ast.unparse(ann.value).endswith("Literal"):
        got = _literal(ann.slice)
        return [got] if not isinstance(got, tuple) else list(got)
    return None


def _field_flags(node: ast.AnnAssign) -> tuple[list[str], list | None] | None:
    """The flags ArgumentGroupFactory makes of one dataclass field (argument_utils.py), and its choices."""
    name = node.target.id
    ann = ast.unparse(node.annotation)
    if ann.startswith(("ClassVar", "typing.ClassVar")):
        return None
    default, meta = node.value, {}
    if isinstance(default, ast.Call) and ast.unparse(default.func).endswith("field"):
        kws = {k.arg: k.value for k in default.keywords}
        if _literal(kws.get("init", ast.Constant(True))) is False:
            return None
        default = kws.get("default")
        meta_node = kws.get("metadata")
        if isinstance(meta_node, ast.Dict):
            for k, v in zip(meta_node.keys, meta_node.values):
                if _literal(k) == "argparse_meta" and isinstance(v, ast.Dict):
                    meta = {_literal(a): b for a, b in zip(v.keys, v.values)}
    flag = "--" + name.replace("_", "-")
    choices = None
    bare = _unwrap_optional(node.annotation)
    if ast.unparse(bare) == "bool":
        value = _literal(default) if default is not None else None
        flags = [flag] if value is False else ["--no-" + flag[2:], "--disable-" + flag[2:]]
    else:
        flags = [flag]
        choices = _literal_choices(bare)
    if "arg_names" in meta:
        flags = list(_literal(meta["arg_names"]) or flags)
    if "choices" in meta:
        choices = _literal(meta["choices"])
    return flags, choices


def _megatron_classes(repo: Repo) -> dict[str, tuple[ast.ClassDef, list[str]]]:
    """Every class under megatron/ by simple name: (node, base names)."""
    out = {}
    for rel in repo.files("megatron"):
        try:
            tree = ast.parse(repo.read(rel))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, (node, [ast.unparse(b).split(".")[-1] for b in node.bases]))
    return out


def _dataclass_fields(name: str, classes: dict) -> list[ast.AnnAssign]:
    """Fields of dataclass ``name``, its bases' first (dataclasses.fields order)."""
    if name not in classes:
        return []
    node, bases = classes[name]
    out: dict[str, ast.AnnAssign] = {}
    for base in bases:
        for f in _dataclass_fields(base, classes):
            out[f.target.id] = f
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out[stmt.target.id] = stmt
    return list(out.values())


def megatron(repo: Repo) -> dict:
    """Megatron-LM's pretrain_gpt.py arguments: {flag: choices or None}."""
    sources = ["megatron/training/arguments.py", "pretrain_gpt.py"]
    args: dict[str, list | None] = {}
    classes = _megatron_classes(repo)
    for rel in sources:
        tree = ast.parse(repo.read(rel))
        lists = {t.id: _literal(n.value) for n in ast.walk(tree) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Name) and isinstance(n.value, ast.List)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = ast.unparse(node.func)
            kws = {k.arg: k.value for k in node.keywords}
            if func.endswith("add_argument"):
                names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
                choices = _literal(kws["choices"]) if "choices" in kws else None
                for n in names:
                    args[n] = list(choices) if isinstance(choices, (list, tuple)) else None
                if "action" in kws and "BooleanOptionalAction" in ast.unparse(kws["action"]):
                    args.update({"--no-" + n[2:]: None for n in names})
            elif func.endswith("ArgumentGroupFactory") and node.args:
                cls = ast.unparse(node.args[0])
                exclude = kws.get("exclude")
                skip = set(lists.get(exclude.id, []) if isinstance(exclude, ast.Name) else _literal(exclude) or [])
                for f in _dataclass_fields(cls, classes):
                    made = None if f.target.id in skip else _field_flags(f)
                    if made:
                        args.update({flag: made[1] for flag in made[0]})
    return {"repo": "NVIDIA/Megatron-LM", "commit": repo.commit, "sources": sources,
            "arguments": dict(sorted(args.items()))}


# ------------------------------------------------------------------------------------------------- torchtitan

TITAN_FILES = ("torchtitan/config/configs.py", "torchtitan/config/configurable.py", "torchtitan/trainer.py",
               "torchtitan/distributed/activation_checkpoint.py", "torchtitan/components/quantization/float8.py",
               "torchtitan/components/quantization/mx.py", "torchtitan/components/quantization/__init__.py",
               "torchtitan/models/llama3/__init__.py", "torchtitan/models/llama3/model.py",
               "torchtitan/models/llama3/config_registry.py", "torchtitan/models/deepseek_v3/config_registry.py",
               "torchtitan/models/qwen3/config_registry.py", "torchtitan/models/common/__init__.py",
               "torchtitan/models/common/config_utils.py", "torchtitan/models/common/decoder.py",
               "torchtitan/models/common/embedding.py", "torchtitan/models/common/linear.py",
               "torchtitan/models/common/nn_modules.py", "torchtitan/models/common/rope.py",
               "torchtitan/models/common/feed_forward.py", "torchtitan/models/common/attention.py",
               "torchtitan/components/loss.py")


def _class_fields(node: ast.ClassDef) -> dict[str, list | None]:
    out: dict[str, list | None] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out[stmt.target.id] = _literal_choices(_unwrap_optional(stmt.annotation))
    return out


def torchtitan(repo: Repo) -> dict:
    """torchtitan's config classes (fields, with the choices of Literal ones) and each module's public names."""
    classes: dict[str, dict] = {}
    bases: dict[str, list[str]] = {}
    modules: dict[str, dict[str, list[str]]] = {}
    for rel in TITAN_FILES:
        tree = ast.parse(repo.read(rel))
        module = rel[:-3].replace("/", ".").removesuffix(".__init__")
        names: dict[str, list[str]] = {}
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                names[node.name] = [a.arg for a in (node.args.args + node.args.kwonlyargs)] if isinstance(
                    node, ast.FunctionDef) else []
            elif isinstance(node, ast.Assign):
                names.update({t.id: [] for t in node.targets if isinstance(t, ast.Name)})
            elif isinstance(node, ast.ImportFrom):
                names.update({a.asname or a.name: [] for a in node.names})
        modules[module] = dict(sorted(names.items()))
        for name, node in _classes(tree).items():
            if name.endswith("Config") or name.endswith(".Config"):
                classes[name] = _class_fields(node)
                bases[name] = [ast.unparse(b) for b in node.bases]
    full = {}
    for name in classes:                      # a Config inherits its bases' fields (by the name it is written as)
        seen, todo, fields = set(), [name], {}
        while todo:
            cur = todo.pop()
            if cur in seen or cur not in classes:
                continue
            seen.add(cur)
            fields = {**classes[cur], **fields}
            todo += bases.get(cur, [])
        full[name] = dict(sorted(fields.items()))
    return {"repo": "pytorch/torchtitan", "commit": repo.commit, "sources": list(TITAN_FILES), "classes": full,
            "modules": modules, "pipeline_schedules": TORCH_SCHEDULES}


# -------------------------------------------------------------------------------------------------- DeepSpeed

DS_SECTIONS = {"zero_optimization": ("deepspeed/runtime/zero/config.py", "DeepSpeedZeroConfig"),
               "tensor_parallel": ("deepspeed/runtime/tensor_parallel/config.py", "TPTrainingConfig"),
               "bf16": ("deepspeed/runtime/precision_config.py", "DeepSpeedBF16Config"),
               "activation_checkpointing": ("deepspeed/runtime/activation_checkpointing/config.py", None)}


def _pydantic_fields(source: str, cls: str) -> list[str]:
    tree = ast.parse(source)
    node = _classes(tree)[cls]
    out = []
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            out.append(stmt.target.id)
            if isinstance(stmt.value, ast.Call):
                out += [_literal(k.value) for k in stmt.value.keywords if k.arg == "alias"]
    return sorted(set(out))


def _constants(source: str) -> list[str]:
    tree = ast.parse(source)
    return sorted({n.value.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
                   and isinstance(n.value.value, str) and n.value.value.isidentifier() and all(isinstance(t, ast.Name) and t.id.isupper()
                                                              for t in n.targets)})


def deepspeed(repo: Repo) -> dict:
    """ds_config keys: the top level (constants and the keys config.py reads) and the fields of each section."""
    top = set(_constants(repo.read("deepspeed/runtime/constants.py")))
    config = repo.read("deepspeed/runtime/config.py")
    top |= {n.value for n in ast.walk(ast.parse(config)) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.isidentifier() and n.value.islower()}
    sections = {}
    for key, (rel, cls) in DS_SECTIONS.items():
        source = repo.read(rel)
        sections[key] = _pydantic_fields(source, cls) if cls else _constants(source)
    top |= set(sections)
    return {"repo": "deepspeedai/DeepSpeed", "commit": repo.commit,
            "sources": ["deepspeed/runtime/constants.py", "deepspeed/runtime/config.py",
                        *(r for r, _ in DS_SECTIONS.values())],
            "top_level": sorted(top), "sections": sections,
            "launcher": sorted(_launcher_flags(repo.read("deepspeed/launcher/runner.py")))}


def _launcher_flags(source: str) -> set[str]:
    return {a.value for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
            and ast.unparse(n.func).endswith("add_argument") for a in n.args
            if isinstance(a, ast.Constant) and str(a.value).startswith("-")}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--megatron", required=True)
    p.add_argument("--torchtitan", required=True)
    p.add_argument("--deepspeed", required=True)
    a = p.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for name, fn, path in (("megatron", megatron, a.megatron), ("torchtitan", torchtitan, a.torchtitan),
                           ("deepspeed", deepspeed, a.deepspeed)):
        data = fn(Repo(path))
        (OUT / f"{name}.json").write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
        print(f"{name}: {data['commit'][:12]} -> {OUT / (name + '.json')}")


if __name__ == "__main__":
    main()

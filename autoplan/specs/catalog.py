"""The built-in model catalog and loading a user's own model from TOML."""

from __future__ import annotations

import difflib
import os
import tomllib
from dataclasses import fields
from pathlib import Path

from autoplan.errors import SpecError
from autoplan.specs.dlrm import DLRMSpec, EmbeddingTable, dlrm_from_data
from autoplan.specs.cnn import CNN_MODELS, CNNSpec
from autoplan.specs.model import SIZES, ModelSpec

_GPT = dict(vocab=51200, seq_len=2048, activation="gelu", position="learned", norm="layernorm", bias=True,
            tied_embeddings=True)
_SC21 = "Narayanan et al., SC'21 (arXiv 2104.04473), Table 1"
_SP22 = "Korthikanti et al. 2022 (arXiv 2205.05198), Table 3"
_LLAMA3 = dict(vocab=128256, seq_len=8192, kv_heads=8, activation="swiglu", position="rope", norm="rmsnorm",
               bias=False, tied_embeddings=False, dropout=False)


def _gpt(name: str, layers: int, hidden: int, heads: int, source: str, **kw: object) -> ModelSpec:
    return ModelSpec(name=name, layers=layers, hidden=hidden, heads=heads, ffn_hidden=4 * hidden, source=source,
                     **{**_GPT, **kw})


_CRITEO_1TB_ROWS = (39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346, 10, 2208,
                    11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972, 108, 36)
"""Criteo 1TB table sizes at --max-ind-range 40M (MLPerf DLRM reference dlrm_s_pytorch.py, terabyte dataset)."""
_CRITEO_MULTIHOT_ROWS = (40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209,
                         11938, 155, 4, 976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36)
_CRITEO_MULTIHOT_POOLING = (3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1)
"""MLPerf Training recommendation_v2 (TorchRec DLRM-DCNv2): --num_embeddings_per_feature, --multi_hot_sizes."""
_SYNTH_GROUPS = ((10, 100, 1, 128), (10, 1000, 1, 128), (10, 1000, 5, 128), (10, 10000, 20, 128), (20, 10000, 100, 128),
                 (10, 10000, 1, 128), (10, 100000, 1, 128), (10, 1000000, 1, 128), (10, 2000000, 1, 128),
                 (10, 2000000, 1, 128), (10, 4000000, 1, 128), (20, 4000000, 1, 128), (20, 2000000, 10, 64),
                 (10, 4000000, 20, 128), (10, 4000000, 30, 128), (10, 4000000, 50, 128), (10, 50000000, 100, 128))
"""(tables, rows, pooling, dim) groups of HugeCTR's embedding-collection benchmark config 200table_100B_hotness20
(NVIDIA-Merlin HugeCTR, synthetic data with Zipf alpha 1.1)."""


def _dlrm(name: str, tables: tuple[EmbeddingTable, ...], source: str, **kw: object) -> ModelSpec:
    """A DLRM with MLPerf's bottom (13-512-256-128) and top (1024-1024-512-256-1) MLPs unless ``kw`` says else."""
    spec = DLRMSpec(**{"tables": tables, "dense_features": 13, "bottom_mlp": (512, 256, 128),
                       "top_mlp": (1024, 1024, 512, 256, 1), **kw})
    widths = spec.bottom_mlp + spec.top_mlp
    # the transformer-shaped fields only name the MLPs: a DLRM "token" is a sample (seq_len 1)
    return ModelSpec(name=name, layers=len(widths), hidden=spec.bottom_mlp[-1], heads=1, ffn_hidden=max(widths),
                     vocab=1, seq_len=1, position="rope", bias=True, tied_embeddings=False, dropout=False,
                     source=source, family="dlrm", structure=spec)


_MLPERF_DLRM = "MLPerf Training DLRM reference (mlcommons/training recommendation/dlrm, Criteo 1TB, max-ind-range 40M)"
_MLPERF_DCNV2 = "MLPerf Training recommendation_v2 (mlcommons/training, TorchRec DLRM-DCNv2, Criteo 1TB multi-hot)"
_CRITEO_SKEW = 1.05
"""Zipf exponent standing in for Criteo's long-tailed ids (an assumption: Lin et al. 2022, arXiv 2201.07821, model
the measured per-table distribution, which this catalog does not ship)."""

_DLRMS: tuple[ModelSpec, ...] = (
    _dlrm("dlrm-criteo", tuple(EmbeddingTable(name=f"cat_{i}", rows=r, dim=128, skew=_CRITEO_SKEW)
                               for i, r in enumerate(_CRITEO_1TB_ROWS)), _MLPERF_DLRM, global_batch=65536),
    _dlrm("dlrm-dcnv2", tuple(EmbeddingTable(name=f"cat_{i}", rows=r, dim=128, pooling=p)
                              for i, (r, p) in enumerate(zip(_CRITEO_MULTIHOT_ROWS, _CRITEO_MULTIHOT_POOLING))),
          _MLPERF_DCNV2 + "; --multi_hot_distribution_type uniform (skew 0)", interaction="dcn", cross_layers=3,
          cross_rank=512, global_batch=65536),
    _dlrm("dlrm-synthetic-100b", tuple(EmbeddingTable(name=f"g{g}_t{i}", rows=r, dim=d, pooling=p, skew=1.1)
                                       for g, (n, r, p, d) in enumerate(_SYNTH_GROUPS) for i in range(n)),
          "HugeCTR embedding-collection benchmark 200table_100B_hotness20 (tables, rows, hotness, dims, Zipf 1.1); "
          f"MLPs and DCN-v2 cross layers as {_MLPERF_DCNV2}", interaction="dcn", cross_layers=3, cross_rank=512,
          global_batch=65536),
)

_MODELS: tuple[ModelSpec, ...] = (
    _gpt("gpt-1.7b", 24, 2304, 24, _SC21),
    _gpt("gpt-3.6b", 30, 3072, 32, _SC21),
    _gpt("gpt-7.5b", 36, 4096, 32, _SC21),
    _gpt("gpt-18.4b", 40, 6144, 48, _SC21),
    _gpt("gpt-22b", 48, 6144, 64, _SP22),
    _gpt("gpt-39.1b", 48, 8192, 64, _SC21),
    _gpt("gpt-76.1b", 60, 10240, 80, _SC21),
    _gpt("gpt-145.6b", 80, 12288, 96, _SC21),
    _gpt("gpt3-175b", 96, 12288, 96, f"Brown et al. 2020 (GPT-3), Table 2.1; {_SP22}"),
    _gpt("gpt-310.1b", 96, 16384, 128, _SC21),
    _gpt("gpt-530b", 105, 20480, 128, f"{_SC21} (529.6B); {_SP22}; same shape as MT-NLG 530B"),
    _gpt("gpt-1t", 128, 25600, 160, f"{_SC21} (1008B); {_SP22}"),
    ModelSpec(name="llama3-8b", layers=32, hidden=4096, heads=32, ffn_hidden=14336,
              source="Llama 3 herd paper (arXiv 2407.21783), Table 3; HF meta-llama/Meta-Llama-3.1-8B config.json",
              **_LLAMA3),
    ModelSpec(name="llama3-70b", layers=80, hidden=8192, heads=64, ffn_hidden=28672,
              source="Llama 3 herd paper (arXiv 2407.21783), Table 3; HF meta-llama/Meta-Llama-3.1-70B config.json",
              **_LLAMA3),
    ModelSpec(name="llama3-405b", layers=126, hidden=16384, heads=128, ffn_hidden=53248,
              source="Llama 3 herd paper (arXiv 2407.21783), Table 3; HF meta-llama/Meta-Llama-3.1-405B config.json",
              **_LLAMA3),
    ModelSpec(name="nemotron4-340b", layers=96, hidden=18432, heads=96, kv_heads=8, ffn_hidden=73728, vocab=256000,
              seq_len=4096, activation="relu2", position="rope", norm="layernorm", bias=False,
              tied_embeddings=False, dropout=False, source="Nemotron-4 340B technical report (arXiv 2406.11704), Table 1"),
    ModelSpec(name="bloom-176b", layers=70, hidden=14336, heads=112, ffn_hidden=57344, vocab=250880, seq_len=2048,
              activation="gelu", position="alibi", norm="layernorm", bias=True, tied_embeddings=True,
              source="BLOOM paper (arXiv 2211.05100), Table 3; HF bigscience/bloom config.json"),
    ModelSpec(name="opt-175b", layers=96, hidden=12288, heads=96, ffn_hidden=49152, vocab=50272, seq_len=2048,
              activation="gelu", position="learned", norm="layernorm", bias=True, tied_embeddings=True,
              source="Zhang et al. 2022 (OPT, arXiv 2205.01068), Table 1"),
) + CNN_MODELS + _DLRMS

_MOE = dict(activation="swiglu", position="rope", norm="rmsnorm", bias=False, tied_embeddings=False, dropout=False)
_MOE_MODELS: tuple[ModelSpec, ...] = (
    ModelSpec(name="mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000,
              seq_len=4096, experts=8, top_k=2, moe_ffn_hidden=14336,
              source="Jiang et al. 2024 (Mixtral of Experts, arXiv 2401.04088), Table 1 (46.7B total, 12.9B active); "
                     "HF mistralai/Mixtral-8x7B-v0.1 config.json; seq_len 4096 as NeMo's Mixtral recipes", **_MOE),
    ModelSpec(name="mixtral-8x22b", layers=56, hidden=6144, heads=48, kv_heads=8, ffn_hidden=16384, vocab=32768,
              seq_len=4096, experts=8, top_k=2, moe_ffn_hidden=16384,
              source="Mistral AI, Mixtral 8x22B announcement (141B total, 39B active); HF "
                     "mistralai/Mixtral-8x22B-v0.1 config.json; seq_len 4096 as NeMo's Mixtral recipes", **_MOE),
    ModelSpec(name="deepseek-v3", layers=61, hidden=7168, heads=128, head_dim=128, ffn_hidden=18432, vocab=129280,
              seq_len=4096, experts=256, top_k=8, moe_ffn_hidden=2048, shared_experts=1, dense_layers=3,
              q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, v_head_dim=128, route_nodes=4,
              mtp_layers=1,
              source="DeepSeek-V3 technical report (arXiv 2412.19437) §4.2 (671B total, 37B active, 4K pre-training "
                     "length); HF deepseek-ai/DeepSeek-V3 config.json (topk_group 4 of n_group 8: node-limited "
                     "routing to M = 4 nodes, §2.1.2, §3.2.2); multi-token prediction depth 1 (§2.2, §4.2: one "
                     "more MoE block and projection on the last stage, sharing embedding and head; "
                     "num_nextn_predict_layers 1; its 14B are beside the 671B)", **_MOE),
    ModelSpec(name="qwen3-30b-a3b", layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, ffn_hidden=6144,
              vocab=151936, seq_len=4096, experts=128, top_k=8, moe_ffn_hidden=768,
              source="Qwen3 technical report (arXiv 2505.09388), Table 2 (30.5B total, 3.3B active); HF "
                     "Qwen/Qwen3-30B-A3B config.json; per-head q/k norms (128 weights each) left out", **_MOE),
    ModelSpec(name="qwen3-235b-a22b", layers=94, hidden=4096, heads=64, kv_heads=4, head_dim=128, ffn_hidden=12288,
              vocab=151936, seq_len=4096, experts=128, top_k=8, moe_ffn_hidden=1536,
              source="Qwen3 technical report (arXiv 2505.09388), Table 2 (235B total, 22B active); HF "
                     "Qwen/Qwen3-235B-A22B config.json; per-head q/k norms (128 weights each) left out", **_MOE),
    ModelSpec(name="gpt-oss-120b", layers=36, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn_hidden=2880,
              vocab=201088, seq_len=4096, experts=128, top_k=4, moe_ffn_hidden=2880,
              source="OpenAI gpt-oss model card (arXiv 2508.10925), Table 1 (116.8B total, 5.1B active); HF "
                     "openai/gpt-oss-120b config.json (sliding_window 128 on every other layer, swiglu_limit 7.0); "
                     "Megatron-Bridge GPTOSSProvider (window_size (128, 0), window_attn_skip_freq 2, "
                     "activation_func_clamp_value 7.0); attention sinks are costed as plain softmax",
              window=128, window_layers=18, glu_clamp=7.0, **{**_MOE, "bias": True}),
)
_MODELS = _MODELS + _MOE_MODELS

_ALIASES = {
    "gpt3": "gpt3-175b", "gpt-175b": "gpt3-175b", "gpt3-175B": "gpt3-175b", "mt-nlg-530b": "gpt-530b",
    "gpt-529.6b": "gpt-530b", "gpt-1008b": "gpt-1t", "llama3.1-8b": "llama3-8b", "llama3.1-70b": "llama3-70b",
    "llama3.1-405b": "llama3-405b", "nemotron-4-340b": "nemotron4-340b", "bloom": "bloom-176b",
    "resnet-50": "resnet50", "resnet-152": "resnet152", "vgg-16": "vgg16", "3d-unet": "unet3d",
    "dlrm": "dlrm-criteo", "dlrm-mlperf": "dlrm-criteo", "dcnv2": "dlrm-dcnv2",
    "mixtral": "mixtral-8x7b", "deepseek-v3-671b": "deepseek-v3", "qwen3-235b": "qwen3-235b-a22b", "qwen3-30b": "qwen3-30b-a3b",
    "gpt-oss": "gpt-oss-120b",
}

_BY_NAME = {m.name: m for m in _MODELS}

STRUCTURE_TYPES: dict[str, type] = {"cnn": CNNSpec, "dlrm": DLRMSpec}
"""The type of ``ModelSpec.structure`` per family that has one (for reading run folders back)."""


def list_models() -> tuple[ModelSpec, ...]:
    """Every built-in model, smallest first within each family."""
    return _MODELS


def aliases() -> dict[str, str]:
    """Short names accepted for built-in models."""
    return dict(_ALIASES)


NAME_MAX = 255
"""Longest file name (bytes of one path component) that Linux and macOS file systems accept."""
PATH_MAX = 4096


def check_path(text: str, what: str) -> str:
    """``text`` if it can name a file or folder: not empty, no NUL byte, no component over ``NAME_MAX`` bytes."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"{what} must not be empty")
    shown = repr(text[:60]) + ("..." if len(text) > 60 else "")
    if "\0" in text:
        raise SpecError(f"{what} {shown} contains a NUL byte")
    try:
        encoded = os.fsencode(text)                  # command-line bytes that are not UTF-8 come back as they were
    except UnicodeEncodeError:
        raise SpecError(f"{what} {shown} is not valid Unicode text") from None
    longest = max(len(part) for part in encoded.split(b"/"))
    if longest > NAME_MAX or len(encoded) > PATH_MAX:
        raise SpecError(f"{what} {shown} is too long ({longest} bytes in one name, {len(encoded)} in all; "
                        f"at most {NAME_MAX} and {PATH_MAX})")
    return text


def get_model(name_or_path: str) -> ModelSpec:
    """A built-in model by name or alias, a user's model from a ``.toml`` file, or a HuggingFace ``config.json``
    (a ``.json`` file, or a folder holding ``config.json``)."""
    check_path(name_or_path, "model name or file")
    path = Path(name_or_path)
    if name_or_path.endswith(".json") or (path.is_dir() and (path / "config.json").is_file()):
        from autoplan.specs.hf import load_hf_model
        return load_hf_model(path)
    if name_or_path.endswith(".toml") or Path(name_or_path).is_file():
        return load_model(Path(name_or_path))
    key = _ALIASES.get(name_or_path, _ALIASES.get(name_or_path.lower(), name_or_path.lower()))
    if key in _BY_NAME:
        return _BY_NAME[key]
    known = sorted(_BY_NAME) + sorted(_ALIASES)
    near = difflib.get_close_matches(name_or_path.lower(), known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(near)}?" if near else f"; known models: {', '.join(sorted(_BY_NAME))}"
    raise SpecError(f"unknown model {name_or_path!r}{hint} (or pass a .toml file or a HuggingFace config.json)")


def read_toml(path: Path, what: str) -> dict:
    """The tables of a TOML file; a missing, unreadable or malformed file is a SpecError naming it (and the line)."""
    try:
        text = Path(path).read_text()
        return tomllib.loads(text)
    except FileNotFoundError:
        raise SpecError(f"{what} file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as err:
        # tomllib's message ends with "(at line L, column C)", or "(at end of document)"
        where = f"(at the end of the file, after line {len(text.rstrip().splitlines())})"
        message = str(err).replace("(at end of document)", where)
        raise SpecError(f"{what} file {str(path)!r} is not valid TOML: {message}") from None
    except UnicodeDecodeError as err:
        raise SpecError(f"{what} file {str(path)!r} is not UTF-8 text (byte {err.start}); TOML is text") from None
    except (OSError, ValueError) as err:
        raise SpecError(f"cannot read {what} file {str(path)!r}: {err}") from None


def load_model(path: Path) -> ModelSpec:
    """A model from a TOML file whose keys are ModelSpec's fields (at top level or under ``[model]``)."""
    data = read_toml(path, "model")
    data = data.get("model", data)
    if not isinstance(data, dict):
        raise SpecError(f"model file {str(path)!r}: [model] must be a table of ModelSpec fields, got {data!r}")
    allowed = ({f.name for f in fields(ModelSpec)} - {"structure"}) | {"dlrm"}  # a structure is built in code
    unknown = sorted(set(data) - allowed)
    if unknown:
        raise SpecError(f"model file {str(path)!r}: unknown key(s) {', '.join(unknown)}; "
                        f"allowed: {', '.join(sorted(allowed))}")
    data.setdefault("name", Path(path).stem)
    if "dlrm" in data:
        data["structure"] = dlrm_from_data(data.pop("dlrm"), f"model file {str(path)!r}")
        data.setdefault("family", "dlrm")
        for key, value in dict(layers=1, hidden=1, heads=1, ffn_hidden=1, vocab=1, seq_len=1).items():
            data.setdefault(key, value)
    missing = [k for k in SIZES if k not in data]
    if missing:
        raise SpecError(f"model file {str(path)!r}: missing key(s) {', '.join(missing)} "
                        f"(required: {', '.join(SIZES)})")
    for key in SIZES + ("kv_heads", "head_dim"):
        if key in data and (not isinstance(data[key], int) or isinstance(data[key], bool)):
            raise SpecError(f"model file {str(path)!r}: {key} must be an integer, got {data[key]!r}")
    try:
        return ModelSpec(**data)
    except SpecError as err:
        raise SpecError(f"model file {str(path)!r}: {err}") from None

"""ModelSpec and the catalog: published parameter counts, the FLOP formulas of Megatron's papers, names, TOML."""

from __future__ import annotations

from dataclasses import fields

import pytest

from autoplan.errors import SpecError
from autoplan.families.catalog import aliases, get_model, list_models, load_model
from autoplan.specs.model import ModelSpec


# ---------------------------------------------------------------------------------------------- parameter counts


@pytest.mark.parametrize("name,published_billions", [
    ("gpt3-175b", 175.0),          # Brown et al. 2020, Table 2.1
    ("gpt3-175b", 174.6),          # Korthikanti et al. 2022 / public.yaml sp2205-175b-*: params_b 174.6
    ("llama3-8b", 8.03),           # HF meta-llama/Meta-Llama-3.1-8B
    ("llama3-70b", 70.6),          # HF meta-llama/Meta-Llama-3.1-70B
    ("llama3-405b", 405.9),        # HF meta-llama/Meta-Llama-3.1-405B
    ("nemotron4-340b", 341.0),     # Nemotron-4 340B report
    ("bloom-176b", 176.2),         # BLOOM paper
    ("opt-175b", 175.0),           # OPT paper
])
def test_parameter_counts_match_published(name, published_billions):
    assert get_model(name).params() / 1e9 == pytest.approx(published_billions, rel=0.01)


def test_parameter_count_adds_up(tiny_gpt):
    m = tiny_gpt
    h, f, v, s, l = m.hidden, m.ffn_hidden, m.vocab, m.seq_len, m.layers
    per_layer = 4 * h * h + 2 * h * f + (3 * h + h + f + h) + 2 * 2 * h     # matrices, biases, two layernorms
    assert m.layer_params() == per_layer
    assert m.params() == l * per_layer + v * h + s * h + 2 * h               # tied output: only the final norm


def test_untied_rope_gqa_model_counts():
    m = get_model("llama3-8b")
    h, kv = m.hidden, m.kv_dim
    assert m.kv_heads == 8 and m.head_dim == 128 and kv == 1024
    assert m.attention_matmul_params() == h * (h + 2 * kv) + h * h
    assert m.mlp_matmul_params() == 3 * h * m.ffn_hidden
    assert m.embedding_params() == m.vocab * h                              # rope: no position table
    assert m.output_params() == h + m.vocab * h                             # rmsnorm + untied output


# ------------------------------------------------------------------------------------------------------- FLOPs


def _gpt_like(l: int, h: int, a: int, s: int, v: int) -> ModelSpec:
    return ModelSpec(name="g", layers=l, hidden=h, heads=a, ffn_hidden=4 * h, vocab=v, seq_len=s)


@pytest.mark.parametrize("l,h,a,s,v", [(8, 256, 8, 256, 1024), (96, 12288, 96, 2048, 51200),
                                       (24, 2304, 24, 2048, 51200), (3, 64, 4, 4096, 77)])
def test_model_flops_per_token_is_megatron_72(l, h, a, s, v):
    m = _gpt_like(l, h, a, s, v)
    # Korthikanti et al. 2022 §6: 72·l·h²·(1 + s/6h + V/12lh) per token
    assert m.model_flops_per_token() == pytest.approx(72 * l * h * h * (1 + s / (6 * h) + v / (12 * l * h)),
                                                      rel=1e-12)
    # Narayanan et al. SC'21 eq. 3 (full recompute): 96·l·h²·(1 + s/6h + V/16lh)
    assert m.hardware_flops_per_token("full") == pytest.approx(
        96 * l * h * h * (1 + s / (6 * h) + v / (16 * l * h)), rel=1e-12)
    assert m.hardware_flops_per_token("none") == m.model_flops_per_token()
    sel = m.hardware_flops_per_token("selective")
    assert m.model_flops_per_token() < sel < m.hardware_flops_per_token("full")
    assert sel - m.model_flops_per_token() == pytest.approx(l * 4 * s * h, rel=1e-12)


def test_iteration_flops_scale_with_batch(tiny_gpt):
    assert tiny_gpt.model_flops_per_iteration(6) == pytest.approx(
        6 * tiny_gpt.seq_len * tiny_gpt.model_flops_per_token())
    assert tiny_gpt.hardware_flops_per_iteration(6, "full") == pytest.approx(
        6 * tiny_gpt.seq_len * tiny_gpt.hardware_flops_per_token("full"))


def test_causal_attention_halves_the_score_flops(tiny_gpt):
    full, causal = tiny_gpt.layer_forward_flops_per_token(), tiny_gpt.layer_forward_flops_per_token(causal=True)
    assert full - causal == pytest.approx(2 * tiny_gpt.seq_len * tiny_gpt.q_dim)


def test_llama3_8b_model_flops_per_sample():
    # public.yaml dgxc-h100-bf16-llama31-8b-8gpu, derived model_flops_per_sample 4.74e14 (NVIDIA's formula)
    m = get_model("llama3-8b")
    assert m.model_flops_per_token() * m.seq_len == pytest.approx(4.74e14, rel=0.005)


def test_gpt3_model_flops_per_sample():
    m = get_model("gpt3")
    assert m.model_flops_per_token() * m.seq_len == pytest.approx(2.2e15, rel=0.005)


# ------------------------------------------------------------------------------------------------ names, errors


@pytest.mark.parametrize("alias,name", [("gpt3", "gpt3-175b"), ("GPT3", "gpt3-175b"), ("gpt-175b", "gpt3-175b"),
                                        ("gpt3-175B", "gpt3-175b"), ("llama3.1-8b", "llama3-8b"),
                                        ("bloom", "bloom-176b"), ("mt-nlg-530b", "gpt-530b"),
                                        ("LLAMA3-70B", "llama3-70b")])
def test_aliases_and_case(alias, name):
    assert get_model(alias).name == name
    assert get_model(alias) is get_model(name)


def test_every_alias_resolves_to_a_catalog_model():
    names = {m.name for m in list_models()}
    assert len(names) == len(list_models())
    for target in aliases().values():
        assert target in names


def test_unknown_model_suggests_a_near_name():
    with pytest.raises(SpecError, match="did you mean.*gpt3-175b"):
        get_model("gpt3-175")
    with pytest.raises(SpecError, match="llama3-8b"):
        get_model("llama-3-8b")


def test_unknown_model_without_near_names_lists_the_catalog():
    with pytest.raises(SpecError, match="known models"):
        get_model("zzzzzzzz")


@pytest.mark.parametrize("bad", [dict(layers=0), dict(hidden=-1), dict(hidden=250, heads=8),
                                 dict(kv_heads=3), dict(activation="tanh"), dict(position="xpos"),
                                 dict(norm="batchnorm")])
def test_invalid_model_shapes_raise(bad):
    kw = dict(name="x", layers=2, hidden=256, heads=8, ffn_hidden=1024, vocab=100, seq_len=64) | bad
    with pytest.raises(SpecError):
        ModelSpec(**kw)


def test_defaults_fill_kv_heads_and_head_dim(tiny_gpt):
    assert tiny_gpt.kv_heads == tiny_gpt.heads and tiny_gpt.head_dim == 32 and tiny_gpt.q_dim == 256


# ----------------------------------------------------------------------------------------------------------- TOML


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(v)


@pytest.mark.parametrize("name", ["llama3-8b", "gpt3-175b", "nemotron4-340b", "bloom-176b"])
@pytest.mark.parametrize("table", [False, True])
def test_toml_round_trip(tmp_path, name, table):
    model = get_model(name)
    lines = ["[model]"] if table else []
    lines += [f"{f.name} = {_toml_value(getattr(model, f.name))}" for f in fields(model)
              if getattr(model, f.name) is not None]            # structure: None for transformers
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    assert load_model(path) == model
    assert get_model(str(path)) == model


def test_toml_name_defaults_to_file_stem(tmp_path):
    path = tmp_path / "my-model.toml"
    path.write_text("layers = 2\nhidden = 128\nheads = 4\nffn_hidden = 512\nvocab = 1000\nseq_len = 128\n")
    m = load_model(path)
    assert m.name == "my-model" and m.layers == 2 and m.kv_heads == 4


@pytest.mark.parametrize("text,match", [
    ("layers = = 2\n", "not valid TOML"),
    ("layers = 2\nhidden = 128\n", "missing key"),
    ("layers = 2\nhidden = 128\nheads = 4\nffn_hidden = 512\nvocab = 1000\nseq_len = 128\nwidth = 3\n",
     "unknown key"),
    ("layers = 2.5\nhidden = 128\nheads = 4\nffn_hidden = 512\nvocab = 1000\nseq_len = 128\n", "integer"),
    ("layers = true\nhidden = 128\nheads = 4\nffn_hidden = 512\nvocab = 1000\nseq_len = 128\n", "integer"),
    ("layers = 2\nhidden = 130\nheads = 4\nffn_hidden = 512\nvocab = 1000\nseq_len = 128\n", "divisible"),
])
def test_bad_toml_raises_spec_error(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SpecError, match=match):
        load_model(path)


def test_missing_toml_file_raises_spec_error(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        load_model(tmp_path / "nope.toml")
    with pytest.raises(SpecError):
        get_model(str(tmp_path / "nope.toml"))

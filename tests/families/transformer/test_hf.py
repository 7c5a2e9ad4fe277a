"""HuggingFace config.json models (families/transformer/hf.py): real configs map to the catalog's numbers, MoE and MLA fields map
to the MoE family's names, and a broken file is one clear error."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, strategies as st

from autoplan.cli import main
from autoplan.errors import SpecError
from autoplan.families.catalog import get_model
from autoplan.families.transformer.hf import MLA_FIELDS, MOE_FIELDS, config_fields, load_hf_model, read_config
from autoplan.specs.model import ModelSpec

CONFIGS = Path(__file__).parent / "hf_configs"


def _fixture(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


def test_llama_3_1_8b_config_is_the_catalogs_llama3_8b():
    hf, catalog = get_model(str(CONFIGS / "llama-3.1-8b.json")), get_model("llama3-8b")
    differ = {k for k, v in asdict(hf).items() if v != asdict(catalog)[k]}
    assert differ == {"name", "source"}
    assert hf.params() == catalog.params()
    assert hf.name == "llama-3.1-8b" and "LlamaForCausalLM" in hf.source


def test_the_pre_training_length_is_taken_from_before_rope_scaling():
    data = _fixture("llama-3.1-8b.json")
    assert data["max_position_embeddings"] == 131072
    assert config_fields(data)["seq_len"] == data["rope_scaling"]["original_max_position_embeddings"]
    del data["rope_scaling"]
    # without rope_scaling a 131,072-token context is not taken as the pre-training length: 8,192, said in the source
    assert config_fields(data)["seq_len"] == 8192


def test_a_config_without_rope_scaling_plans_its_pretraining_length_and_says_so(tmp_path):
    data = _fixture("llama-3.1-8b.json")
    del data["rope_scaling"]
    (tmp_path / "config.json").write_text(json.dumps(data))
    m = get_model(str(tmp_path))
    assert m.seq_len == 8192 and "seq 8,192 of its 131,072-token context" in m.source and "--seq-len" in m.source
    data["max_position_embeddings"] = 4096
    (tmp_path / "config.json").write_text(json.dumps(data))
    assert get_model(str(tmp_path)).seq_len == 4096


def test_gpt2_has_its_published_parameter_count():
    gpt2 = get_model(str(CONFIGS / "gpt2.json"))
    # GPT-2 small: 124,439,808 parameters (HF openai-community/gpt2, safetensors metadata)
    assert gpt2.params() == 124_439_808
    assert (gpt2.activation, gpt2.position, gpt2.norm, gpt2.bias, gpt2.tied_embeddings) == (
        "gelu", "learned", "layernorm", True, True)


def test_mixtral_maps_to_the_moe_fields():
    kw = config_fields(_fixture("mixtral-8x7b.json"))
    assert {k: kw[k] for k in MOE_FIELDS} == dict(experts=8, top_k=2, moe_ffn_hidden=14336, shared_experts=0,
                                                  dense_layers=0, capacity_factor=0.0)
    assert kw["seq_len"] == 32768 and kw["activation"] == "swiglu" and not set(MLA_FIELDS) & set(kw)


def test_deepseek_v3_maps_to_the_moe_and_mla_fields():
    data = _fixture("deepseek-v3.json")
    kw = config_fields(data)
    assert {k: kw[k] for k in MOE_FIELDS} == dict(
        experts=data["n_routed_experts"], top_k=data["num_experts_per_tok"],
        moe_ffn_hidden=data["moe_intermediate_size"], shared_experts=data["n_shared_experts"],
        dense_layers=data["first_k_dense_replace"], capacity_factor=0.0)
    assert {k: kw[k] for k in MLA_FIELDS} == {k: data[k] for k in MLA_FIELDS}
    assert kw["head_dim"] == data["qk_nope_head_dim"] and kw["ffn_hidden"] == data["intermediate_size"]
    assert kw["seq_len"] == 4096 and kw["layers"] == 61 and kw["vocab"] == 129280
    # the multi-token-prediction depth (arXiv 2412.19437 §2.2), 0 where a config has none
    assert kw["mtp_layers"] == data["num_nextn_predict_layers"] == 1
    assert config_fields({**data, "num_nextn_predict_layers": 0})["mtp_layers"] == 0
    assert config_fields({k: v for k, v in data.items() if k != "num_nextn_predict_layers"})["mtp_layers"] == 0


def test_deepseek_v3_config_is_the_catalogs_deepseek_v3():
    hf, catalog = get_model(str(CONFIGS / "deepseek-v3.json")), get_model("deepseek-v3")
    assert {k for k, v in asdict(hf).items() if v != asdict(catalog)[k]} == {"source"}
    assert hf.family == "moe" and hf.params() == catalog.params()


def test_mixtral_config_is_the_catalogs_mixtral_at_its_full_context():
    """The catalog trains Mixtral at NeMo's 4096; its config.json gives the 32768 context (no RoPE scaling)."""
    hf, catalog = get_model(str(CONFIGS / "mixtral-8x7b.json")), get_model("mixtral-8x7b")
    assert {k for k, v in asdict(hf).items() if v != asdict(catalog)[k]} == {"source", "seq_len"}
    assert hf.seq_len == 32768 and hf.params() == catalog.params()


def test_a_folder_holding_config_json_is_a_model(tmp_path):
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-3.1-8b.json").read_text())
    model = get_model(str(folder))
    assert model.name == "Llama-3.1-8B" and model.params() == get_model("llama3-8b").params()


@given(layers=st.integers(1, 200), heads=st.sampled_from([8, 16, 32, 64]), per_head=st.sampled_from([64, 128]),
       groups=st.sampled_from([1, 2, 8]), ffn=st.integers(1, 100_000), vocab=st.integers(1, 300_000))
def test_llama_like_sizes_are_read_as_given(layers, heads, per_head, groups, ffn, vocab):
    kv = heads // groups
    data = {"model_type": "qwen2", "num_hidden_layers": layers, "hidden_size": heads * per_head,
            "num_attention_heads": heads, "num_key_value_heads": kv, "intermediate_size": ffn,
            "vocab_size": vocab, "max_position_embeddings": 4096, "hidden_act": "silu", "rms_norm_eps": 1e-6}
    kw = config_fields(data)
    assert (kw["layers"], kw["hidden"], kw["heads"], kw["kv_heads"], kw["ffn_hidden"], kw["vocab"]) == (
        layers, heads * per_head, heads, kv, ffn, vocab)
    assert ModelSpec(name="x", **kw).head_dim == per_head


@pytest.mark.parametrize("text, message", [
    ('{"model_type": "llama",', "not valid JSON"),
    ("[1, 2]", "must hold a JSON object"),
    ('{"model_type": "t5"}', "model_type 't5' is not one autoplan reads"),
    ('{"architectures": ["LlamaForCausalLM"]}', r"it gives no model_type \(LlamaForCausalLM\); supported: llama"),
    ('{"model_type": "llama", "hidden_size": 4096}', "missing key num_hidden_layers"),
    ('{"model_type": "llama", "num_hidden_layers": 2, "hidden_size": "4096"}', "hidden_size must be a positive"),
])
def test_a_broken_config_is_one_clear_error(tmp_path, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(SpecError, match=message):
        load_hf_model(path)


def test_a_missing_config_is_an_error(tmp_path):
    with pytest.raises(SpecError, match="does not exist"):
        read_config(tmp_path / "nope.json")


def test_cli_exits_2_with_one_line_on_a_broken_config(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama", "num_hidden_layers": 32}')
    r = CliRunner().invoke(main, ["check", "--model", str(path), "--gpus", "8"])
    assert r.exit_code == 2 and "missing key hidden_size" in r.output and "Traceback" not in r.output


def test_cli_checks_a_plan_of_a_config_json():
    r = CliRunner().invoke(main, ["check", "--model", str(CONFIGS / "llama-3.1-8b.json"), "--gpus", "8", "--tp", "2",
                                  "--json"])
    assert r.exit_code in (0, 1), r.output           # 1: valid, but does not fit in memory
    assert json.loads(r.output)["model"] == "llama-3.1-8b"


def test_qwen3_moe_names_its_experts_num_experts():
    # the keys of Qwen/Qwen3-30B-A3B's config.json (sizes as published there)
    data = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048,
            "num_hidden_layers": 48, "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
            "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8,
            "vocab_size": 151936, "max_position_embeddings": 40960, "hidden_act": "silu", "rms_norm_eps": 1e-6,
            "tie_word_embeddings": False, "attention_bias": False}
    kw = config_fields(data)
    assert {k: kw[k] for k in MOE_FIELDS} == dict(experts=128, top_k=8, moe_ffn_hidden=768, shared_experts=0,
                                                  dense_layers=0, capacity_factor=0.0)
    assert kw["head_dim"] == 128 and kw["kv_heads"] == 4

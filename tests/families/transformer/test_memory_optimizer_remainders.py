"""Master-weight remainders (``Plan.param_remainders``): NeMo's distributed Adam keeps 2 bytes a master weight."""

from autoplan.families.catalog import get_model
from autoplan.families.registry import violations
from autoplan.families.strategy import Strategy
from autoplan.families.transformer.frameworks import megatron_violations
from autoplan.families.transformer.memory import memory_per_stage, optimizer_state_bytes
from autoplan.specs.cluster import load_cluster

MODEL = get_model("llama3-70b")
CLUSTER = load_cluster("dgx-h100-80g", 64)
PLAN = dict(tp=4, pp=4, dp=4, global_batch=64, zero=1, sequence_parallel=True)


def test_remainders_save_two_bytes_per_sharded_parameter():
    plain, rem = Strategy(**PLAN), Strategy(**PLAN, param_remainders=True)
    assert (optimizer_state_bytes(plain), optimizer_state_bytes(rem)) == (12, 10)
    a, b = memory_per_stage(MODEL, CLUSTER, plain), memory_per_stage(MODEL, CLUSTER, rem)
    for x, y in zip(a, b):
        # the optimizer line alone shrinks, by a sixth (2 of 12 bytes of each parameter of the DP shard)
        assert y.optimizer * 6 == x.optimizer * 5
        assert (y.weights, y.gradients, y.activations) == (x.weights, x.gradients, x.activations)


def test_remainders_need_the_distributed_optimizer_and_bf16_weights():
    assert any("param_remainders" in v for v in violations(MODEL, 64, Strategy(**{**PLAN, "zero": 0},
                                                                               param_remainders=True)))
    fp8 = Strategy(**PLAN, precision="fp8", fp8_param_gather=True, param_remainders=True)
    assert any("param_remainders" in v for v in violations(MODEL, 64, fp8))
    assert not violations(MODEL, 64, Strategy(**PLAN, param_remainders=True))


def test_no_export_claims_it():
    assert any("param_remainders" in v for v in megatron_violations(MODEL, Strategy(**PLAN, param_remainders=True)))
    assert not any("param_remainders" in v for v in megatron_violations(MODEL, Strategy(**PLAN)))

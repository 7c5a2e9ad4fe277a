"""The transformer families' own plan knobs: sequence parallelism, TP-comm overlap, the context-parallel exchange,
FP8 options, ZeRO-3 as DeepSpeed ran it, and the expert-parallel degrees of mixture-of-experts models."""

from __future__ import annotations

from autoplan.specs.plan import PlanPart, knob

_BOOL = (False, True)
CP_COMMS = ("p2p", "a2a", "a2a+p2p")


class TransformerPlan(PlanPart):
    """Knobs of dense and MoE transformers (Megatron-LM and Transformer Engine arguments)."""

    sequence_parallel: bool = knob(False, after="virtual_stages", choices=_BOOL, axis=True, fix_help="", label=lambda v: "sp" if v else "",
                                   help="Sequence parallelism: norms and dropout split along the sequence over the TP "
                                        "group (needs tp > 1).",
                                   megatron={True: ("--sequence-parallel",)})
    """Shard norms and dropout along the sequence across the TP group (Korthikanti et al. 2022)."""
    zero3_per_tensor: bool = knob(False, after="gradient_accumulation_fusion", choices=_BOOL,
                                  help="ZeRO-3 as DeepSpeed of 2021: one blocking list all-gather / reduce-scatter per "
                                       "weight tensor (else one per layer, prefetched).")
    """ZeRO-3 communicates each weight tensor on its own through PyTorch's list collectives, gathers block the
    compute, and recomputed tensors are gathered again before their backward (DeepSpeed 0.3-0.4 stage 3,
    ``autoplan/families/transformer/zero3_tensors.py``); false: one gather per layer prefetched a layer ahead (FSDP)."""
    fp8_param_gather: bool = knob(False, after="precision", choices=_BOOL, axis=True, label=lambda v: "fp8pg" if v else "",
                                  help="Keep the weights in FP8 and all-gather them in FP8 (needs an FP8 precision).",
                                  megatron={True: ("--fp8-param-gather",)})
    """The model's weights are FP8 tensors (no BF16 copy) and the distributed optimizer all-gathers them in FP8
    (Megatron-LM ``--fp8-param-gather``)."""
    fp8_activation_store: bool = knob(False, after="optimizer_moments", quiet=True, choices=_BOOL, axis=True,
                                      fix_help="Keep the MLP activation's input in FP8 (the spaces: BF16).",
                                      label=lambda v: "a8" if v else "",
                                      help="Keep the MLP activation's (SwiGLU's) input for the backward in FP8.",
                                      megatron={True: ("--activation-func-fp8-input-store",)})
    """The MLP activation's input, kept for its backward, is stored in FP8 (1 byte a value) and cast back to BF16
    before the backward (DeepSeek-V3 §3.3.3, "Inputs of the SwiGLU operator in MoE"; Megatron-LM
    ``--activation-func-fp8-input-store``, fused_bias_swiglu.py): the dense MLP's, the experts' and the shared
    experts' activation inputs; each cast is one more pass over them."""
    tp_comm_overlap: bool = knob(False, choices=_BOOL, axis=True, label=lambda v: "tpo" if v else "",
                                 help="Overlap the TP all-gathers and reduce-scatters with the GEMMs they feed "
                                      "(Transformer Engine userbuffers; needs sequence parallelism).",
                                 megatron={True: ("--tp-comm-overlap",)})
    """Split each sequence-parallel all-gather / reduce-scatter and the GEMM it feeds into chunks that pipeline
    (Wang et al. ASPLOS'23; Transformer Engine userbuffers, Megatron-LM ``--tp-comm-overlap``)."""
    cp_comm: str = knob("p2p", choices=CP_COMMS, axis=True, label=lambda v: "" if v == "p2p" else v,
                        help="Context-parallel exchange: p2p (ring), a2a (DeepSpeed-Ulysses) or a2a+p2p "
                             "(a2a inside the node, ring across).",
                        megatron={"a2a": ("--cp-comm-type a2a",), "a2a+p2p": ("--cp-comm-type a2a+p2p",)},
                        megatron_when=lambda s: s.cp > 1)
    """How CP ranks share keys and values: a ring of K/V blocks (``p2p``, Liu et al. 2023), all-to-alls that
    turn the sequence split into a head split (``a2a``, DeepSpeed-Ulysses, Jacobs et al. 2023), or both, a2a
    inside each node and a ring across (``a2a+p2p``, Megatron-Core ``--cp-comm-type``)."""


class MoEPlan(PlanPart):
    """Expert parallelism of mixture-of-experts transformers (Megatron-Core MoE)."""

    ep: int = knob(1, after="cp_comm", quiet=True, help="Expert-parallel degree (MoE): each rank holds experts / ep experts; "
                           "ep·etp divides tp·cp·dp (Megatron-Core).", axis=True,
                   fix_help="Fix expert parallelism (MoE).", label=lambda v: f"ep{v}" if v > 1 else "")
    """Expert-parallel degree: the routed experts split over ``ep`` ranks (Megatron-Core
    ``--expert-model-parallel-size``; its expert ranks are laid out etp, ep, edp fastest first within a stage)."""
    etp: int = knob(1, quiet=True, help="Expert tensor-parallel degree (MoE): each expert's FFN split over etp ranks.", axis=True,
                    fix_help="Fix expert tensor parallelism (MoE).", label=lambda v: f"etp{v}" if v > 1 else "")
    """Expert tensor-parallel degree (Megatron-Core ``--expert-tensor-parallel-size``); the expert-data-parallel
    degree is edp = tp·cp·dp / (etp·ep)."""
    ep_overlap: bool = knob(False, quiet=True, choices=_BOOL, axis=True, label=lambda v: "epo" if v else "",
                            help="Hide the EP all-to-alls behind another micro-batch's compute (MoE, ep > 1).",
                            megatron={True: ("--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute")})
    """Overlap the expert-parallel all-to-alls with compute (Megatron-Core ``--overlap-moe-expert-parallel-comm``,
    batch-level overlap of one micro-batch's forward with another's backward; DeepSeek-V3's DualPipe)."""

    @property
    def edp(self) -> int:
        """Expert-data-parallel degree: replicas of each expert shard, tp·cp·dp / (etp·ep) (Megatron-Core)."""
        return max(1, self.tp * self.cp * self.dp // (self.ep * self.etp))


PARTS = (TransformerPlan, MoEPlan)
"""The parts this package adds to the plan."""

"""The transformer families' own plan knobs: sequence parallelism, TP-comm overlap, the context-parallel exchange,
FP8 options, ZeRO-3 as DeepSpeed ran it, and the expert-parallel degrees of mixture-of-experts models."""

from __future__ import annotations

from autoplan.specs.plan import PlanPart, knob

_BOOL = (False, True)
MOE_DISPATCHERS = ("alltoall", "flex")
CP_COMMS = ("p2p", "a2a", "a2a+p2p")
TP_OVERLAP_RS = ("24/20", "24/16", "24/8", "32/8", "16/16", "r/24", "r/r")
"""Forward reduce-scatter overlaps after proj / fc2: ``P/F`` SMs set aside for each pipelined reduce-scatter, ``r`` a
ring exchange (``tp_overlap.reduce_scatter_overlap``)."""
DEFAULT_RS = "24/20"
LOSS_IMPLS = ("megatron", "torch", "torch-compiled")


class TransformerPlan(PlanPart):
    """Knobs of dense and MoE transformers (Megatron-LM and Transformer Engine arguments)."""

    optimizer_offload_pct: int = knob(0, choices=(0, 25, 50, 75, 100), after="zero", axis=True, fix_help="", quiet=True,
                                      label=lambda v: f"oo{v}" if v else "",
                                      help="Percent of the optimizer state kept on the host and updated by CPU Adam "
                                           "(needs the distributed optimizer).",
                                      megatron={v: ("--optimizer-cpu-offload", f"--optimizer-offload-fraction {v / 100:g}",
                                                    "--overlap-cpu-optimizer-d2h-h2d") for v in (25, 50, 75, 100)})
    """Optimizer CPU offload (Megatron-Core ``--optimizer-cpu-offload --optimizer-offload-fraction f``,
    megatron/core/optimizer/cpu_offloading): that share of the sharded optimizer state (master weights and Adam's
    moments) lives in host memory and the host's CPU Adam updates it; its gradients go down and its weights come back
    over the host link (overlapped with ``--overlap-cpu-optimizer-d2h-h2d``)."""
    activation_offload_layers: int = knob(0, after="recompute", unset_zero=True, axis=True, fix_help="",
                                          label=lambda v: f"aol{v}" if v else "",
                                          help="Layers whose activations go to host memory after the forward and "
                                               "come back for the backward (no pipeline, no recompute).")
    """Activation CPU offload (Megatron-Core ``--cpu-offloading-num-layers N``, model_parallel_config.py
    ``cpu_offloading``): N layers' activations are copied to the host asynchronously after their forward and back
    before their backward, over the host link, one layer's copy in flight. Megatron-Core: "no support for Pipeline
    parallelism with CPU offloading" and not with activation recomputation (Megatron-Bridge cpu-offloading skill)."""
    recompute_layers: int = knob(0, after="recompute", unset_zero=True, axis=True, fix_help="",
                                 label=lambda v: f"rl{v}" if v else "",
                                 help="With --recompute full: layers of each model chunk that recompute, the rest "
                                      "keeping their activations (0: every layer).")
    """Partial recompute: with ``recompute = full``, only the first ``recompute_layers`` layers of each model chunk
    recompute and the others keep all their activations (Megatron-LM ``--recompute-method block
    --recompute-num-layers N``, per pipeline stage and virtual stage: megatron/core/transformer/transformer_block.py
    ``_checkpointed_forward``); 0: every layer (``--recompute-method uniform --recompute-num-layers 1``)."""

    sequence_parallel: bool = knob(False, after="virtual_stages", choices=_BOOL, axis=True, fix_help="", label=lambda v: "sp" if v else "",
                                   help="Sequence parallelism: norms and dropout split along the sequence over the TP "
                                        "group (needs tp > 1).",
                                   megatron={True: ("--sequence-parallel",)})
    """Shard norms and dropout along the sequence across the TP group (Korthikanti et al. 2022)."""
    param_remainders: bool = knob(False, after="optimizer_moments", quiet=True, choices=_BOOL,
                                  label=lambda v: "rem" if v else "",
                                  help="The optimizer keeps only the 16 bits the BF16 weights lack of each fp32 master "
                                       "weight (NeMo's distributed Adam; needs zero ≥ 1 and BF16 weights).")
    """The distributed optimizer stores each fp32 master weight as the low 16 bits the BF16 weight lacks: 2 bytes a
    parameter instead of 4 (Apex DistributedFusedAdam ``store_param_remainders``, which NeMo's
    megatron_base_model.py ``setup_optimization`` turns on for an fp32 optimizer over BF16 weights without FP8 weights;
    Transformer Engine FusedAdam's ``store_param_remainders``)."""
    zero3_per_tensor: bool = knob(False, after="gradient_accumulation_fusion", choices=_BOOL,
                                  help="ZeRO-3 as DeepSpeed of 2021: one blocking list all-gather / reduce-scatter per "
                                       "weight tensor (else one per layer, prefetched).")
    """ZeRO-3 communicates each weight tensor on its own through PyTorch's list collectives, gathers block the
    compute, and recomputed tensors are gathered again before their backward (DeepSpeed 0.3-0.4 stage 3,
    ``autoplan/families/transformer/zero3_tensors.py``); false: one gather per layer prefetched a layer ahead (FSDP)."""
    embedding_wgrad_deferral: int = knob(0, after="gradient_accumulation_fusion", quiet=True, unset_zero=True,
                                         label=lambda v: f"dew{v}" if v else "",
                                         help="Micro-batches whose output layer's weight-gradient GEMM waits for the "
                                              "pipeline flush (0: none; needs pp > 1).")
    """Megatron-Core ``--defer-embedding-wgrad-compute --wgrad-deferral-limit N``: the output layer's (the embedding's,
    when tied) weight-gradient GEMM of the first N micro-batches is kept for the end of the step, where the last
    stage runs it while the earlier stages drain the pipeline ("enabling us to hide pipeline flush latency",
    model_parallel_config.py; tensor_parallel/layers.py ``LinearWithGradAccumulationAndAsyncCommunication``,
    schedules.py ``finish_embedding_wgrad_compute``); later micro-batches compute theirs in their backward."""
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
    tp_overlap_rs: str = knob(DEFAULT_RS, choices=TP_OVERLAP_RS, after="tp_comm_overlap", quiet=True,
                              label=lambda v: "" if v == DEFAULT_RS else f"rs{v}",
                              help="Reduce-scatters after proj / fc2 under TP-comm overlap: pipelined in 4 chunks "
                                   "beside the GEMM on P / F SMs set aside for them (userbuffers num_sm with "
                                   "set_sm_margin); r: a ring exchange.")
    """How the forward's reduce-scatters after proj and fc2 overlap their GEMMs under ``tp_comm_overlap``: Transformer
    Engine userbuffers ``pipeline`` with ``num_splits`` 4 and ``num_sm`` SMs taken from the GEMM (proj's / fc2's),
    or ``ring_exchange`` (TE module/base.py ``initialize_ub``; Megatron-LM ``--tp-comm-overlap-cfg``, a yaml of
    these per layer). The default is NVIDIA's GPT-3 175B H100 recipe's 24 and 20 SMs (dgxc-benchmarking
    nemo_megatron/gpt3_175b_hydra.yaml ``ub_tp_comm_overlap_cfg``)."""
    tp_overlap_fp8_rs: bool = knob(False, after="tp_overlap_rs", quiet=True, choices=_BOOL,
                                   label=lambda v: "rs8" if v else "",
                                   help="With TP-comm overlap and an FP8 precision, proj's and fc2's GEMMs write FP8 "
                                        "into the reduce-scatter's buffer, which carries FP8 (userbuffers fp8_buf).")
    """Userbuffers ``fp8_buf`` on ``proj_fprop`` and ``fc2_fprop``: the FP8 GEMM writes its output in FP8 into the
    communication buffer and the reduce-scatter moves one byte a value instead of two (TE v2.2 module/base.py
    ``initialize_ub`` keeps ``fp8_buf`` for pipelined layers; linear.py writes the FP8 output into it)."""
    cp_comm: str = knob("p2p", choices=CP_COMMS, axis=True, label=lambda v: "" if v == "p2p" else v,
                        help="Context-parallel exchange: p2p (ring), a2a (DeepSpeed-Ulysses) or a2a+p2p "
                             "(a2a inside the node, ring across).",
                        megatron={"a2a": ("--cp-comm-type a2a",), "a2a+p2p": ("--cp-comm-type a2a+p2p",)},
                        megatron_when=lambda s: s.cp > 1)
    """How CP ranks share keys and values: a ring of K/V blocks (``p2p``, Liu et al. 2023), all-to-alls that
    turn the sequence split into a head split (``a2a``, DeepSpeed-Ulysses, Jacobs et al. 2023), or both, a2a
    inside each node and a ring across (``a2a+p2p``, Megatron-Core ``--cp-comm-type``)."""
    cross_entropy_fusion: bool = knob(False, choices=_BOOL, axis=True, quiet=True, label=lambda v: "cef" if v else "",
                                      help="Fused cross-entropy loss: no fp32 copy of the logits, one pass over "
                                           "them (Megatron-Core --cross-entropy-loss-fusion).",
                                      megatron={True: ("--cross-entropy-loss-fusion",)})
    """The vocab-parallel cross entropy runs fused (Megatron-Core ``--cross-entropy-loss-fusion``,
    megatron/core/fusions/fused_cross_entropy.py, or Transformer Engine's ``parallel_cross_entropy``): it reads
    the 16-bit logits once and writes their gradient in place, where the unfused loss casts them to an fp32 copy and
    makes three passes over it (tensor_parallel/cross_entropy.py)."""
    loss_impl: str = knob("megatron", choices=LOSS_IMPLS, after="cross_entropy_fusion", quiet=True,
                          label=lambda v: {"megatron": "", "torch": "tce", "torch-compiled": "tcec"}[v],
                          help="Whose cross-entropy loss: Megatron-Core's vocab-parallel one, or PyTorch's "
                               "F.cross_entropy on an fp32 copy of the logits as torchtitan runs it, eager "
                               "(torch) or under torch.compile (torch-compiled).")
    """Which loss implementation runs: Megatron-Core's ``vocab_parallel_cross_entropy`` (fused with
    ``cross_entropy_fusion``), or ``F.cross_entropy(pred.flatten(0, 1).float(), labels)`` as torchtitan's loss
    (``train.py`` @9dec370, ``components/loss.py`` later), eager (``torch``; torchtitan @9dec370 did not compile it:
    "compiling loss function causes CUDA errors") or compiled with the model (``torch-compiled``:
    ``build_cross_entropy_loss`` wraps it in ``torch.compile`` when ``training.compile`` is set)."""
    cuda_graphs: bool = knob(False, after="loss_impl", quiet=True, choices=_BOOL, axis=True,
                             label=lambda v: "cg" if v else "",
                             help="Capture each training iteration as one CUDA graph (Megatron-Core "
                                  "--cuda-graph-impl full_iteration): kernels replay at the graph's launch cost and "
                                  "the host issues none of them.",
                             megatron={True: ("--cuda-graph-impl full_iteration",)})
    """Megatron-Core's full-iteration CUDA graph (``cuda_graph_impl="full_iteration"``, transformer_config.py;
    Megatron-Bridge's Blackwell MoE presets from 26.06): the forward and backward of every micro-batch are captured
    once and replayed, so each kernel costs the graph's per-node launch (``GPUSpec.graph_kernel_overhead``) instead of
    an eager launch and the host issues nothing (``host_launch`` does not bind). Per-layer graphs of some modules
    (``transformer_engine`` with a scope) are not modelled, nor the memory the graph's static pool holds."""
    fp8_attention: bool = knob(False, after="cuda_graphs", quiet=True, choices=_BOOL, axis=True,
                               label=lambda v: "fp8attn" if v else "",
                               help="Run the fused attention in FP8 too (Megatron-Core --fp8-dot-product-attention; "
                                    "an FP8 precision): the GPU's measured FP8/BF16 attention time ratios.",
                               megatron={True: ("--fp8-dot-product-attention",)})
    """Transformer Engine's FP8 dot-product attention through cuDNN (Megatron-Core ``fp8_dot_product_attention``;
    Megatron-Bridge's 26.06+ GB300 MoE presets and GB200 GPT-OSS and Qwen3): forward and backward at the GPU's
    measured FP8/BF16 attention time ratios (``GPUSpec.fp8_attention_fwd_ratio``, ``fp8_attention_bwd_ratio``), and
    under a sliding window a backward over every causal block, as cuDNN's FP8 backward computes it. Otherwise the
    attention stays BF16 under every FP8 recipe."""
    fp8_output_layer: bool = knob(False, after="cuda_graphs", quiet=True, choices=_BOOL, axis=True,
                                  label=lambda v: "fp8head" if v else "",
                                  help="Run the output layer (LM head) in MXFP8 too (Megatron-Core --fp8-output-proj; "
                                       "mxfp8 only): its input and the logits' gradient cast, the GEMMs at the FP8 "
                                       "rate.",
                                  megatron={True: ("--fp8-output-proj",)})
    """The output layer under the MXFP8 autocast as a Transformer Engine linear (Megatron-Core ``fp8_output_proj``,
    transformer_config.py @d0b3b775: "run the LM-head output projection ... under the MXFP8 autocast context. Only
    active when fp8=True and fp8_recipe='mxfp8'"; Megatron-Bridge's GB200/GB300 DeepSeek-V3 and GPT-OSS presets from
    26.06). Otherwise the output layer stays BF16 under every FP8 recipe. Its FP8 weight copies are not counted in
    memory."""


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
    batch-level overlap of one micro-batch's forward with another's backward; DeepSeek-V3's DualPipe). Its schedule
    nodes cost the host time every layer (``moe_layer.COMBINED_1F1B_NODE_LAUNCHES``): on an eager host-bound step
    the overlap can lose more than it hides."""
    moe_dispatcher: str = knob("alltoall", quiet=True, choices=MOE_DISPATCHERS, axis=True,
                               label=lambda v: "" if v == "alltoall" else v,
                               fix_help="Dispatch the MoE tokens this way (the spaces: alltoall).",
                               help="MoE token dispatcher (ep > 1): alltoall (NCCL all-to-all of every routed copy) "
                                    "or flex (DeepEP/HybridEP: one copy per target node across nodes, forwarded "
                                    "over NVLink).",
                               megatron={"flex": ("--moe-token-dispatcher-type flex",
                                                  "--moe-flex-dispatcher-backend hybridep")})
    """How the routed tokens travel between EP ranks: Megatron-Core's ``alltoall`` dispatcher sends each of a token's
    top_k copies to its expert's rank (NCCL all-to-all); the ``flex`` dispatcher (``--moe-token-dispatcher-type
    flex`` with DeepEP or HybridEP) sends a token once to each remote node holding one of its experts and forwards it
    over NVLink there (DeepEP README, "forwarding data from NVLink domain to RDMA domain"; DeepEP
    docs/README_Hybrid-EP.md, "Hierarchical Communication Design")."""
    fused_grouped_mlp: bool = knob(False, quiet=True, choices=_BOOL, axis=True, label=lambda v: "fgm" if v else "",
                                   help="Transformer Engine's CuTe-DSL fused grouped MLP for the experts (MoE, "
                                        "mxfp8, etp 1, a gated MLP; Megatron-Core --use-transformer-engine-op-fuser "
                                        "with NVTE_CUTEDSL_FUSED_GROUPED_MLP=1): the activation, the prob scaling, "
                                        "the biases and fc2's input cast run in the GEMMs' epilogues.",
                                   megatron={True: ("--use-transformer-engine-op-fuser",
                                                    "--moe-mlp-glu-interleave-size 32")})
    """The experts' MLP through Transformer Engine's operation fuser with its CuTe-DSL grouped GEMMs (Megatron-Core
    ``use_transformer_engine_op_fuser``, ``TEGroupedMLP._make_fused_impl``; ``NVTE_CUTEDSL_FUSED_GROUPED_MLP=1``;
    Megatron-Bridge's ``cutedsl_fused_grouped_mlp``, its GB200/GB300 MoE presets from 26.06): fc1's grouped GEMM
    computes the gated activation (SwiGLU, or GPT-OSS's clamped quick-GeGLU), scales it by the router probabilities
    and writes it quantized for fc2; fc2's dgrad computes the activation's gradient and fc1's bias gradient (NVIDIA
    developer blog "Boosting MoE Training Throughput with Advanced Fusion Kernels", 2026; cudnn-frontend
    ``grouped_gemm_dglu``); fc2 adds its probability-scaled bias itself. The token counts stay on the GPU (no
    host sync). The GEMMs are priced as the unfused ones: no epilogue cost is added."""
    deepseek_fp8: bool = knob(False, quiet=True, choices=_BOOL, axis=True, label=lambda v: "dsfp8" if v else "",
                              fix_help="Use DeepSeek-V3's own FP8 kernels (the spaces: Megatron-LM's recipe).",
                              help="DeepSeek-V3's own FP8 kernels for fp8-blockwise MoE plans (ep > 1): the dispatch "
                                   "in FP8, the GEMMs at the tensor-wise rate.")
    """DeepSeek-V3's own FP8 stack, with fp8-blockwise: the dispatch all-to-all carries the tokens already cast to FP8
    (one fp32 scale per 1×128 tile) and the experts' up-projection reads them as they arrive, the combine staying BF16
    (arXiv 2412.19437 §3.3.3, DeepEP); its tile-scaled GEMMs run at the tensor-wise FP8 rate (DeepGEMM: "up to 1550
    TFLOPS on H800"), with no Transformer Engine padding. Without it fp8-blockwise is Megatron-LM's ``--fp8-recipe
    blockwise``: a BF16 dispatch (Megatron-Core's DeepEP and HybridEP dispatchers have none in FP8, fused_a2a.py
    @d98e8a6: "Currently, we do not support fp8 dispatch"), cuBLAS's blockwise-scaled GEMMs
    (``GPUSpec.fp8_blockwise_gemm_ratio``) and Fp8Padding."""

    @property
    def edp(self) -> int:
        """Expert-data-parallel degree: replicas of each expert shard, tp·cp·dp / (etp·ep) (Megatron-Core)."""
        return max(1, self.tp * self.cp * self.dp // (self.ep * self.etp))


def recomputed_layers(s: PlanPart, chunk_layers: float) -> float:
    """Layers of a model chunk of ``chunk_layers`` layers that a full recompute recomputes (0 without one)."""
    if s.recompute != "full":
        return 0.0
    # Megatron-Core block method: the first recompute_num_layers of the chunk's layers are checkpointed
    return chunk_layers if not s.recompute_layers else min(float(s.recompute_layers), chunk_layers)


def fused_loss(s: PlanPart) -> bool:
    """The loss reads the 16-bit logits once and writes their gradient in one pass: Megatron-Core's fused cross
    entropy, or PyTorch's under torch.compile (inductor fuses the fp32 upcast, softmax and gradient)."""
    return s.cross_entropy_fusion or s.loss_impl == "torch-compiled"


PARTS = (TransformerPlan, MoEPlan)
"""The parts this package adds to the plan."""

"""CSR (condition-specified routers): everything pairzoo knows about it, in one place (registry entry, card,
benchmark, zoo)."""

from typing import NamedTuple

from ..configuration import CsrConfig
from ..modeling import CsrModel
from ..registry import ModelSpec
from .common import PEER_PROFILES, Arm, Comparison, SpeedTarget, ZooEntry

# the option arms also run at cpu-medium, beside that budget's tri-encoder + router runs
CSR_PROFILES = ("cpu-medium", *PEER_PROFILES)
TRI = {"architecture": "tri"}
BI = {"architecture": "bi"}


class KgArm(NamedTuple):
    """A knowledge-graph arm: its `CsrConfig` overrides and the router-free arm it is compared with (None for a
    router-free arm)."""

    overrides: dict
    router_free: "str | None"


# Knowledge-graph arms on WN18RR (`pairzoo.train_kg` run folders `<arm>__seed<S>`, benchmarks/report.py's table;
# tuned by benchmarks/tune.py as `KG_COMPARISONS`).
KG_ARMS = {
    "tri-hadamard": KgArm({"architecture": "tri", "use_router": False, "tri_head": "hadamard"}, None),
    "tri-router": KgArm({"architecture": "tri"}, "tri-hadamard"),
    "tri-hadamard-router": KgArm({"architecture": "tri", "tri_head": "hadamard"}, "tri-hadamard"),
    # the reference code's reading of the router
    "tri-router-reference": KgArm({"architecture": "tri", "router": "reference"}, "tri-hadamard"),
    "bi": KgArm({"architecture": "bi", "use_router": False}, None),
    "bi-router": KgArm({"architecture": "bi"}, "bi"),
}
# The same arms as comparisons, one per router-free baseline (its first arm): what benchmarks/tune.py tunes on WN18RR.
KG_COMPARISONS = tuple(
    Comparison(
        f"csr-kg-{base.split('-')[0]}",
        tuple(Arm(label, "csr", arm.overrides) for label, arm in KG_ARMS.items() if base in (label, arm.router_free)),
        ("wn18rr",),
    )
    for base, arm in KG_ARMS.items()
    if arm.router_free is None
)

# CSR routes each sentence by the condition, so it refuses pair data (it would read the second sentence as the
# condition) and needs two sentences (a cosine regressor).
SPEC = ModelSpec(
    name="csr",
    config_class=CsrConfig,
    model_class=CsrModel,
    auto_class="AutoModel",
    task="conditional-similarity",
    trains_on=("conditional-similarity",),
    summary="CSR, condition-specified routers. The condition re-weights each sentence token's attention context "
    "(1 + w) in the router layers; tri-encoder (cacheable) or bi-encoder; cosine similarity. Baselines: "
    "use_router=False with tri_head none/hadamard/concat (C-STS tri-encoder) or architecture='bi'.",
    paper="Lin, Wang, Jia, Zheng 2024, Varying Sentence Representations via Condition-Specified Routers (EMNLP)",
    citation="""@inproceedings{lin2024csr,
  title = {Varying Sentence Representations via Condition-Specified Routers},
  author = {Lin, Ziyong and Wang, Quansen and Jia, Zixia and Zheng, Zilong},
  booktitle = {Proceedings of the 2024 Conference on Empirical Methods in Natural Language Processing},
  year = {2024}
}""",
    card_title="CSR (condition-specified routers)",
    limitation="Needs a condition and two sentences for every input and predicts a cosine similarity only, no "
    "classes.",
    embeds_sentences=True,
    comparisons=(
        Comparison(
            "csr-tri",
            (
                Arm("tri-encoder (hadamard)", "csr", {**TRI, "use_router": False, "tri_head": "hadamard"}),
                Arm("tri-encoder + router", "csr", TRI),
                # the router with a condition head too, in the last 3 of MiniLM's 6 layers (the paper's Fig. 4a
                # sweeps the last 1-4), and the reference code's reading
                Arm("tri-encoder (hadamard) + router", "csr", {**TRI, "tri_head": "hadamard"}, profiles=CSR_PROFILES),
                Arm(
                    "tri-encoder (hadamard) + router (last 3 layers)",
                    "csr",
                    {**TRI, "tri_head": "hadamard", "router_layers": [3, 4, 5]},
                    profiles=CSR_PROFILES,
                ),
                Arm("tri-encoder + router (reference)", "csr", {**TRI, "router": "reference"}, profiles=CSR_PROFILES),
                # the paper's d_k = d_c: the single-vector score scaled by the hidden size instead of the head size
                Arm(
                    "tri-encoder + router (hidden scale)",
                    "csr",
                    {**TRI, "router_scale": "hidden"},
                    profiles=CSR_PROFILES,
                ),
                Arm(
                    "tri-encoder (hadamard) + router (hidden scale)",
                    "csr",
                    {**TRI, "tri_head": "hadamard", "router_scale": "hidden"},
                    profiles=CSR_PROFILES,
                ),
            ),
            ("synthetic",),
        ),
        Comparison(
            "csr-bi",
            (
                Arm("bi-encoder", "csr", {**BI, "use_router": False}),
                Arm("bi-encoder + router", "csr", BI),
                # the c-sts bi-encoder form (every token pooled, token type 1 on the condition)
                Arm(
                    "bi-encoder (c-sts form)",
                    "csr",
                    {**BI, "use_router": False, "bi_pooling": "all"},
                    profiles=CSR_PROFILES,
                ),
            ),
            ("synthetic",),
        ),
    ),
    zoo_entries=(
        ZooEntry(
            "csr-bi-synthetic",
            "csr",
            "synthetic",
            {"architecture": "bi"},
            why="the bi-encoder with the condition-specified router on the conditional synthetic task (no C-STS here)",
        ),
    ),
    demo_overrides={},
    paper_numbers=(("CSR", "C-STS test Spearman 42.0 (tri-encoder)", "SimCSE-large"),),
    speed_targets=(
        SpeedTarget("forward time <= 1.10x the tri-encoder", "time", 1.10, "csr-tri"),
        SpeedTarget(
            "cached tri-encoder >= 5x faster than the bi-encoder (200 x 20 embeddings)",
            ("bi_over_cached_tri",),
            5.0,
            at_least=True,
        ),
        SpeedTarget("router overhead <= 1.10x the tri-encoder baseline", ("router_overhead_direct",), 1.10),
    ),
)

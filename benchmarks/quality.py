r"""Quality benchmark: every method against its own config-off baseline, same budget and hyper-parameters, 3+ seeds.

Each (comparison, arm, data set, seed) is one `pairzoo.train` run; its result is written, atomically, as one JSON file
under `<output_dir>/runs/` (config, seed, metrics, wall time, hardware, package versions, git commit). Existing files
are kept, so an interrupted benchmark resumes where it stopped (`--force` reruns). A run that raises writes no file:
its traceback is printed, the grid goes on, and the command ends with a SystemExit naming the failed runs (the same
command then reruns only those). `benchmarks/report.py` turns the
files into the Markdown table, the bar chart and the README's "Results" section. `--list` prints the planned runs
(id, epochs, training rows, done or not) without training; `--max_runs N` stops after N trained runs, and
`--time_budget_s S` starts no run that would end past S seconds (judged by the longest run so far), for a lent GPU
whose time is counted. `--workers N` trains N runs at once in N child processes of this script (for one GPU that a
single small run leaves mostly idle): this process first does every task-adaptive MLM step the pending runs need,
then each worker walks the plan in order and claims a run by creating `<output_dir>/runs/<run id>.json.claim`, so no
two train the same run; each worker gets `OMP_NUM_THREADS` = cores / N unless it is set. Not with `--max_runs`.

Profiles:
- `cpu-small`: the bundled MiniLM, capped rows, one epoch for every run (also where a comparison trains longer) and
  each comparison on its first (home) data set only (caps in `PROFILES`), run in this process, on 2 CPU cores in
  under an hour. Its numbers say that the pipeline works end to end and how each method moves at a tiny budget;
  they are not the methods' converged quality.
- `cpu-medium`: as `cpu-small` with 2,000 training rows, length 128 and full dev splits (about 3-5 minutes a run
  on 2 cores).
- `full`: any backbone, full training splits, three epochs, each run launched with `accelerate launch` (one GPU or
  several), for a GPU machine.
- `cpu-full`: the budget of the sentence-transformers peer (`../shared/reference/peers_minilm.json`):
  full training and dev splits, length 128, batch 16, learning rate 2e-5, warmup 0.1, weight decay 0.01, and the
  peer's epochs per data set (STS-B 1, SICK-E 2, MRPC 2; `dataset_args`; synthetic: 24,000 rows, 2 epochs, learning
  rate 1e-4, batch 32, length 64, the budget at which the cross-encoder learns it); seeds 0-2, in this process. Its
  runs come in `stages` (the required grid `PEER_REQUIRED_GRID` first, then the other Siamese hosts, MRPC, the other
  methods), each stage seed-major, so a partial grid has every arm on the same seeds.
- `gpu`: in one command on one GPU, batch 32, 3 epochs, bf16 when CUDA is available, in stages: the required grid
  `PEER_REQUIRED_GRID` on seeds 0-4; then the conditional comparisons `CONDITIONAL_COMPARISONS` (`seaver` and both
  CSR comparisons on synthetic at `cpu-full`'s synthetic budget, `seaver-absa` on both ABSA domains) and neighbor
  attention on SICK-E (`NEIGHBOR_ATTENTION_COMPARISONS`) at the paper's 5 epochs (`comparison_args`), these two stages
  on seeds 0-2 (`stage_seeds`). The comment above
  `PROFILES["gpu"]` estimates 36 + 43 + 26 minutes on one H100.

Training arguments of a run, later ones winning: the profile's `args`, its `dataset_args` for the run's data set,
its `comparison_args` for the run's comparison, the comparison's `train_args`, the arm's `train_args` (then, on CUDA,
the profile's `cuda_args`). So a method whose paper trains it differently (the Siamese hosts: learning rate 1e-3,
3 epochs) keeps its own schedule under every profile, and only the models without one take the peer's per-data-set
epochs. An arm or comparison with `profiles` runs only in those profiles, so the peer profiles' own arms leave the
earlier profiles' run ids as they were. An arm whose config overrides its model's config does not take (an option not
in this checkout) is refused before anything trains, since the config would keep it as an inert attribute; `--list`
names such arms. So is a plan whose runs still to run would read a data file that is not in the data folder
(`pairzoo.training.data.resolve_data_dir`: `$PAIRZOO_DATA_DIR`, else `../shared/data`): each run's train and
validation splits and, for the runs that score expressiveness, the dev splits `expressiveness_evaluations` reads
(`missing_data`); the refusal names each data set, split and missing path, and `--list` prints them as `#` lines.

Neighbor attention's runs also score the decoded [MASK] state (Recall@20, Precision@20; `expressiveness_metrics`) on
their dev split and, when trained on SICK-E, on the first `esnli_rows` e-SNLI dev rows of the profile (200, 1,000,
all); the report lists these as extra rows next to accuracy.

    python benchmarks/quality.py --profile cpu-small --output_dir benchmarks/results/cpu-small
    python benchmarks/quality.py --profile full --backbone roberta-base --only comateformer
    python benchmarks/quality.py --profile cpu-full --list
    python benchmarks/quality.py --profile cpu-full --only comateformer --datasets stsb --seeds 0 --max_runs 2
    python benchmarks/quality.py --profile cpu-full --only comateformer --arms "plain backbone" "comateformer (mix)"
    python benchmarks/quality.py --profile gpu
    python benchmarks/quality.py --profile gpu --workers 4 --time_budget_s 450

The GPU profile's WN18RR link prediction (CSR) runs through `pairzoo.train_kg`, not this script:
tri-encoder (hadamard) with and without the router, the paper's router-only tri-encoder, bi-encoder, seeds 0-2,
1,500 steps of batch 256 at lr 1e-4 (about 2.2 epochs of the 173,670 training rows with their inverses), all 3,034
dev triples. Measured: on an H200 (2026-11-26, `benchmarks/results/gpu-kg-h200-330s`) four runs side by side train
about 4.5 steps a second each, building batches in the training process; on an H100 (2026-11-26,
`benchmarks/results/gpu-kg-h100-430s`) nine runs side by side, each with one batch-building worker, kept the GPU at
100 % and trained about 21 steps a second in all (tri-encoder 2.2-2.3 each, bi-encoder 2.6), so the GPU, not the
collator (about 0.12 s of one CPU core for a 256-row batch), is the limit there. One seed's four arms (6,000 steps)
then take about 5 minutes with the evaluations, three seeds about 15; `--max_train_seconds` bounds a run that is
slower. The runs below build batches in 3 worker processes each (`--dataloader_num_workers`; 12 of the machine's 16
cores). Resumable (a run with a `metrics.json` is skipped); then
`python benchmarks/report.py --kg_dir benchmarks/results/gpu-kg` writes their table:

    S=0  # the seed; then 1 and 2
    for arm in 'tri-hadamard {"architecture":"tri","use_router":false,"tri_head":"hadamard"}' \
        'tri-router {"architecture":"tri"}' 'tri-hadamard-router {"architecture":"tri","tri_head":"hadamard"}' \
        'bi {"architecture":"bi","use_router":false}'; do set -- $arm; d=benchmarks/results/gpu-kg/$1__seed$S
      [ -f $d/metrics.json ] || { mkdir -p $d; python -m pairzoo.train_kg --model csr --backbone minilm --bf16 \
        --config_overrides "$2" --batch_size 256 --learning_rate 1e-4 --max_length 64 --max_steps 1500 \
        --max_train_seconds 420 --dataloader_num_workers 3 --export False --seed $S --output_dir $d \
        > $d/run.log 2>&1 & }; done; wait
"""

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run from a checkout without installing pairzoo

from pairzoo.fileio import write_text_atomic  # noqa: E402

# The peer profiles (the peer's budget and the GPU grid); the others are the earlier profiles, whose committed run
# files name exactly the arms that had no `profiles` restriction then.
PEER_PROFILES = ("cpu-full", "gpu")
EARLIER_PROFILES = ("cpu-small", "cpu-medium", "full")
# the CSR option arms also run at cpu-medium, where the tri-encoder + router collapse was measured (about 90 s a run)
CSR_PROFILES = ("cpu-medium", *PEER_PROFILES)


@dataclass(frozen=True)
class Arm:
    """One model configuration of a comparison: `label` names it in tables; `train_args` only where the method's
    paper trains it differently (e.g. a larger learning rate for parameter-efficient training); `profiles`: the
    profiles that run it (None: all); `adapted`: it trains on the run's backbone after the task-adaptive MLM step
    (`adapted_backbone`)."""

    label: str
    model: str
    overrides: dict = field(default_factory=dict)
    train_args: dict = field(default_factory=dict)
    profiles: "tuple | None" = None
    adapted: bool = False


@dataclass(frozen=True)
class Comparison:
    """A method's arms against its baseline (the first arm a profile runs) on `datasets`, with the same training
    arguments. `expressiveness`: after training, also measure Recall@20 / Precision@20 of the decoded [MASK] state
    (`pairzoo.training.expressiveness`) on the run's dev split and, for SICK-E runs, on e-SNLI dev. `profiles`: the
    profiles that run it (None: all)."""

    name: str
    arms: tuple
    datasets: tuple
    train_args: dict = field(default_factory=dict)
    expressiveness: bool = False
    profiles: "tuple | None" = None

    @property
    def baseline(self) -> Arm:
        return self.arms[0]


CSR_TRI = {"architecture": "tri"}
CSR_BI = {"architecture": "bi"}
COMPARISONS = [
    # pairzoo's own cross-encoder beside the sentence-transformers CrossEncoder of the peer file
    Comparison(
        "cross-encoder", (Arm("cross-encoder", "cross-encoder"),), ("stsb", "sick-e", "mrpc"), profiles=PEER_PROFILES
    ),
    Comparison(
        "seaver",
        (
            Arm("cross-encoder", "cross-encoder"),
            Arm("seaver", "seaver"),
            # the paper's Random-Augmentation ablation (as on ABSA): whether the condition is what helps
            Arm("seaver (random reweighting)", "seaver", {"reweighting_source": "random"}, profiles=PEER_PROFILES),
        ),
        ("synthetic",),
    ),
    # SEAVER on its real-data task, the aspect term as the condition, in the official script's set-up
    # (the c-sts transform on in both arms); alpha 2 is the official code's value, 0 and 3 the paper's others
    Comparison(
        "seaver-absa",
        (
            Arm("cross-encoder (transform)", "cross-encoder", {"use_transform": True}),
            Arm("seaver (alpha 2)", "seaver", {"use_transform": True}),
            Arm("seaver (alpha 0)", "seaver", {"use_transform": True, "alpha": 0.0}),
            Arm("seaver (alpha 3)", "seaver", {"use_transform": True, "alpha": 3.0}),
            # the paper's Random-Augmentation ablation: the same extra path, blocks between two random parts instead
            # of sentence and condition; a control for whether the condition is what helps
            Arm("seaver (random reweighting)", "seaver", {"use_transform": True, "reweighting_source": "random"}),
            # a head subset: half of MiniLM's 12 last-layer heads (chosen here, not taken from the paper)
            Arm("seaver (heads 0-5)", "seaver", {"use_transform": True, "reweight_heads": [0, 1, 2, 3, 4, 5]}),
        ),
        ("absa-restaurants", "absa-laptops"),
        profiles=PEER_PROFILES,
    ),
    Comparison(
        "csr-tri",
        (
            Arm("tri-encoder (hadamard)", "csr", {**CSR_TRI, "use_router": False, "tri_head": "hadamard"}),
            Arm("tri-encoder + router", "csr", CSR_TRI),
            # the router with a condition head too, in the last 3 of MiniLM's 6 layers (the paper's Fig. 4a
            # sweeps the last 1-4), and the reference code's reading
            Arm("tri-encoder (hadamard) + router", "csr", {**CSR_TRI, "tri_head": "hadamard"}, profiles=CSR_PROFILES),
            Arm(
                "tri-encoder (hadamard) + router (last 3 layers)",
                "csr",
                {**CSR_TRI, "tri_head": "hadamard", "router_layers": [3, 4, 5]},
                profiles=CSR_PROFILES,
            ),
            Arm("tri-encoder + router (reference)", "csr", {**CSR_TRI, "router": "reference"}, profiles=CSR_PROFILES),
            # the paper's d_k = d_c: the single-vector score scaled by the hidden size instead of the head size
            Arm(
                "tri-encoder + router (hidden scale)",
                "csr",
                {**CSR_TRI, "router_scale": "hidden"},
                profiles=CSR_PROFILES,
            ),
            Arm(
                "tri-encoder (hadamard) + router (hidden scale)",
                "csr",
                {**CSR_TRI, "tri_head": "hadamard", "router_scale": "hidden"},
                profiles=CSR_PROFILES,
            ),
        ),
        ("synthetic",),
    ),
    Comparison(
        "csr-bi",
        (
            Arm("bi-encoder", "csr", {**CSR_BI, "use_router": False}),
            Arm("bi-encoder + router", "csr", CSR_BI),
            # the c-sts bi-encoder form (every token pooled, token type 1 on the condition)
            Arm(
                "bi-encoder (c-sts form)",
                "csr",
                {**CSR_BI, "use_router": False, "bi_pooling": "all"},
                profiles=CSR_PROFILES,
            ),
        ),
        ("synthetic",),
    ),
    Comparison(
        "comateformer",
        (
            Arm("plain backbone", "comateformer", {"combined_layers": [], "combined_head_fraction": []}),
            # the model's defaults, whatever they are when the profile runs
            Arm("comateformer", "comateformer", profiles=EARLIER_PROFILES),
            # the paper's exact form and the integration options, each named by its options
            Arm("comateformer (paper)", "comateformer", {"integration": "paper"}, profiles=PEER_PROFILES),
            Arm("comateformer (mix)", "comateformer", {"integration": "mix"}, profiles=PEER_PROFILES),
            # mix with a 10x slower gate (g moves about 10 x the learning rate per step instead of 100 x)
            Arm(
                "comateformer (mix, scale 10)",
                "comateformer",
                {"integration": "mix", "mix_scale": 10.0},
                profiles=PEER_PROFILES,
            ),
            Arm(
                "comateformer (mix, l1)",
                "comateformer",
                {"integration": "mix", "key_normalization": "l1"},
                profiles=PEER_PROFILES,
            ),
            # mix drawing the plain arm's random numbers (same head init, same dropout masks for a seed): the arms
            # differ by what the combined heads do, not by another random stream
            Arm(
                "comateformer (mix, no M dropout)",
                "comateformer",
                {"integration": "mix", "combined_dropout": False},
                profiles=PEER_PROFILES,
            ),
            # the same with the 10x slower gate: the combined heads come in only as far as the data keep pushing them
            Arm(
                "comateformer (mix, no M dropout, scale 10)",
                "comateformer",
                {"integration": "mix", "combined_dropout": False, "mix_scale": 10.0},
                profiles=PEER_PROFILES,
            ),
            # an open gate at the start: N centred per row (2 sigmoid(N - mean N), about 1 for a typical key)
            # and M divided by the row's key count, so C is on S's scale (||C|| / ||S|| about 0.5 at initialisation)
            Arm(
                "comateformer (mix, count, centred gate, no M dropout)",
                "comateformer",
                {
                    "integration": "mix",
                    "combined_dropout": False,
                    "key_normalization": "count",
                    "center_difference": True,
                },
                profiles=PEER_PROFILES,
            ),
        ),
        ("sick-e", "mrpc", "stsb", "rte"),
    ),
]

MATCHERS = ("esim", "re2", "bimpm", "cafe", "diin", "drcn")
# SFA inside a gated skip connection, x + g SFA(x) with g zero at the start, on every host (on the full
# SICK-E split DRCN + SFA as printed lost 20 points to DRCN; gated it stayed within DRCN's seed spread)
GATED_SFA = {"feature_attention": "sfa", "feature_attention_residual": "gated"}
# and DRCN + SFA with a plain skip connection, and with the squeeze of the earlier code (branches summed before the
# average and max) instead of the paper's eq. 6
DRCN_SFA_VARIANTS = (
    Arm(
        "drcn + sfa (residual)",
        "siamese-matcher",
        {"matcher": "drcn", "feature_attention": "sfa", "feature_attention_residual": True},
        profiles=PEER_PROFILES,
    ),
    Arm(
        "drcn + sfa (branch-sum squeeze)",
        "siamese-matcher",
        {"matcher": "drcn", "feature_attention": "sfa", "sfa_squeeze": "branch_sum"},
        profiles=PEER_PROFILES,
    ),
)
for _matcher in MATCHERS:
    COMPARISONS.append(
        Comparison(
            f"siamese-{_matcher}",
            tuple(
                Arm(
                    f"{_matcher}" + ("" if fa == "none" else f" + {fa}"),
                    "siamese-matcher",
                    {"matcher": _matcher, "feature_attention": fa},
                )
                for fa in ("none", "fa", "sfa")
            )
            + (
                Arm(
                    f"{_matcher} + sfa (gated residual)",
                    "siamese-matcher",
                    {"matcher": _matcher, **GATED_SFA},
                    profiles=PEER_PROFILES,
                ),
            )
            # the gated arm's control for the required grid's hosts: the gates frozen at zero (the host, initialised
            # from the gated arm's random stream), so equal seeds separate what the blocks add from that shift
            + (
                (
                    Arm(
                        f"{_matcher} + sfa (gated residual, gates frozen at zero: control)",
                        "siamese-matcher",
                        {"matcher": _matcher, **GATED_SFA, "feature_attention_gate_trainable": False},
                        profiles=PEER_PROFILES,
                    ),
                )
                if _matcher in ("esim", "re2", "drcn")
                else ()
            )
            + (DRCN_SFA_VARIANTS if _matcher == "drcn" else ()),
            ("sick-e", "mrpc"),
            # small randomly initialised networks on frozen-or-not MiniLM word embeddings: a larger step size
            {"learning_rate": 1e-3, "num_train_epochs": 3},
        )
    )
# the parameter-efficient arms' learning-rate sweep (1e-3 is the arms above), chosen on dev
NEIGHBOR_ATTENTION_SWEEP = tuple(
    Arm(
        f"{label} (batch-norm head, lr {rate})",
        "neighbor-attention",
        {"training_mode": mode, "classifier_norm": "batch", **extra},
        {"learning_rate": float(rate)},
        profiles=PEER_PROFILES,
    )
    for label, mode, extra in (
        ("bitfit", "bitfit", {}),
        ("neighbor attention", "neighbor", {"lambda_m": 0.0, "lambda_n": 0.0}),
    )
    for rate in ("3e-3", "1e-2")
)
# full fine-tuning, BitFit and neighbor attention (without and with the paper's regularisers) on the
# task-adapted backbone, whose [MASK] has been trained to predict tokens
NEIGHBOR_ATTENTION_ADAPTED = tuple(
    Arm(
        f"{label} (adapted backbone)",
        "neighbor-attention",
        overrides,
        train_args,
        profiles=PEER_PROFILES,
        adapted=True,
    )
    for label, overrides, train_args in (
        ("full fine-tuning", {"training_mode": "full"}, {}),
        ("bitfit (batch-norm head)", {"training_mode": "bitfit", "classifier_norm": "batch"}, {"learning_rate": 1e-3}),
        (
            "neighbor attention (batch-norm head)",
            {"training_mode": "neighbor", "lambda_m": 0.0, "lambda_n": 0.0, "classifier_norm": "batch"},
            {"learning_rate": 1e-3},
        ),
        (
            "neighbor attention + reg (batch-norm head)",
            {"training_mode": "neighbor", "classifier_norm": "batch"},
            {"learning_rate": 1e-3},
        ),
    )
)
COMPARISONS.append(
    Comparison(
        "neighbor-attention",
        (
            Arm("full fine-tuning", "neighbor-attention", {"training_mode": "full"}),
            Arm("bitfit", "neighbor-attention", {"training_mode": "bitfit"}, {"learning_rate": 1e-3}),
            # the regularisers' weights default to the paper's 1.0 now; this arm is the method without them
            Arm(
                "neighbor attention",
                "neighbor-attention",
                {"training_mode": "neighbor", "lambda_m": 0.0, "lambda_n": 0.0},
                {"learning_rate": 1e-3},
            ),
            # the earlier profiles' regularised arm (weights 0.1); the peer profiles run the paper's weights (1)
            Arm(
                "neighbor attention + reg",
                "neighbor-attention",
                {"training_mode": "neighbor", "lambda_m": 0.1, "lambda_n": 0.1},
                {"learning_rate": 1e-3},
                profiles=EARLIER_PROFILES,
            ),
            # the paper's exact method: raw [MASK] state, objective CE - L_m - L_n (the config's defaults)
            Arm(
                "neighbor attention + reg (paper weights)",
                "neighbor-attention",
                {"training_mode": "neighbor"},
                {"learning_rate": 1e-3},
                profiles=PEER_PROFILES,
            ),
            # the same heads on the [MASK] state standardised per feature (`classifier_norm`)
            Arm(
                "neighbor attention (batch-norm head)",
                "neighbor-attention",
                {"training_mode": "neighbor", "lambda_m": 0.0, "lambda_n": 0.0, "classifier_norm": "batch"},
                {"learning_rate": 1e-3},
                profiles=PEER_PROFILES,
            ),
            # the batch-norm head with the paper's objective, CE - L_m - L_n (both weights 1, the config's defaults)
            Arm(
                "neighbor attention + reg (batch-norm head)",
                "neighbor-attention",
                {"training_mode": "neighbor", "classifier_norm": "batch"},
                {"learning_rate": 1e-3},
                profiles=PEER_PROFILES,
            ),
            Arm(
                "bitfit (batch-norm head)",
                "neighbor-attention",
                {"training_mode": "bitfit", "classifier_norm": "batch"},
                {"learning_rate": 1e-3},
                profiles=PEER_PROFILES,
            ),
            *NEIGHBOR_ATTENTION_SWEEP,
            *NEIGHBOR_ATTENTION_ADAPTED,
        ),
        ("sick-e", "rte"),
        expressiveness=True,
    )
)

# Full training-split sizes, for `--list` only (what a run trains on is what `pairzoo.train` loads); ABSA's are the
# seeded 90% of its training file (conflict rows dropped) that `pairzoo.train` trains on.
TRAIN_ROWS = {"stsb": 5749, "sick-e": 4439, "mrpc": 3668, "rte": 2490, "absa-restaurants": 3242, "absa-laptops": 2082}

# The peer profiles' required grid: pairzoo's cross-encoder and Comateformer's arms on the peer's three data sets, and
# ESIM, RE2 and DRCN (with its SFA variants) with none/FA/SFA on SICK-E.
PEER_REQUIRED_GRID = (
    ("cross-encoder", ("stsb", "sick-e", "mrpc")),
    ("comateformer", ("stsb", "sick-e", "mrpc")),
    ("siamese-esim", ("sick-e",)),
    ("siamese-re2", ("sick-e",)),
    ("siamese-drcn", ("sick-e",)),
)

# The training schedule shared by the CPU profiles; they differ only in rows and length.
CPU_TRAINING = {
    "num_train_epochs": 1,
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 64,
    "learning_rate": 5e-5,
    "warmup_steps": 0.1,
}
# The recipe of the sentence-transformers CrossEncoder runs in ../shared/reference/peers_minilm.json.
PEER_TRAINING = {
    "max_length": 128,
    "num_train_epochs": 1,
    "per_device_train_batch_size": 16,
    "per_device_eval_batch_size": 64,
    "learning_rate": 2e-5,
    "warmup_steps": 0.1,
    "weight_decay": 0.01,
}
# The synthetic task's budget. In a 2-epoch schedule the cross-encoder reached dev Spearman 85.07 after half
# an epoch and 87.32 after one (seed 0; with 8,000 rows x 3 epochs at this rate it stalls near 50); a 1-epoch
# schedule (the learning rate decays to 0 over the 750 steps) is at the edge: 61.25 / 87.08 / 8.52 on seeds 0-2,
# SEAVER 88.38 / 73.84 / 30.42. So the profile trains 2 epochs (1,500 steps, about 17 minutes a run on 2 cores):
# cross-encoder 89.90 / 90.10 / 90.00, SEAVER 90.27 / 85.37 / 89.91 (`--profile cpu-full --only seaver`).
SYNTHETIC_TRAINING = {
    "synthetic_train_size": 24000,
    "num_train_epochs": 2,
    "learning_rate": 1e-4,
    "per_device_train_batch_size": 32,
    "max_length": 64,
}
# The task-adaptive MLM step of the `adapted` arms (`pairzoo.adapt_mlm` flags): TAPT's learning
# rate, batch and warm-up (the module's defaults), 10 epochs of the task's distinct training sentences (SICK-E: about
# 1,500 steps), sentences cut at 64 tokens, seed 0; one adapted backbone per (backbone, data set) and output folder,
# shared by every seed and arm.
ADAPTATION = {"num_train_epochs": 10, "learning_rate": 1e-4, "batch_size": 32, "max_length": 64, "seed": 0}
# The conditional comparisons (SEAVER, CSR) and neighbor attention on SICK-E, as (comparison, data sets) pairs.
CONDITIONAL_COMPARISONS = (
    ("seaver-absa", ("absa-restaurants", "absa-laptops")),
    ("seaver", ("synthetic",)),
    ("csr-tri", ("synthetic",)),
    ("csr-bi", ("synthetic",)),
)
NEIGHBOR_ATTENTION_COMPARISONS = (("neighbor-attention", ("sick-e",)),)
PROFILES = {
    "cpu-small": {
        "backbone": "minilm",
        "seeds": (0, 1, 2),
        "args": {
            "max_train_samples": 256,
            "max_eval_samples": 200,
            "max_length": 64,
            **CPU_TRAINING,
        },
        "max_epochs": 1,
        "home_dataset_only": True,
        "esnli_rows": 200,
        "launcher": "in-process",
    },
    "cpu-medium": {
        "backbone": "minilm",
        "seeds": (0, 1, 2),
        "args": {
            "max_train_samples": 2000,
            "max_length": 128,
            **CPU_TRAINING,
        },
        "esnli_rows": 1000,
        "launcher": "in-process",
    },
    "full": {
        "backbone": "minilm",
        "seeds": (0, 1, 2),
        "args": {
            "max_length": 128,
            "num_train_epochs": 3,
            "per_device_train_batch_size": 32,
            "per_device_eval_batch_size": 128,
            "learning_rate": 2e-5,
            "warmup_steps": 0.1,
        },
        "esnli_rows": None,
        "launcher": "accelerate",
    },
    "cpu-full": {
        "about": "the sentence-transformers peer's budget: full splits, the peer's epochs per data set",
        "backbone": "minilm",
        "seeds": (0, 1, 2),
        "args": PEER_TRAINING,
        "dataset_args": {
            "stsb": {"num_train_epochs": 1},
            "sick-e": {"num_train_epochs": 2},
            "mrpc": {"num_train_epochs": 2},
            "absa-restaurants": {"num_train_epochs": 2},
            "absa-laptops": {"num_train_epochs": 2},
            "synthetic": SYNTHETIC_TRAINING,
        },
        # the neighbor-attention paper's 5 epochs (its range is 5-8) for all of that comparison's arms
        "comparison_args": {"neighbor-attention": {"num_train_epochs": 5}},
        # (comparison, data sets) in order; each stage runs seed-major before the next starts
        "stages": (
            PEER_REQUIRED_GRID,
            tuple((f"siamese-{m}", ("sick-e",)) for m in ("bimpm", "cafe", "diin")),
            tuple((f"siamese-{m}", ("mrpc",)) for m in MATCHERS),
            (*CONDITIONAL_COMPARISONS, *NEIGHBOR_ATTENTION_COMPARISONS),
        ),
        "esnli_rows": 1000,
        "launcher": "in-process",
    },
    # Measured so far (one H100, 2026-11-26, `--workers 4`, `benchmarks/results/gpu`): with four runs sharing the GPU,
    # a SICK-E run (417 steps) took 17.1 s wall for the plain arm and 37.0 s for Comateformer's paper form, loading
    # and evaluation included; at that pace the required grid's stage (220 runs) would take about 16-34 minutes.
    # Budget estimate written before any GPU run. On one H100 in one process, MiniLM at
    # batch 32 and length <= 128 is launch-bound, not FLOP-bound: about 20 ms a training step for a transformer arm
    # (Trainer host work and ~450 kernels; 6 * 22M parameters * 2k tokens is 0.3 TFLOP, ~2 ms) and about 12 ms for a
    # Siamese host (cuDNN LSTMs on MiniLM's word embeddings), plus ~2.5 s a run (model from disk, tokenising the
    # split, dev evaluation at batch 256).
    # The required grid's stage, 44 runs a seed: 9 transformer arms x (540 + 417 + 345) steps (STS-B, SICK-E, MRPC at 3
    # epochs) = 11,718 steps, 234 s; 17 Siamese runs x 417 steps = 7,089 steps, 85 s; 44 x 2.5 s = 110 s; about 429 s a
    # seed, 36 minutes for 5 seeds (in one process; `--workers` runs several at once).
    # The conditional stage, 25 runs a seed: on synthetic (24,000 rows, 2 epochs, batch 32: 1,500 steps) the
    # cross-encoder, SEAVER and its random-reweighting control (one backbone pass plus the reweighting, ~23 ms a step)
    # 4,500 steps, 102 s; csr-tri's 7 arms at ~45 ms (condition and both sentences: three backbone passes) 10,500
    # steps, 473 s; csr-bi's 3 arms at ~32 ms (two passes) 4,500 steps, 144 s; seaver-absa's 6 arms x (306 + 198) steps
    # (3 epochs of the 90% training splits, 3,242 and 2,082 rows) = 3,024 steps, 72 s; 25 x 2.5 s = 63 s; about 854 s a
    # seed, 43 minutes for 3 seeds.
    # The neighbor-attention stage, 15 runs a seed on SICK-E at the paper's 5 epochs (695 steps): full fine-tuning and
    # BitFit, on MiniLM and on the task-adapted backbone, with the BitFit learning-rate sweep (7 runs) 4,865 steps,
    # 97 s; the 8 neighbor-attention runs (about 2.5x a full step: 35 s each) 280 s; the adaptation step once (1,500
    # MLM steps, ~25 s); each run's [MASK] expressiveness on its 495 dev rows and 1,000 e-SNLI dev rows (`esnli_rows`)
    # on the GPU, ~5 s; 15 x (2.5 + 5) s = 113 s; about 515 s a seed, 26 minutes for 3 seeds.
    # 5 seeds everywhere would be 36 + 71 + 43 = 150 minutes, so the later stages run the first 3 seeds
    # (`stage_seeds`): 36 + 43 + 26 = about 105 minutes in all (about 120 at 25 ms a transformer step and 15 ms a
    # Siamese one), over a 25-minute session. Each stage is seed-major and the required grid's comes first, so
    # `--max_runs 132` (3 seeds) or `--seeds 0 1 2 3` keeps whole seeds, and `--only` splits the later stages over
    # several launches, if the first seed's time (printed with each run) says it would not fit.
    "gpu": {
        "about": (
            "the required grid (5 seeds), then the conditional comparisons and neighbor attention (3 seeds); 3 epochs "
            "(synthetic: 2, neighbor attention: 5), bf16 on CUDA (estimated 36 + 43 + 26 minutes on one H100)"
        ),
        "backbone": "minilm",
        "seeds": (0, 1, 2, 3, 4),
        "args": {
            **PEER_TRAINING,
            "num_train_epochs": 3,
            "per_device_train_batch_size": 32,
            "per_device_eval_batch_size": 256,
        },
        "dataset_args": {"synthetic": SYNTHETIC_TRAINING},
        # the neighbor-attention paper's 5 epochs; the required grid's SICK-E runs keep 3
        "comparison_args": {"neighbor-attention": {"num_train_epochs": 5}},
        "cuda_args": {"bf16": True},
        "stages": (PEER_REQUIRED_GRID, CONDITIONAL_COMPARISONS, NEIGHBOR_ATTENTION_COMPARISONS),
        # all seeds for the required grid, the first 3 for the conditional and neighbor-attention stages (the budget
        # above)
        "stage_seeds": (None, 3, 3),
        "esnli_rows": 1000,
        "launcher": "in-process",
    },
}


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True)
        # result files written while a benchmark runs are not code: they do not make the checkout dirty
        status = ["git", "status", "--porcelain", "--", ".", ":(exclude)benchmarks/results"]
        dirty = subprocess.run(status, cwd=REPO, capture_output=True, text=True).stdout
        return out.stdout.strip() + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def environment() -> dict:
    """Hardware and package versions of this process, stored in every result file."""
    import torch
    import transformers

    hardware = {
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
    }
    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    return {"hardware": hardware, "versions": versions, "git_commit": _git_commit()}


def available_comparisons() -> list[Comparison]:
    """`COMPARISONS` whose models are registered in this checkout."""
    from pairzoo import list_models

    names = set(list_models())
    return [c for c in COMPARISONS if all(arm.model in names for arm in c.arms)]


def unknown_overrides(arm: Arm) -> list[str]:
    """The config overrides of `arm` that its model's config class does not take as parameters in this checkout
    (a config would keep them as inert attributes, and the run would silently train another model)."""
    import inspect

    from pairzoo.registry import get_model_spec

    parameters = inspect.signature(get_model_spec(arm.model).config_class.__init__).parameters
    return sorted(set(arm.overrides) - set(parameters))


def profile_datasets(comparison: Comparison, profile: dict) -> tuple:
    """The data sets a profile without `stages` runs `comparison` on: all, or with `home_dataset_only` the first."""
    return comparison.datasets[:1] if profile.get("home_dataset_only") else comparison.datasets


def profile_arms(comparison: Comparison, name: str) -> tuple:
    """The arms of `comparison` that profile `name` runs (the first is their baseline)."""
    return tuple(arm for arm in comparison.arms if arm.profiles is None or name in arm.profiles)


def profile_stages(name: str, comparisons: "list[Comparison] | None" = None) -> list[list[tuple]]:
    """The (comparison, data sets) pairs profile `name` runs, in stages: its `stages` (entries whose comparison is
    not among `comparisons`, default `available_comparisons()`, left out), or one stage of every comparison that
    runs in the profile, on `profile_datasets`. A stage naming an unknown comparison or data set, or a `stage_seeds`
    that does not give one entry per stage, is a ValueError."""
    profile = PROFILES[name]
    comparisons = available_comparisons() if comparisons is None else comparisons
    if "stages" not in profile:
        chosen = [c for c in comparisons if c.profiles is None or name in c.profiles]
        return [[(c, profile_datasets(c, profile)) for c in chosen]]
    if "stage_seeds" in profile and len(profile["stage_seeds"]) != len(profile["stages"]):
        raise ValueError(f"PROFILES[{name!r}]['stage_seeds'] needs one entry per stage.")
    known = {c.name: c for c in COMPARISONS}
    selected = {c.name for c in comparisons}
    stages = []
    for stage in profile["stages"]:
        for comparison, datasets in stage:
            if comparison not in known:
                raise ValueError(f"PROFILES[{name!r}]['stages']: unknown comparison {comparison!r}.")
            extra = set(datasets) - set(known[comparison].datasets)
            if extra:
                raise ValueError(f"PROFILES[{name!r}]['stages']: {comparison!r} has no data set {sorted(extra)}.")
        stages.append([(known[c], tuple(d)) for c, d in stage if c in selected])
    return stages


def profile_train_args(
    comparison: Comparison, arm: Arm, profile: dict, dataset: "str | None" = None, cuda: bool = False
) -> dict:
    """Training arguments of one run: the profile's, its `dataset_args` of `dataset`, its `comparison_args` of the
    comparison, the comparison's, the arm's (later ones win), and with `cuda` the profile's `cuda_args`; the profile's
    `max_epochs` caps the result."""
    dataset_args = profile.get("dataset_args", {}).get(dataset, {})
    comparison_args = profile.get("comparison_args", {}).get(comparison.name, {})
    args = {**profile["args"], **dataset_args, **comparison_args, **comparison.train_args, **arm.train_args}
    if cuda:
        args |= profile.get("cuda_args", {})
    if "max_epochs" in profile:
        args["num_train_epochs"] = min(args["num_train_epochs"], profile["max_epochs"])
    return args


@dataclass(frozen=True)
class PlannedRun:
    """One run of a profile's plan, with its resolved training arguments."""

    comparison: Comparison
    arm: Arm
    baseline: Arm
    dataset: str
    seed: int
    train_args: dict

    @property
    def id(self) -> str:
        return run_id(self.comparison, self.arm, self.dataset, self.seed)


def plan_runs(
    name: str,
    seeds: tuple,
    comparisons: "list[Comparison] | None" = None,
    datasets: "tuple | None" = None,
    cuda: bool = False,
) -> list[PlannedRun]:
    """The runs of profile `name` in the order they run: stage by stage; within a stage seed-major for profiles
    with `stages` (every arm on seed 0 first, so a partial grid stays balanced), else comparison by comparison. A
    stage with a `stage_seeds` entry N runs only the first N of `seeds`. `comparisons` and `datasets` select (default:
    all)."""
    profile = PROFILES[name]
    stages = profile_stages(name, comparisons)
    stage_seeds = profile.get("stage_seeds", (None,) * len(stages))
    runs = []
    for stage, count in zip(stages, stage_seeds):
        pairs = [(c, d) for c, ds in stage for d in ds if datasets is None or d in datasets]
        if "stages" in profile:
            order = [(c, d, s) for s in seeds[:count] for c, d in pairs]
        else:
            order = [(c, d, s) for c, d in pairs for s in seeds]
        for comparison, dataset, seed in order:
            arms = profile_arms(comparison, name)
            for arm in arms:
                args = profile_train_args(comparison, arm, profile, dataset, cuda)
                runs.append(PlannedRun(comparison, arm, arms[0], dataset, seed, args))
    return runs


def planned_rows(dataset: str, args: dict) -> "int | None":
    """Training rows of a run (`TRAIN_ROWS` under the run's `max_train_samples`); None where unknown."""
    full = args.get("synthetic_train_size", 2000) if dataset == "synthetic" else TRAIN_ROWS.get(dataset)
    cap = args.get("max_train_samples")
    return cap if full is None else min(full, cap or full)


def unknown_arm_overrides(runs: list[PlannedRun]) -> dict:
    """`unknown_overrides` of the arms of `runs` that have any, by `comparison / arm` label."""
    arms = {f"{r.comparison.name} / {r.arm.label}": r.arm for r in runs}
    return {label: unknown_overrides(arm) for label, arm in arms.items() if unknown_overrides(arm)}


def run_data(run: PlannedRun) -> list[tuple]:
    """(data set, split, what reads it) of each split `run` reads: its data set's train split (training, and the
    task-adaptive MLM step of an `adapted` arm) and validation split (evaluation) and, when its comparison scores
    expressiveness, the validation splits of `expressiveness_evaluations` (for SICK-E, e-SNLI's)."""
    needs = [(run.dataset, "train", "training"), (run.dataset, "validation", "evaluation")]
    if run.comparison.expressiveness:
        for name, _, _ in expressiveness_evaluations(run.dataset, run.train_args, None).values():
            needs.append((name, "validation", "[MASK] expressiveness"))
    return needs


def missing_data(runs: list[PlannedRun]) -> list[str]:
    """The pre-flight check of the data `runs` read (`run_data`), before anything trains: one line per (data set,
    split) whose files are not in the data folder (`resolve_data_dir`) or that cannot be read at all, naming the
    split, the data set, the missing paths, what reads them and how many runs (the first by id); one line for all
    when some run needs the data folder and there is none. Empty when everything is there."""
    from pairzoo.training.data import dataset_files, resolve_data_dir

    needs: dict = {}  # (data set, split) -> ({what reads it: None}, {run id: None}), in plan order
    for run in runs:
        for dataset, split, purpose in run_data(run):
            purposes, ids = needs.setdefault((dataset, split), ({}, {}))
            purposes[purpose], ids[run.id] = None, None
    problems, without_folder, data_dir = [], [], None
    for (dataset, split), (purposes, ids) in needs.items():
        count = f"{len(ids)} run{'s' if len(ids) > 1 else ''}"
        readers = f"read for {' and '.join(purposes)} by {count}, first {next(iter(ids))}"
        try:
            rels = dataset_files(dataset, split)
        except ValueError as err:
            problems.append(f"split {split!r} of {dataset!r}: {str(err).rstrip('.')} ({readers})")
            continue
        if not rels:
            continue
        if data_dir is None:
            try:
                data_dir = resolve_data_dir()
            except FileNotFoundError as err:
                without_folder.append(f"{dataset!r} {split}")
                folder_error = str(err).rstrip(".")
                continue
        missing = [repr(str(data_dir / rel)) for rel in rels if not (data_dir / rel).is_file()]
        if missing:
            verb = "is" if len(missing) == 1 else "are"
            problems.append(
                f"split {split!r} of {dataset!r} needs {', '.join(missing)}, which {verb} missing ({readers})"
            )
    if without_folder:
        problems.append(f"no data folder for {', '.join(without_folder)}: {folder_error}")
    return problems


def print_plan(runs: list[PlannedRun], runs_dir: Path, missing: "list[str]" = ()) -> None:
    """`--list`: one line per planned run (id, epochs, training rows, done or to run), a `#` line per arm whose
    config overrides this checkout does not know and per `missing` data (`missing_data`), then the counts and the
    training examples (rows x epochs) still to run."""
    done = todo = examples = 0
    for run in runs:
        exists = (runs_dir / f"{run.id}.json").exists()
        epochs = run.train_args["num_train_epochs"]
        rows = planned_rows(run.dataset, run.train_args)
        print(f"{run.id}  epochs={epochs}  rows={rows if rows is not None else '?'}  {'done' if exists else 'to run'}")
        done += exists
        if not exists:
            todo += 1
            examples += (rows or 0) * epochs
    for label, names in unknown_arm_overrides(runs).items():
        print(f"# {label!r}: {names} are not config parameters in this checkout")
    for line in missing:
        print(f"# missing data: {line}")
    print(f"{len(runs)} runs planned: {done} done, {todo} to run ({examples:,} training examples, rows x epochs)")


def run_id(comparison: Comparison, arm: Arm, dataset: str, seed: int) -> str:
    label = "".join(ch if ch.isalnum() else "-" for ch in arm.label)
    return f"{comparison.name}__{label}__{dataset}__seed{seed}"


def train_argv(
    arm: Arm, dataset: str, seed: int, args: dict, backbone: str, output_dir: Path, export: bool = False
) -> list[str]:
    """`pairzoo.train` flags of one run; `export` keeps the trained model in `<output_dir>/export`."""
    argv = ["--model", arm.model, "--backbone", backbone, "--dataset", dataset, "--seed", str(seed)]
    argv += ["--config_overrides", json.dumps(arm.overrides), "--output_dir", str(output_dir)]
    for key, value in args.items():
        argv += [f"--{key}", str(value)]
    return argv + ["--eval_strategy", "no", "--save_strategy", "no", "--export", str(export), "--report_to", "none"]


def adapted_backbone(backbone: str, dataset: str, output_dir: Path) -> Path:
    """`backbone` after the task-adaptive MLM step on `dataset`'s training sentences (`ADAPTATION`), the folder
    `<output_dir>/adapted/<backbone>__<dataset>` (ignored by git); `pairzoo.adapt_mlm` writes it when it is missing.
    It writes the folder under a temporary name and renames it into place, so a folder that exists is complete: every
    seed and arm of the output folder reuses it."""
    from pairzoo.adapt_mlm import ADAPTATION_FILE
    from pairzoo.adapt_mlm import main as adapt_main

    slug = "".join(ch if ch.isalnum() else "-" for ch in Path(backbone).name)
    folder = output_dir / "adapted" / f"{slug}__{dataset}"
    if not (folder / ADAPTATION_FILE).exists():
        flags = [f"--{key}={value}" for key, value in ADAPTATION.items()]
        if adapt_main(["--dataset", dataset, "--backbone", backbone, "--output_dir", str(folder), *flags]):
            raise SystemExit(f"the task-adaptive MLM step of {backbone!r} on {dataset!r} failed (message above).")
    return folder


def expressiveness_evaluations(dataset: str, args: dict, esnli_rows: "int | None") -> dict:
    """What `expressiveness_metrics` scores after a run on `dataset`: metric prefix -> (data set whose `validation`
    split it reads, keyword source, row limit): the run's own dev rows and, for SICK-E, e-SNLI dev (`snli`)."""
    evaluations = {"validation": (dataset, "pair", args.get("max_eval_samples"))}
    if dataset == "sick-e":
        evaluations["esnli"] = ("snli", "esnli-proxy", esnli_rows)
    return evaluations


def expressiveness_metrics(export_dir: Path, dataset: str, args: dict, esnli_rows: "int | None") -> dict:
    """Recall@20 and Precision@20 of the trained model's decoded [MASK] states: on the dev rows the run was
    scored on (keywords: the pair's content words) and, for SICK-E, on the first `esnli_rows` e-SNLI dev rows
    (keywords: content words shared by an explanation and the pair; a proxy for the official highlights)."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from pairzoo.training.data import load_dataset
    from pairzoo.training.expressiveness import evaluate_expressiveness

    model = AutoModelForSequenceClassification.from_pretrained(export_dir)
    model.to("cuda" if torch.cuda.is_available() else "cpu")
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    length = int(args.get("max_length", 128))
    metrics = {}
    for prefix, (name, keywords, limit) in expressiveness_evaluations(dataset, args, esnli_rows).items():
        # split= makes a missing file the loader's FileNotFoundError naming it (not a DatasetDict without the split)
        rows = [dict(r) for r in load_dataset(name, split="validation")["validation"]]
        rows = rows[: int(limit)] if limit is not None else rows
        result = evaluate_expressiveness(model, tokenizer, rows, keywords, k=20, max_length=length)
        metrics[f"{prefix}_recall@20"] = result["recall@20"]
        metrics[f"{prefix}_precision@20"] = result["precision@20"]
        metrics[f"{prefix}_keyword_examples"] = result["examples_with_keywords"]
    return metrics


def run_one(argv: list[str], launcher: str, output_dir: Path) -> dict:
    """Train and evaluate once; the validation metrics of `pairzoo.train`."""
    if launcher == "in-process":
        from pairzoo.training.cli import main as train_main

        return train_main([*argv, "--disable_tqdm", "True"])["metrics"]
    command = ["accelerate", "launch", "-m", "pairzoo.train", *argv]
    subprocess.run(command, check=True, cwd=REPO)
    return json.loads((output_dir / "metrics.json").read_text())["metrics"]


def train_and_record(run: PlannedRun, profile_name: str, backbone: str, output_dir: Path, env: dict) -> dict:
    """Train and evaluate `run` (after its task-adaptive MLM step, when the arm needs one); its run-file record."""
    profile = PROFILES[profile_name]
    comparison, arm, dataset, seed, train_args = run.comparison, run.arm, run.dataset, run.seed, run.train_args
    run_backbone, adaptation = backbone, None
    if arm.adapted:
        folder = adapted_backbone(backbone, dataset, output_dir)
        run_backbone, adaptation = str(folder), json.loads((folder / "adaptation.json").read_text())
    with tempfile.TemporaryDirectory(prefix="pairzoo-bench-") as scratch:
        scratch = Path(scratch)
        run_argv = train_argv(arm, dataset, seed, train_args, run_backbone, scratch, comparison.expressiveness)
        t0 = time.time()
        metrics = run_one(run_argv, profile["launcher"], scratch)
        if comparison.expressiveness:
            metrics |= expressiveness_metrics(scratch / "export", dataset, train_args, profile["esnli_rows"])
    return {
        "comparison": comparison.name,
        "arm": arm.label,
        "baseline": arm == run.baseline,
        "model": arm.model,
        "config_overrides": arm.overrides,
        "dataset": dataset,
        "split": "validation",
        "seed": seed,
        "profile": profile_name,
        "backbone": run_backbone,
        **({"adaptation": adaptation} if adaptation is not None else {}),
        "train_args": train_args,
        "metrics": metrics,
        "wall_seconds": round(time.time() - t0, 1),
        **env,
    }


def write_json_atomic(path: Path, payload: dict) -> None:
    """`payload` as indented JSON, written atomically (`write_text_atomic`)."""
    write_text_atomic(path, json.dumps(payload, indent=2, default=str))


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
    return value


CLAIM_SUFFIX = ".claim"


@contextlib.contextmanager
def claimed(path: Path):
    """A worker's claim on the run whose result file is `path`: yields True after creating `<path>.claim` (holding
    this process's id) exclusively, False when it exists (another worker has the run); removes the claim on exit."""
    claim = path.with_name(path.name + CLAIM_SUFFIX)
    try:
        fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        fd = None
    if fd is None:
        yield False
        return
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(str(os.getpid()))
        yield True
    finally:
        claim.unlink(missing_ok=True)


def remove_claims(runs_dir: Path) -> None:
    """Remove the claim files under `runs_dir` (left by a worker that was killed)."""
    for claim in runs_dir.glob(f"*.json{CLAIM_SUFFIX}"):
        claim.unlink(missing_ok=True)


def worker_argv(argv: list[str], deadline: "float | None", force_since: "float | None") -> list[str]:
    """A worker's command-line flags: the parent's `argv` without `--time_budget_s` (the deadline replaces it), then
    `--worker`, `--deadline` (when there is a budget) and `--force_since` (with `--force`)."""
    flags, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--time_budget_s":
            skip = True
        elif not arg.startswith("--time_budget_s="):
            flags.append(arg)
    flags.append("--worker")
    if deadline is not None:
        flags += ["--deadline", repr(deadline)]
    if force_since is not None:
        flags += ["--force_since", repr(force_since)]
    return flags


def run_workers(
    argv: list[str],
    workers: int,
    pending: list[PlannedRun],
    backbone: str,
    output_dir: Path,
    deadline: "float | None",
    force: bool,
) -> None:
    """`--workers N`: remove stale claims, do each task-adaptive MLM step the `pending` runs need (once per data set),
    start N workers (at most one per pending run), wait for them and remove the claims they left. A SystemExit names
    the workers that failed; the run files they finished are kept."""
    started = time.time()
    runs_dir = output_dir / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    remove_claims(runs_dir)
    if not pending:
        print(f"nothing to run; results in {runs_dir}", flush=True)
        return
    for dataset in dict.fromkeys(r.dataset for r in pending if r.arm.adapted):
        adapted_backbone(backbone, dataset, output_dir)

    def stamp(run: PlannedRun) -> "int | None":
        path = runs_dir / f"{run.id}.json"
        return path.stat().st_mtime_ns if path.exists() else None

    before = {run.id: stamp(run) for run in pending}
    count = min(workers, len(pending))
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // count)))
    command = [sys.executable, str(Path(__file__).resolve())]
    command += worker_argv(argv, deadline, started if force else None)
    print(f"starting {count} workers (OMP_NUM_THREADS={env['OMP_NUM_THREADS']})", flush=True)

    def stop(signum, frame):  # e.g. `timeout`'s SIGTERM: stop the workers and remove their claims before exiting
        raise SystemExit(f"stopped by signal {signum}; the run files finished are kept")

    processes, previous = [], signal.signal(signal.SIGTERM, stop)
    try:
        for _ in range(count):
            processes.append(subprocess.Popen(command, cwd=REPO, env=env))
        codes = [process.wait() for process in processes]
    except BaseException:
        for process in processes:
            if process.poll() is None:
                process.terminate()
        for process in processes:
            process.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
        remove_claims(runs_dir)
    trained = sum(stamp(run) not in (None, before[run.id]) for run in pending)
    print(f"{trained} runs trained by {count} workers in {time.time() - started:.0f}s; results in {runs_dir}")
    failed = sum(code != 0 for code in codes)
    if failed:
        raise SystemExit(
            f"{failed} of {count} workers failed (exit status {codes}; messages above); the run files finished are "
            "kept, so the same command resumes."
        )


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="cpu-small")
    parser.add_argument("--output_dir", type=Path, default=None, help="default: benchmarks/results/<profile>")
    parser.add_argument("--backbone", default=None, help="override the profile's backbone")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="override the profile's seeds")
    parser.add_argument("--only", nargs="+", default=None, help="comparison names to run (default: all)")
    parser.add_argument("--datasets", nargs="+", default=None, help="of those, only these data sets (default: all)")
    parser.add_argument(
        "--arms", nargs="+", default=None, help="of those, only the arms with these labels (default: all)"
    )
    parser.add_argument("--force", action="store_true", help="rerun runs whose result file exists")
    parser.add_argument("--list", action="store_true", help="print the planned runs and counts; train nothing")
    parser.add_argument("--max_runs", type=_positive_int, default=None, help="stop after this many trained runs")
    parser.add_argument(
        "--time_budget_s",
        type=_positive_int,
        default=None,
        help="start no run that would end past this many seconds, judged by the longest run so far",
    )
    parser.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="train this many runs at once, each in a worker process claiming runs by a .claim file (not with "
        "--max_runs)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # one of --workers' processes
    parser.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)  # time.time() budget end
    # with --force: a run file written after this time.time() was trained by another worker
    parser.add_argument("--force_since", type=float, default=None, help=argparse.SUPPRESS)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.workers > 1 and args.max_runs is not None:
        raise SystemExit("--max_runs and --workers > 1 do not go together: the workers share no run count.")
    profile = PROFILES[args.profile]
    output_dir = args.output_dir or REPO / "benchmarks" / "results" / args.profile
    backbone = args.backbone or profile["backbone"]
    seeds = tuple(args.seeds or profile["seeds"])
    comparisons = [c for stage in profile_stages(args.profile) for c, _ in stage]
    if args.only:
        unknown = set(args.only) - {c.name for c in comparisons}
        if unknown:
            known = [c.name for c in comparisons]
            raise SystemExit(
                f"--only: unknown comparison(s) {sorted(unknown)} in profile {args.profile!r}; known: {known}"
            )
        comparisons = [c for c in comparisons if c.name in args.only]
    if args.datasets:
        planned = {d for stage in profile_stages(args.profile, comparisons) for _, ds in stage for d in ds}
        unknown = set(args.datasets) - planned
        if unknown:
            raise SystemExit(f"--datasets: {sorted(unknown)} not among the selected comparisons' data sets.")
    import torch

    cuda = torch.cuda.is_available()
    runs = plan_runs(args.profile, seeds, comparisons, args.datasets and tuple(args.datasets), cuda)
    if args.arms:
        unknown = set(args.arms) - {r.arm.label for r in runs}
        if unknown:
            known = sorted({r.arm.label for r in runs})
            raise SystemExit(f"--arms: unknown arm label(s) {sorted(unknown)} among the selected runs; known: {known}")
        runs = [r for r in runs if r.arm.label in args.arms]
    pending = [r for r in runs if args.force or not (output_dir / "runs" / f"{r.id}.json").exists()]
    if args.list:
        if "about" in profile:
            print(f"# {args.profile}: {profile['about']}")
        print_plan(runs, output_dir / "runs", missing_data(pending))
        return
    unknown = unknown_arm_overrides(pending)
    if unknown:
        raise SystemExit(f"config_overrides this checkout's configs do not take: {unknown}; leave those arms out.")
    missing = missing_data(pending)  # before any adaptation step, worker or run starts
    if missing:
        raise SystemExit(
            f"data the runs still to run read is missing: {'; '.join(missing)}. Add it to the data folder, or leave "
            "those runs out (--only, --datasets, --arms); nothing was started."
        )
    if args.workers > 1 and not args.worker:
        deadline = None if args.time_budget_s is None else time.time() + args.time_budget_s
        run_workers(argv, args.workers, pending, backbone, output_dir, deadline, args.force)
        return
    env = environment()
    started = time.time()
    deadline = args.deadline
    if deadline is None and args.time_budget_s is not None:
        deadline = started + args.time_budget_s

    def done(path: Path) -> bool:
        """Whether the run's file exists; with --force only if a worker of the same --workers wrote it."""
        if not args.force:
            return path.exists()
        return args.force_since is not None and path.exists() and path.stat().st_mtime >= args.force_since

    if args.worker:
        (output_dir / "runs").mkdir(parents=True, exist_ok=True)
    trained, longest, failed = 0, 0.0, []
    for run in runs:
        path = output_dir / "runs" / f"{run.id}.json"
        if done(path):
            continue
        if args.max_runs is not None and trained == args.max_runs:
            print(f"stopped after {trained} runs (--max_runs)", flush=True)
            break
        if deadline is not None and time.time() + longest > deadline:
            print(f"stopped after {trained} runs: the next could end past --time_budget_s", flush=True)
            break
        with claimed(path) if args.worker else contextlib.nullcontext(True) as owned:
            if not owned or (args.worker and done(path)):
                continue  # another worker has it, or finished it since the check above
            begun = time.time()  # with the adaptation step, when the arm needs one
            try:
                payload = train_and_record(run, args.profile, backbone, output_dir, env)
            except Exception:  # one arm's bug must not cost the rest of the grid (a lent GPU's minutes)
                traceback.print_exc()
                print(f"FAILED {run.id}: no run file written; the grid goes on", flush=True)
                failed.append(run.id)
                continue
            write_json_atomic(path, payload)
            trained, longest = trained + 1, max(longest, time.time() - begun)
            print(f"[{time.time() - started:7.0f}s] {path.name}: {json.dumps(payload['metrics'])}", flush=True)
    print(f"done in {time.time() - started:.0f}s; results in {output_dir / 'runs'}", flush=True)
    if failed:
        raise SystemExit(
            f"{len(failed)} run(s) failed (tracebacks above), the others' run files are written: {failed}. The same "
            "command reruns only the runs without a file."
        )


__all__ = [
    "Arm",
    "COMPARISONS",
    "Comparison",
    "PROFILES",
    "PlannedRun",
    "available_comparisons",
    "environment",
    "expressiveness_evaluations",
    "missing_data",
    "plan_runs",
    "profile_stages",
    "profile_train_args",
    "run_id",
]

if __name__ == "__main__":
    main()

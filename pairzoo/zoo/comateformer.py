"""Comateformer: everything pairzoo knows about it, in one place (registry entry, card, benchmark, zoo)."""

from ..configuration import ComateformerConfig
from ..modeling import ComateformerForSequenceClassification, ComateformerModel
from ..registry import ModelSpec
from .common import EARLIER_PROFILES, PEER_PROFILES, Arm, Comparison, SpeedTarget, ZooEntry

# The web demo's three classes (`pairzoo.training.data.NLI_LABELS`), so its pair tab has class probabilities to show
# (the default head is a regression).
DEMO_LABELS = ("entailment", "neutral", "contradiction")

# A sentence-pair model: it has no input for a condition.
SPEC = ModelSpec(
    name="comateformer",
    config_class=ComateformerConfig,
    model_class=ComateformerForSequenceClassification,
    auto_class="AutoModelForSequenceClassification",
    encoder_class=ComateformerModel,
    task="pair-classification",
    trains_on=("pair-regression", "pair-classification"),
    summary="Comateformer: in layers 1-3 of a pretrained encoder the first 50/40/30% of heads use combined "
    "quasi-attention M = tanh(E) * 2 sigmoid(N) (affinity E, negative L1 difference N, no softmax) on the "
    "pretrained Q/K/V; a first-token head classifies (or regresses) the sentence pair.",
    paper="Li, Liang, Zhang 2024, Comateformer: Combined Attention Transformer for Semantic Sentence Matching "
    "(arXiv:2412.07220)",
    citation="""@misc{li2024comateformer,
  title = {Comateformer: Combined Attention Transformer for Semantic Sentence Matching},
  author = {Li, Bo and Liang, Di and Zhang, Zixin},
  year = {2024},
  eprint = {2412.07220},
  archivePrefix = {arXiv}
}""",
    card_title="Comateformer (combined attention)",
    limitation="Reads a sentence pair without a condition; heads of its first layers use combined attention instead "
    "of (`integration='paper'`) or blended with (`'mix'`) the pretrained softmax attention, so the encoder differs "
    "from the pretrained one there.",
    comparisons=(
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
                # mix drawing the plain arm's random numbers (same head init, same dropout masks for a seed): the
                # arms differ by what the combined heads do, not by another random stream
                Arm(
                    "comateformer (mix, no M dropout)",
                    "comateformer",
                    {"integration": "mix", "combined_dropout": False},
                    profiles=PEER_PROFILES,
                ),
                # the same with the 10x slower gate: the combined heads come in only as far as the data keep pushing
                # them
                Arm(
                    "comateformer (mix, no M dropout, scale 10)",
                    "comateformer",
                    {"integration": "mix", "combined_dropout": False, "mix_scale": 10.0},
                    profiles=PEER_PROFILES,
                ),
                # an open gate at the start: N centred per row (2 sigmoid(N - mean N), about 1 for a typical key)
                # and M divided by the row's key count, so C starts on S's scale
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
    ),
    zoo_entries=(
        ZooEntry(
            "comateformer-sick-e",
            "comateformer",
            "sick-e",
            {"integration": "mix", "combined_dropout": False, "mix_scale": 10.0},
            why="`integration='mix'` without dropout on M and with a 10x slower mix gate: the integration closest to "
            "the plain backbone in the cpu-full comparison (docs/results.md; its card shows the numbers)",
        ),
    ),
    demo_overrides={
        "id2label": dict(enumerate(DEMO_LABELS)),
        "label2id": {label: i for i, label in enumerate(DEMO_LABELS)},
    },
    paper_numbers=(("Comateformer", "average 89.2 over its matching benchmarks", "RoBERTa-base"),),
    speed_targets=(
        SpeedTarget("forward time <= 1.5x plain backbone", "time", 1.5, "comateformer"),
        SpeedTarget("peak extra memory <= 1.3x plain backbone", "memory", 1.3, "comateformer"),
    ),
)

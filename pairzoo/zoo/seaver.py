"""SEAVER: everything pairzoo knows about it, in one place (registry entry, card, benchmark, zoo)."""

from ..configuration import SeaverConfig
from ..modeling import SeaverForConditionalSimilarity
from ..registry import ModelSpec
from .common import PEER_PROFILES, Arm, Comparison, SpeedTarget, ZooEntry

# SEAVER reweights attention between the sentences and the condition, so it refuses pair data (it would read the
# second sentence as the condition).
SPEC = ModelSpec(
    name="seaver",
    config_class=SeaverConfig,
    model_class=SeaverForConditionalSimilarity,
    auto_class="AutoModel",
    task="conditional-similarity",
    trains_on=("conditional-similarity", "conditional-classification"),
    summary="SEAVER: the C-STS cross-encoder whose last hidden state is augmented by self-reweighting, "
    "softmax(SCAttn . CSAttn) from the last layer's sentence/condition attention blocks.",
    paper="Li, Fan, Gao 2024, SEAVER: Attention Reallocation for Mitigating Distractions in Language Models "
    "for Conditional Semantic Textual Similarity Measurement (Findings of EMNLP)",
    citation="""@inproceedings{li2024seaver,
  title = {{SEAVER}: Attention Reallocation for Mitigating Distractions in Language Models for Conditional Semantic
           Textual Similarity Measurement},
  author = {Li, Baixuan and Fan, Yunlong and Gao, Zhiqiang},
  booktitle = {Findings of the Association for Computational Linguistics: EMNLP 2024},
  year = {2024}
}""",
    card_title="SEAVER (attention reweighting)",
    limitation="Needs a condition for every pair (it reweights attention between the sentences and the condition), "
    "so it does not score plain sentence pairs; one joint encoder pass per input, nothing cached.",
    comparisons=(
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
                # the paper's Random-Augmentation ablation: the same extra path, blocks between two random parts
                # instead of sentence and condition; a control for whether the condition is what helps
                Arm("seaver (random reweighting)", "seaver", {"use_transform": True, "reweighting_source": "random"}),
                # a head subset: half of MiniLM's 12 last-layer heads (chosen here, not taken from the paper)
                Arm("seaver (heads 0-5)", "seaver", {"use_transform": True, "reweight_heads": [0, 1, 2, 3, 4, 5]}),
            ),
            ("absa-restaurants", "absa-laptops"),
            profiles=PEER_PROFILES,
        ),
    ),
    zoo_entries=(
        ZooEntry(
            "seaver-absa-restaurants",
            "seaver",
            "absa-restaurants",
            {"use_transform": True},
            why="SemEval-2014 restaurants, the aspect term as the condition, in the official script's set-up (the "
            "c-sts transform on, alpha 2); its card shows the comparison with the cross-encoder and with the "
            "random-reweighting ablation",
        ),
    ),
    demo_overrides={},
    paper_numbers=(("SEAVER", "C-STS test Spearman 43.83", "SimCSE-large cross-encoder"),),
    speed_targets=tuple(
        SpeedTarget("inference time <= 1.10x the cross-encoder", "time", 1.10, comparison)
        for comparison in ("seaver", "seaver-absa")
    ),
)

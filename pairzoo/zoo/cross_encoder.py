"""The C-STS cross-encoder: everything pairzoo knows about it, in one place (registry entry, card, benchmark, zoo)."""

from ..configuration import CrossEncoderConfig
from ..modeling import CrossEncoderForConditionalSimilarity
from ..registry import ModelSpec
from .common import PEER_PROFILES, Arm, Comparison, ZooEntry

# The plain cross-encoder reads any layout (`s1 SEP s2 [SEP c]`, `s1 SEP c`), so it is also the sentence-pair
# baseline (STS-B, SICK).
SPEC = ModelSpec(
    name="cross-encoder",
    config_class=CrossEncoderConfig,
    model_class=CrossEncoderForConditionalSimilarity,
    auto_class="AutoModel",
    task="conditional-similarity",
    trains_on=("conditional-similarity", "conditional-classification", "pair-regression", "pair-classification"),
    summary="C-STS cross-encoder baseline. One encoder reads `s1 SEP s2 SEP c`; a linear head on the first token.",
    paper="Deshpande et al. 2023, C-STS: Conditional Semantic Textual Similarity",
    citation="""@inproceedings{deshpande2023csts,
  title = {{C-STS}: Conditional Semantic Textual Similarity},
  author = {Deshpande, Ameet and Jimenez, Carlos E. and Chen, Howard and Murahari, Vishvak and Graf, Victoria and
            Rajpurohit, Tanmay and Kalyan, Ashwin and Chen, Danqi and Narasimhan, Karthik},
  booktitle = {Proceedings of the 2023 Conference on Empirical Methods in Natural Language Processing},
  year = {2023}
}""",
    card_title="C-STS cross-encoder",
    limitation="Scores each input jointly in one encoder pass: nothing can be cached, so scoring one sentence "
    "against N others costs N forward passes.",
    comparisons=(
        # pairzoo's own cross-encoder beside the sentence-transformers CrossEncoder of the peer file
        Comparison(
            "cross-encoder",
            (Arm("cross-encoder", "cross-encoder"),),
            ("stsb", "sick-e", "mrpc"),
            profiles=PEER_PROFILES,
        ),
    ),
    zoo_entries=(
        ZooEntry(
            "cross-encoder-stsb",
            "cross-encoder",
            "stsb",
            why="the C-STS cross-encoder on the pair task of the sentence-transformers peer (its baseline)",
        ),
    ),
    demo_overrides={},
)

"""The Siamese matchers with feature attention (FA, SFA): everything pairzoo knows about them, in one place (registry
entry, card, benchmark, zoo)."""

from ..configuration import SiameseMatcherConfig
from ..configuration.configuration_siamese_matcher import MATCHERS
from ..modeling import SiameseMatcherForSequenceClassification
from ..registry import ModelSpec
from .common import PEER_PROFILES, Arm, Comparison, SpeedTarget, ZooEntry

# The host networks (`SiameseMatcherConfig.matcher`), cited beside the SFA paper.
HOST_CITATIONS = {
    "esim": """@inproceedings{chen2017esim,
  title = {Enhanced {LSTM} for Natural Language Inference},
  author = {Chen, Qian and Zhu, Xiaodan and Ling, Zhen-Hua and Wei, Si and Jiang, Hui and Inkpen, Diana},
  booktitle = {Proceedings of the 55th Annual Meeting of the Association for Computational Linguistics},
  year = {2017}
}""",
    "re2": """@inproceedings{yang2019re2,
  title = {Simple and Effective Text Matching with Richer Alignment Features},
  author = {Yang, Runqi and Zhang, Jianhai and Gao, Xing and Ji, Feng and Chen, Haiqing},
  booktitle = {Proceedings of the 57th Annual Meeting of the Association for Computational Linguistics},
  year = {2019}
}""",
    "bimpm": """@inproceedings{wang2017bimpm,
  title = {Bilateral Multi-Perspective Matching for Natural Language Sentences},
  author = {Wang, Zhiguo and Hamza, Wael and Florian, Radu},
  booktitle = {Proceedings of the Twenty-Sixth International Joint Conference on Artificial Intelligence},
  year = {2017}
}""",
    "cafe": """@inproceedings{tay2018cafe,
  title = {Compare, Compress and Propagate: Enhancing Neural Architectures with Alignment Factorization for Natural
           Language Inference},
  author = {Tay, Yi and Tuan, Luu Anh and Hui, Siu Cheung},
  booktitle = {Proceedings of the 2018 Conference on Empirical Methods in Natural Language Processing},
  year = {2018}
}""",
    "diin": """@inproceedings{gong2018diin,
  title = {Natural Language Inference over Interaction Space},
  author = {Gong, Yichen and Luo, Heng and Zhang, Jian},
  booktitle = {International Conference on Learning Representations},
  year = {2018}
}""",
    "drcn": """@inproceedings{kim2019drcn,
  title = {Semantic Sentence Matching with Densely-Connected Recurrent and Co-Attentive Information},
  author = {Kim, Seonhoon and Kang, Inho and Kwak, Nojun},
  booktitle = {Proceedings of the AAAI Conference on Artificial Intelligence},
  year = {2019}
}""",
}
# SFA inside a gated skip connection, x + g SFA(x) with g zero at the start (the host exactly), on every host
GATED_SFA = {"feature_attention": "sfa", "feature_attention_residual": "gated"}
# the hosts whose gated arm gets a control with the gates frozen at zero (the quality benchmark's required grid)
GATE_CONTROL_HOSTS = ("esim", "re2", "drcn")
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


def host_comparison(matcher: str) -> Comparison:
    """The quality benchmark's comparison of one host: the host without, with FA and with SFA (the baseline first),
    SFA in a gated skip connection, its frozen-gate control (`GATE_CONTROL_HOSTS`) and DRCN's SFA variants, at the
    hosts' own schedule."""
    arms = tuple(
        Arm(
            f"{matcher}" + ("" if fa == "none" else f" + {fa}"),
            "siamese-matcher",
            {"matcher": matcher, "feature_attention": fa},
        )
        for fa in ("none", "fa", "sfa")
    )
    arms += (
        Arm(
            f"{matcher} + sfa (gated residual)",
            "siamese-matcher",
            {"matcher": matcher, **GATED_SFA},
            profiles=PEER_PROFILES,
        ),
    )
    if matcher in GATE_CONTROL_HOSTS:
        # the gated arm's control: the gates frozen at zero (the host, initialised from the gated arm's random
        # stream), so equal seeds separate what the blocks add from that shift
        arms += (
            Arm(
                f"{matcher} + sfa (gated residual, gates frozen at zero: control)",
                "siamese-matcher",
                {"matcher": matcher, **GATED_SFA, "feature_attention_gate_trainable": False},
                profiles=PEER_PROFILES,
            ),
        )
    if matcher == "drcn":
        arms += DRCN_SFA_VARIANTS
    # small randomly initialised networks on frozen-or-not MiniLM word embeddings: a larger step size
    return Comparison(f"siamese-{matcher}", arms, ("sick-e", "mrpc"), {"learning_rate": 1e-3, "num_train_epochs": 3})


# A sentence-pair model: it has no input for a condition.
SPEC = ModelSpec(
    name="siamese-matcher",
    config_class=SiameseMatcherConfig,
    model_class=SiameseMatcherForSequenceClassification,
    auto_class="AutoModelForSequenceClassification",
    task="pair-classification",
    trains_on=("pair-regression", "pair-classification"),
    summary="Siamese matcher: ESIM, RE2, BiMPM, CAFE, DIIN or DRCN with optional FA or SFA feature attention. "
    "No transformer encoder: "
    "FA (feature attention) or SFA (selective feature attention over stacked BiGRU branches) sits on both "
    "branches after the interaction attention; word embeddings are initialised from the backbone's input "
    "embedding matrix (MiniLM's; GloVe is not available offline); each sentence is tokenised alone.",
    paper="Zang, Liu 2024: Modeling Selective Feature Attention for Representation-based Siamese Text Matching; "
    "hosts: Chen et al. 2017 (ESIM), Yang et al. 2019 (RE2), Wang et al. 2017 (BiMPM), Tay et al. 2018 (CAFE), "
    "Gong et al. 2018 (DIIN), Kim et al. 2019 (DRCN)",
    citation="""@misc{zang2024sfa,
  title = {Modeling Selective Feature Attention for Representation-based Siamese Text Matching},
  author = {Zang, Jianxiang and Liu, Hui},
  year = {2024},
  eprint = {2404.16776},
  archivePrefix = {arXiv}
}""",
    card_title="Siamese matcher with feature attention",
    limitation="Has no pretrained transformer: each sentence is encoded alone by recurrent/attention layers over "
    "word embeddings taken from the backbone's input embedding matrix (no GloVe); it reads a sentence pair without "
    "a condition.",
    host_option="matcher",
    host_citations=HOST_CITATIONS,
    comparisons=tuple(host_comparison(matcher) for matcher in MATCHERS),
    zoo_entries=(
        ZooEntry(
            "siamese-re2-sfa-sick-e",
            "siamese-matcher",
            "sick-e",
            {"matcher": "re2", **GATED_SFA},
            {"learning_rate": 1e-3, "num_train_epochs": 3},
            why="RE2 with SFA in a gated skip connection, the hosts' own schedule: the Siamese configuration chosen "
            "from the cpu-full comparisons with each host and its frozen-gate control (docs/results.md; its card "
            "shows the numbers)",
        ),
    ),
    paper_numbers=(("RE2 + SFA", "QQP accuracy 90.97, 5.27M parameters", "GloVe embeddings"),),
    # per-pair wall-time ratios of `benchmarks/speed_siamese_matcher.py`, by batch size
    speed_targets=(
        SpeedTarget(
            "RE2 + SFA per-pair latency <= 0.1x a BERT-base-sized cross-encoder's (batch 32)",
            ("wall_ratios", "32", "re2+sfa / bert-base cross-encoder"),
            0.1,
        ),
        *(
            SpeedTarget(
                f"{host.upper()} + SFA per-pair latency <= 2x {host.upper()}'s",
                ("wall_ratios", "*", f"{host}+sfa / {host}"),
                2.0,
                each="batch",
            )
            for host in ("esim", "re2")
        ),
    ),
)

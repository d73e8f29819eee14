"""The models of the zoo: one module per method holds everything pairzoo knows about it, its `ModelSpec` (`SPEC`):
classes, tasks, summary, paper and citation, the model card's title, limitation, host citations and findings, the
quality benchmark's comparisons and arms, the speed and memory targets `benchmarks/speed.py` checks, the entries
`make zoo` trains, the web demo's bundled model and the paper's own numbers. The model cards (`pairzoo.hub_cards`),
`make zoo`, the web demo and the benchmarks read them from here.

`MODEL_SPECS` lists them in the order `list_models()` documents them. `trains_on` gives the task kinds each model
trains on (`pairzoo.train` refuses the others): each method module says why.
"""

from . import comateformer, cross_encoder, csr, neighbor_attention, seaver, siamese_matcher
from .common import EARLIER_PROFILES, PEER_PROFILES, Arm, Comparison, SpeedTarget, ZooEntry

MODEL_SPECS = [
    module.SPEC for module in (cross_encoder, seaver, csr, comateformer, siamese_matcher, neighbor_attention)
]

__all__ = ["EARLIER_PROFILES", "MODEL_SPECS", "PEER_PROFILES", "Arm", "Comparison", "SpeedTarget", "ZooEntry"]

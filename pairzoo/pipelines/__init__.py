"""Pipelines of pairzoo (registered with transformers' `pipeline` when `pairzoo` is imported).

`PIPELINES` maps each pipeline task to its class and the Auto class it loads models with (an export's
`custom_pipelines` entry): `conditional-similarity` for models trained with a condition, `pair-similarity` for models
trained on sentence pairs.
"""

from .pipeline_conditional_similarity import (
    ConditionalSimilarityPipeline,
    ScoringPipeline,
    encode_conditional_inputs,
    encode_pair_inputs,
)
from .pipeline_pair_similarity import PairSimilarityPipeline

PIPELINES: "dict[str, tuple[type[ScoringPipeline], str]]" = {
    ConditionalSimilarityPipeline.task_name: (ConditionalSimilarityPipeline, "AutoModel"),
    PairSimilarityPipeline.task_name: (PairSimilarityPipeline, "AutoModelForSequenceClassification"),
}

__all__ = [
    "PIPELINES",
    "ConditionalSimilarityPipeline",
    "PairSimilarityPipeline",
    "ScoringPipeline",
    "encode_conditional_inputs",
    "encode_pair_inputs",
]

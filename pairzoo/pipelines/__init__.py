"""Pipelines of pairzoo (registered with transformers' `pipeline` when `pairzoo` is imported)."""

from .pipeline_conditional_similarity import ConditionalSimilarityPipeline, encode_conditional_inputs

__all__ = ["ConditionalSimilarityPipeline", "encode_conditional_inputs"]

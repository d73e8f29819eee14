"""pairzoo: a Hugging Face model zoo of sentence-matching and conditional-similarity methods.

Importing pairzoo registers every model of `pairzoo.zoo` in the registry and with `AutoConfig` and the Auto classes
of its exports (`ModelSpec.auto_classes`), and the `conditional-similarity` and `pair-similarity` pipelines with
`transformers.pipeline`. Every config and
model class is also reachable as `pairzoo.<ClassName>`.
"""

import transformers
from transformers.pipelines import PIPELINE_REGISTRY

from . import configuration, modeling
from .backbones import DEFAULT_BACKBONE, list_backbones, load_tokenizer
from .pipelines import PIPELINES, ConditionalSimilarityPipeline, PairSimilarityPipeline, encode_conditional_inputs
from .registry import ModelSpec, create_model, get_model_spec, list_models, register_model
from .zoo import MODEL_SPECS

__version__ = "0.1.0"


def _register_with_transformers() -> None:
    for spec in MODEL_SPECS:
        register_model(spec)
        transformers.AutoConfig.register(spec.config_class.model_type, spec.config_class, exist_ok=True)
        for auto_class, model_class in spec.auto_classes.items():
            getattr(transformers, auto_class).register(spec.config_class, model_class, exist_ok=True)
    for task, (pipeline_class, auto_class) in PIPELINES.items():
        PIPELINE_REGISTRY.register_pipeline(
            task, pipeline_class=pipeline_class, pt_model=getattr(transformers, auto_class)
        )


_register_with_transformers()


def __getattr__(name: str):
    """`pairzoo.SeaverConfig`, `pairzoo.CrossEncoderForConditionalSimilarity`, ...: every config and model class."""
    for module in (configuration, modeling):
        if hasattr(module, name):
            return getattr(module, name)
    raise AttributeError(f"module 'pairzoo' has no attribute {name!r}")


__all__ = [
    "DEFAULT_BACKBONE",
    "ConditionalSimilarityPipeline",
    "ModelSpec",
    "PairSimilarityPipeline",
    "create_model",
    "encode_conditional_inputs",
    "get_model_spec",
    "list_backbones",
    "list_models",
    "load_tokenizer",
    "register_model",
]

"""pairzoo: a Hugging Face model zoo of sentence-matching and conditional-similarity methods.

Importing pairzoo registers every model with `AutoConfig`/`AutoModel` (or the matching `AutoModelFor...`) and the
`conditional-similarity` pipeline with `transformers.pipeline`.
"""

from transformers import AutoConfig, AutoModel
from transformers.pipelines import PIPELINE_REGISTRY

from .backbones import DEFAULT_BACKBONE, list_backbones, load_tokenizer
from .configuration import CrossEncoderConfig
from .modeling import CrossEncoderForConditionalSimilarity
from .pipelines import ConditionalSimilarityPipeline, encode_conditional_inputs
from .registry import ModelSpec, create_model, get_model_spec, list_models, register_model

__version__ = "0.1.0"

_AUTO_CLASSES = {"AutoModel": AutoModel}

register_model(
    ModelSpec(
        name="cross-encoder",
        config_class=CrossEncoderConfig,
        model_class=CrossEncoderForConditionalSimilarity,
        auto_class="AutoModel",
        pipeline_tag="sentence-similarity",
        task="conditional-similarity",
        summary="C-STS cross-encoder baseline. One encoder reads `s1 SEP s2 SEP c`; a linear head on the first token.",
        paper="Deshpande et al. 2023, C-STS: Conditional Semantic Textual Similarity",
    )
)


def _register_with_transformers() -> None:
    for name in list_models():
        spec = get_model_spec(name)
        AutoConfig.register(spec.config_class.model_type, spec.config_class, exist_ok=True)
        _AUTO_CLASSES[spec.auto_class].register(spec.config_class, spec.model_class, exist_ok=True)
    PIPELINE_REGISTRY.register_pipeline(
        "conditional-similarity", pipeline_class=ConditionalSimilarityPipeline, pt_model=AutoModel
    )


_register_with_transformers()

__all__ = [
    "DEFAULT_BACKBONE",
    "ConditionalSimilarityPipeline",
    "CrossEncoderConfig",
    "CrossEncoderForConditionalSimilarity",
    "ModelSpec",
    "create_model",
    "encode_conditional_inputs",
    "get_model_spec",
    "list_backbones",
    "list_models",
    "load_tokenizer",
    "register_model",
]

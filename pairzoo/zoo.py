"""The models of the zoo: one `ModelSpec` per registry name (append a block per method)."""

from .configuration import CrossEncoderConfig
from .modeling import CrossEncoderForConditionalSimilarity
from .registry import ModelSpec

MODEL_SPECS: list[ModelSpec] = []

MODEL_SPECS.append(
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

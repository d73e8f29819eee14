"""The models of the zoo: one `ModelSpec` per registry name, in the order `list_models()` documents them."""

import transformers

from .configuration import ComateformerConfig, CrossEncoderConfig, CsrConfig, SeaverConfig
from .modeling import (
    ComateformerForSequenceClassification,
    ComateformerModel,
    CrossEncoderForConditionalSimilarity,
    CsrModel,
    SeaverForConditionalSimilarity,
)
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

MODEL_SPECS.append(
    ModelSpec(
        name="seaver",
        config_class=SeaverConfig,
        model_class=SeaverForConditionalSimilarity,
        auto_class="AutoModel",
        pipeline_tag="sentence-similarity",
        task="conditional-similarity",
        summary="SEAVER: the C-STS cross-encoder whose last hidden state is augmented by self-reweighting, "
        "softmax(SCAttn . CSAttn) from the last layer's sentence/condition attention blocks.",
        paper="Li, Fan, Gao 2024, SEAVER: Attention Reallocation for Mitigating Distractions in Language Models "
        "for Conditional Semantic Textual Similarity Measurement (Findings of EMNLP)",
    )
)

MODEL_SPECS.append(
    ModelSpec(
        name="csr",
        config_class=CsrConfig,
        model_class=CsrModel,
        auto_class="AutoModel",
        pipeline_tag="sentence-similarity",
        task="conditional-similarity",
        summary="CSR, condition-specified routers. The condition re-weights each sentence token's attention context "
        "(1 + w) in the router layers; tri-encoder (cacheable) or bi-encoder; cosine similarity. Baselines: "
        "use_router=False with tri_head none/hadamard/concat (C-STS tri-encoder) or architecture='bi'.",
        paper="Varying Sentence Representations via Condition-Specified Routers (EMNLP 2024)",
    )
)

MODEL_SPECS.append(
    ModelSpec(
        name="comateformer",
        config_class=ComateformerConfig,
        model_class=ComateformerForSequenceClassification,
        auto_class="AutoModelForSequenceClassification",
        pipeline_tag="text-classification",
        task="pair-classification",
        summary="Comateformer: in layers 1-3 of a pretrained BERT/RoBERTa the first 50/40/30% of heads use combined "
        "quasi-attention M = tanh(E) * 2 sigmoid(N) (affinity E, negative L1 difference N, no softmax) on the "
        "pretrained Q/K/V; a first-token head classifies (or regresses) the sentence pair.",
        paper="Li, Liang, Zhang: Comateformer: Combined Attention Transformer for Semantic Sentence Matching",
    )
)

# The Comateformer encoder alone is reachable as AutoModel (pairzoo/__init__.py registers each spec's auto_class).
transformers.AutoModel.register(ComateformerConfig, ComateformerModel, exist_ok=True)

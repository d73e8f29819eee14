"""The models of the zoo: one `ModelSpec` per registry name, in the order `list_models()` documents them."""

from .configuration import (
    ComateformerConfig,
    CrossEncoderConfig,
    CsrConfig,
    NeighborAttentionConfig,
    SeaverConfig,
    SiameseMatcherConfig,
)
from .modeling import (
    ComateformerForSequenceClassification,
    ComateformerModel,
    CrossEncoderForConditionalSimilarity,
    CsrModel,
    NeighborAttentionForSequenceClassification,
    SeaverForConditionalSimilarity,
    SiameseMatcherForSequenceClassification,
)
from .registry import ModelSpec

# `trains_on`: the task kinds each model trains on (`pairzoo.train` refuses the others). The plain cross-encoder reads
# any layout (`s1 SEP s2 [SEP c]`, `s1 SEP c`), so it is also the sentence-pair baseline (STS-B, SICK). SEAVER
# reweights attention between the sentences and the condition, and CSR routes each sentence by the condition, so they
# refuse pair data (they would read its second sentence as the condition); CSR also needs two sentences (a cosine
# regressor). The sentence-pair models have no input for a condition; neighbor attention predicts a class from a
# [MASK] state, so it does not regress.
MODEL_SPECS: list[ModelSpec] = []

MODEL_SPECS.append(
    ModelSpec(
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
    )
)

MODEL_SPECS.append(
    ModelSpec(
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
    )
)

MODEL_SPECS.append(
    ModelSpec(
        name="csr",
        config_class=CsrConfig,
        model_class=CsrModel,
        auto_class="AutoModel",
        task="conditional-similarity",
        trains_on=("conditional-similarity",),
        summary="CSR, condition-specified routers. The condition re-weights each sentence token's attention context "
        "(1 + w) in the router layers; tri-encoder (cacheable) or bi-encoder; cosine similarity. Baselines: "
        "use_router=False with tri_head none/hadamard/concat (C-STS tri-encoder) or architecture='bi'.",
        paper="Lin, Wang, Jia, Zheng 2024, Varying Sentence Representations via Condition-Specified Routers (EMNLP)",
        citation="""@inproceedings{lin2024csr,
  title = {Varying Sentence Representations via Condition-Specified Routers},
  author = {Lin, Ziyong and Wang, Quansen and Jia, Zixia and Zheng, Zilong},
  booktitle = {Proceedings of the 2024 Conference on Empirical Methods in Natural Language Processing},
  year = {2024}
}""",
    )
)

MODEL_SPECS.append(
    ModelSpec(
        name="comateformer",
        config_class=ComateformerConfig,
        model_class=ComateformerForSequenceClassification,
        auto_class="AutoModelForSequenceClassification",
        encoder_class=ComateformerModel,
        task="pair-classification",
        trains_on=("pair-regression", "pair-classification"),
        summary="Comateformer: in layers 1-3 of a pretrained BERT/RoBERTa the first 50/40/30% of heads use combined "
        "quasi-attention M = tanh(E) * 2 sigmoid(N) (affinity E, negative L1 difference N, no softmax) on the "
        "pretrained Q/K/V; a first-token head classifies (or regresses) the sentence pair.",
        paper="Li, Liang, Zhang 2024, Comateformer: Combined Attention Transformer for Semantic Sentence Matching "
        "(arXiv:2412.07220)",
        citation="""@misc{li2024comateformer,
  title = {Comateformer: Combined Attention Transformer for Semantic Sentence Matching},
  author = {Li, Bo and Liang, Di and Zhang, Zixin},
  year = {2024},
  eprint = {2412.07220},
  archivePrefix = {arXiv}
}""",
    )
)

MODEL_SPECS.append(
    ModelSpec(
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
    )
)

MODEL_SPECS.append(
    ModelSpec(
        name="neighbor-attention",
        config_class=NeighborAttentionConfig,
        model_class=NeighborAttentionForSequenceClassification,
        auto_class="AutoModelForSequenceClassification",
        task="pair-classification",
        trains_on=("pair-classification",),
        summary="Neighbor attention on a frozen MLM encoder: label words in the input, the class predicted from a "
        "[MASK] state; in the upper layers each token also attends to k vocabulary neighbours (top-K of h W_e^T) "
        "through trainable K_b/V_b; about 3% trainable parameters. Baselines: training_mode='full' or 'bitfit'.",
        paper="Bai, Shang, Sun, Balasubramanian 2022, Learning for Expressive Task-Related Sentence Representations "
        "(arXiv:2205.12186)",
        citation="""@misc{bai2022expressive,
  title = {Learning for Expressive Task-Related Sentence Representations},
  author = {Bai, Xueying and Shang, Jinghuan and Sun, Yifan and Balasubramanian, Niranjan},
  year = {2022},
  eprint = {2205.12186},
  archivePrefix = {arXiv}
}""",
    )
)

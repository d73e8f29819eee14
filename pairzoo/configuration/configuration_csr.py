"""Configuration of CSR, condition-specified routers (EMNLP 2024, bigai-nlco/CSR), and its C-STS baselines."""

from .common import (
    BACKBONE_SUB_CONFIG,
    LabelScaleConfig,
    check_choice,
    check_label_scale,
    check_range,
    coerce_backbone_config,
)


class CsrConfig(LabelScaleConfig):
    r"""
    Hyper-parameters of [`CsrModel`]: conditioned sentence embeddings compared by cosine similarity. With
    `use_router=True` (the method) the condition re-weights each sentence token's attention context in the router
    layers, `h_t = (1 + w_t) * h'_t`; with `use_router=False` the model is a C-STS tri-/bi-encoder baseline
    (Deshpande et al. 2023).

    Which tri-encoder to use, measured on the synthetic conditional task (MiniLM, `benchmarks/quality.py --profile
    cpu-medium --only csr-tri csr-bi`: 2,000 rows, 1 epoch, dev Spearman, seeds 0-2; docs/results.md):

    - the defaults (the paper's router as the only path by which the condition enters, `tri_head="none"`) collapse:
      2.51 ± 1.13, against 63.63 ± 2.96 for the router-free tri-encoder with `tri_head="hadamard"`;
    - `tri_head="hadamard"` with the router (the recommended cacheable configuration) matches that baseline:
      63.41 ± 3.26 (last router layer only) and 63.03 ± 3.36 (`router_layers=[3, 4, 5]`);
    - `router="reference"` reaches 89.90 ± 0.18, the bi-encoder's level (89.70 ± 0.22), because the sentence pass
      attends to the condition's states from its first layer; it cannot use the cache path.

    WN18RR link prediction tells the same story (`python -m pairzoo.train_kg`, SimKGC recipe, batch 256, lr 1e-4,
    time-budgeted, dev MRR). Seeds 0-2 on one H100, 430 s a run (`benchmarks/results/gpu-kg-h100-430s`): the
    hadamard tri-encoder 37.62 ± 0.25 without and 37.24 ± 0.37 with the router, the bi-encoder 42.44 ± 0.22. Seed 0
    on one H200 (`benchmarks/results/gpu-kg-h200-330s` and `-200s`): the paper's router-only tri-encoder 22.14, the
    hadamard tri-encoder 39.94 without and 39.76 with the router, the bi-encoder 44.69 (41.72 in a shorter run, 41.82
    with the router), the reference router 40.22 (same shorter run).

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the encoder (BERT or RoBERTa family). Stored inside this config so that `from_pretrained(dir)`
            rebuilds the whole model offline. Required to build a model.
        architecture (`str`, *optional*, defaults to `"tri"`):
            `"tri"`: sentence and condition are encoded separately by the shared encoder (cacheable).
            `"bi"`: one pass over `[CLS] s SEP c SEP`, pooled over the sentence tokens.
        use_router (`bool`, *optional*, defaults to `True`):
            Apply the condition-specified router. `False` gives the tri-/bi-encoder baselines.
        router_layers (`list[int]`, *optional*, defaults to `None`):
            0-based indices of the encoder layers that route; `None` means the last layer only, as the reference
            code does (the paper's Fig. 4a sweeps the last 1-4 layers).
        router (`str`, *optional*, defaults to `"key"`):
            Score of the router. Tri-encoder: `"key"` scores `q_c . K_t / sqrt(d_k)`, `q_c` the last layer's query
            projection of the condition's first token, `K_t` layer t's key projection of the sentence tokens;
            `"hidden"` uses the hidden states themselves instead of the query/key projections; `"heavy"` adds new
            trainable `W_q`, `W_k` (d x d) per router layer. Bi-encoder: `"key"` is the layer's own head-averaged
            attention of the condition's first token on the sentence tokens, renormalised over them; `"hidden"` and
            `"heavy"` score the condition token's hidden state (or `W_q` of it) against the sentence tokens'.
            `"reference"` (tri-encoder only) follows the reference code instead of the paper (bigai-nlco/CSR,
            `utils/sts/tri_encoder.py` `TriEncoderForClassification_.forward` with `utils/sts/modeling_router.py`
            `RobertaSelfAttention.forward` / `RobertaAttention.get_router_score`, `router_type=3`): the condition is
            encoded alone as in the paper, but then every layer of the sentence pass uses the condition's last-layer
            hidden states as extra keys and values (projected by that layer's own key/value projections), the
            sentence's position ids continue after the condition's tokens, and `w_t` is the head-averaged attention
            probability of the sentence's own first token on each sentence token, taken from the softmax over the
            condition and sentence keys together (not renormalised: a row sums to the first token's attention mass on
            the sentence). There is no `q_c`. Differences from the reference code: the sentence keeps the tokenizer's
            encoding (the reference prepends a separator, `</s> <s> s </s>`, so its first token and its `cls` pooling
            read that separator), and the position offset is each condition's own token count (the reference offsets
            by the condition batch's padded width, which makes an embedding depend on its batch). The sentence pass
            depends on the condition from its first layer, so this router cannot use the cache path.
        router_scale (`str`, *optional*, defaults to `"head"`):
            `d_k` of the single-vector tri-encoder score: `"head"` (the attention head size, the scale of the
            reference code's attention scores) or `"hidden"` (the full hidden size, the literal single-vector
            reading). The bi-encoder `"key"` router and the `"reference"` router are attention probabilities and
            always use the head size; `"hidden"` is rejected with `router="reference"`. Measured (MiniLM, synthetic,
            `benchmarks/quality.py --profile cpu-medium --only csr-tri`, seeds 0-2, dev Spearman): `"hidden"` gives
            2.51 ± 1.15 router-only and 63.38 ± 3.16 with the hadamard head, against 2.51 ± 1.13 and 63.41 ± 3.26
            with `"head"`: the scale does not change what the router learns there.
        weighting (`str`, *optional*, defaults to `"one_plus"`):
            `"one_plus"`: `(1 + w) * h'`; `"only"`: `w * h'`; `"random"`: `(1 + w) * h'` with `w` a softmax of
            Gaussian noise over the sentence tokens (ablation; not deterministic).
        pooling (`str`, *optional*, defaults to `"mean"`):
            Sentence embedding: `"mean"` over the non-padding (bi: see `bi_pooling`) tokens of the last layer, or
            `"cls"`.
        bi_pooling (`str`, *optional*, defaults to `"sentence"`):
            Tokens the bi-encoder pools (bi architecture only). `"sentence"`: the sentence span `[CLS] s SEP` of
            `[CLS] s SEP c SEP`, without token types. `"all"`: the c-sts bi-encoder form (princeton-nlp/c-sts,
            `utils/sts/dataset_preprocessing.py` encodes `tokenizer(sentence, condition)` and
            `utils/sts/modeling_encoders.py` `BiEncoderForClassification` pools with `Pooler(attention_mask)`): every
            non-padding token, sentence and condition, and token type 1 on the condition span `c SEP` when the
            backbone has token types (`type_vocab_size >= 2`), so that for BERT-family tokenizers the input is the
            tokenizer's pair encoding. The encoding is otherwise the same for training and inference
            (`encode_bi_inputs`); it differs from the tokenizer's pair encoding in RoBERTa's single separator
            between sentence and condition (the tokenizer writes `</s></s>`) and in truncating only the sentence.
            c-sts's default `--pooler_type cls` is `pooling="cls"` here.
        tri_head (`str`, *optional*, defaults to `"none"`):
            Condition fusion of the C-STS tri-encoder (tri architecture only): `"none"`, `"hadamard"` (the sentence
            embedding times a linear transform of the condition embedding) or `"concat"` (`[s; c]` through
            Linear(2d, d) and the backbone's activation).
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout of the tri-encoder heads; `None` uses the backbone's `hidden_dropout_prob`.
        label_min (`float`, *optional*, defaults to 1.0):
            Lowest label. The cosine similarity is trained with MSE against `(y - label_min) / (label_max -
            label_min)` and reported as `label_min + (label_max - label_min) * cosine`.
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label.
        num_labels (`int`, *optional*, defaults to 1):
            Must be 1: CSR scores a pair by cosine similarity (regression only).
    """

    model_type = "csr"
    sub_configs_defaults = BACKBONE_SUB_CONFIG

    def __init__(
        self,
        backbone_config=None,
        architecture: str = "tri",
        use_router: bool = True,
        router_layers: "list[int] | None" = None,
        router: str = "key",
        router_scale: str = "head",
        weighting: str = "one_plus",
        pooling: str = "mean",
        bi_pooling: str = "sentence",
        tri_head: str = "none",
        classifier_dropout: "float | None" = None,
        label_min: float = 1.0,
        label_max: float = 5.0,
        **kwargs,
    ):
        check_choice("architecture", architecture, ("tri", "bi"))
        check_choice("router", router, ("key", "hidden", "heavy", "reference"))
        check_choice("router_scale", router_scale, ("head", "hidden"))
        check_choice("weighting", weighting, ("one_plus", "only", "random"))
        check_choice("pooling", pooling, ("mean", "cls"))
        check_choice("bi_pooling", bi_pooling, ("sentence", "all"))
        check_choice("tri_head", tri_head, ("none", "hadamard", "concat"))
        if router == "reference":
            if architecture != "tri":
                raise ValueError(f"`router` 'reference' needs architecture='tri', got {architecture!r}.")
            if not use_router:
                raise ValueError(
                    "`router` 'reference' needs use_router=True (without routers the reference code is the plain "
                    "tri-encoder)."
                )
            if router_scale != "head":
                raise ValueError(
                    f"`router_scale` {router_scale!r} does not apply to router='reference', whose weights are the "
                    "layer's own attention probabilities (scale: the head size)."
                )
        if bi_pooling != "sentence" and architecture != "bi":
            raise ValueError(f"`bi_pooling` {bi_pooling!r} needs architecture='bi', got {architecture!r}.")
        if tri_head != "none" and architecture != "tri":
            raise ValueError(f"`tri_head` {tri_head!r} needs architecture='tri', got {architecture!r}.")
        if classifier_dropout is not None:
            check_range("classifier_dropout", classifier_dropout, 0.0, 1.0)
        check_label_scale(label_min, label_max)
        if "id2label" not in kwargs:
            kwargs.setdefault("num_labels", 1)
        num_labels = len(kwargs["id2label"]) if kwargs.get("id2label") is not None else kwargs.get("num_labels")
        if num_labels is not None and num_labels != 1:
            raise ValueError(f"`num_labels` must be 1 (CSR is a cosine-similarity regressor), got {num_labels}.")
        self.backbone_config = coerce_backbone_config(backbone_config)
        if router_layers is not None:
            router_layers = sorted(set(router_layers))
            if not router_layers:
                raise ValueError("`router_layers` must name at least one layer (or be None for the last layer).")
            n_layers = getattr(self.backbone_config, "num_hidden_layers", None)
            for t in router_layers:
                if t < 0 or (n_layers is not None and t >= n_layers):
                    raise ValueError(
                        f"`router_layers` index {t} is out of range for a backbone with {n_layers} layers "
                        "(0-based indices)."
                    )
        self.architecture = architecture
        self.use_router = use_router
        self.router_layers = router_layers
        self.router = router
        self.router_scale = router_scale
        self.weighting = weighting
        self.pooling = pooling
        self.bi_pooling = bi_pooling
        self.tri_head = tri_head
        self.classifier_dropout = classifier_dropout
        self.label_min = float(label_min)
        self.label_max = float(label_max)
        super().__init__(**kwargs)


__all__ = ["CsrConfig"]

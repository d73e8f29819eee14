"""Configuration of CSR, condition-specified routers (EMNLP 2024, bigai-nlco/CSR), and its C-STS baselines."""

from .common import LabelScaleConfig, check_choice


class CsrConfig(LabelScaleConfig):
    r"""
    Hyper-parameters of [`CsrModel`]: conditioned sentence embeddings compared by cosine similarity. With
    `use_router=True` (the method) the condition re-weights each sentence token's attention context in the router
    layers, `h_t = (1 + w_t) * h'_t`; with `use_router=False` the model is a C-STS tri-/bi-encoder baseline
    (Deshpande et al. 2023). The defaults are the paper's tri-encoder, in which the router is the only path by which
    the condition enters; how it compares with `tri_head="hadamard"`, `router="reference"` and the bi-encoder is
    measured in docs/results.md.

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the encoder (any architecture of `pairzoo.modeling.encoders`), stored inside this config so
            that `from_pretrained(dir)` rebuilds the whole model offline. Required to build a model.
        architecture (`str`, *optional*, defaults to `"tri"`):
            `"tri"`: sentence and condition are encoded separately by the shared encoder (cacheable).
            `"bi"`: one pass over the tokenizer's pair encoding of (sentence, condition), pooled per `bi_pooling`.
        use_router (`bool`, *optional*, defaults to `True`):
            Apply the condition-specified router. `False` gives the tri-/bi-encoder baselines.
        router_layers (`list[int]`, *optional*, defaults to `None`):
            0-based indices of the encoder layers that route; `None`: the last layer only, as the reference code
            does (the paper sweeps the last 1-4 layers).
        router (`str`, *optional*, defaults to `"key"`):
            Router score. `"key"` (the paper's): tri-encoder `q_c . K_t / sqrt(d_k)` (the condition's first-token
            query against layer t's sentence keys), bi-encoder the layer's head-averaged attention of the condition's
            first token on the sentence tokens; `"hidden"` scores hidden states instead of projections; `"heavy"` adds
            trainable `W_q`, `W_k` per router layer. `"reference"` (tri-encoder only, not cacheable; refused on
            DeBERTa, MPNet and ModernBERT) follows bigai-nlco/CSR's code (`router_type=3`): every sentence layer also
            attends to the condition's last-layer states, sentence positions continue after the condition's, and
            `w_t` is the sentence's first token's attention; unlike that code, the sentence keeps the tokenizer's
            encoding (no prepended separator) and the offset is each condition's length, not the batch's padded width.
        router_scale (`str`, *optional*, defaults to `"head"`):
            `d_k` of the tri-encoder score: `"head"` (the head size, as the reference code scales attention) or
            `"hidden"` (the hidden size, the paper's literal reading). Bi-encoder `"key"` and `"reference"` always use
            the head size; `"hidden"` is rejected with `router="reference"`.
        weighting (`str`, *optional*, defaults to `"one_plus"`):
            `"one_plus"`: `(1 + w) * h'`; `"only"`: `w * h'`; `"random"`: `(1 + w) * h'` with `w` a softmax of
            Gaussian noise over the sentence tokens (ablation; not deterministic).
        pooling (`str`, *optional*, defaults to `"mean"`):
            Sentence embedding: `"mean"` over the non-padding (bi: see `bi_pooling`) tokens of the last layer, or
            `"cls"`.
        bi_pooling (`str`, *optional*, defaults to `"sentence"`):
            Bi-encoder tokens pooled (the input is the tokenizer's pair template, `<s> s </s></s> c </s>` on RoBERTa,
            truncating only the sentence). `"sentence"`: the sentence span, no token types. `"all"` (the c-sts
            bi-encoder): every token, with token type 1 on the condition where the backbone has token types.
        tri_head (`str`, *optional*, defaults to `"none"`):
            Condition fusion of the C-STS tri-encoder (tri architecture only): `"none"`, `"hadamard"` (the sentence
            embedding times a linear transform of the condition embedding) or `"concat"` (`[s; c]` through
            Linear(2d, d) and the backbone's activation).
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout of the tri-encoder heads; `None` uses the backbone's hidden dropout.
        label_min (`float`, *optional*, defaults to 1.0):
            Lowest label. The cosine similarity is trained with MSE against `(y - label_min) / (label_max -
            label_min)` and reported as `label_min + (label_max - label_min) * cosine`.
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label.
        num_labels (`int`, *optional*, defaults to 1):
            Must be 1: CSR scores a pair by cosine similarity (regression only).
    """

    model_type = "csr"

    architecture: str = "tri"
    use_router: bool = True
    router_layers: list[int] | None = None
    router: str = "key"
    router_scale: str = "head"
    weighting: str = "one_plus"
    pooling: str = "mean"
    bi_pooling: str = "sentence"
    tri_head: str = "none"
    classifier_dropout: float | None = None

    def derive_defaults(self, kwargs: dict) -> None:
        super().derive_defaults(kwargs)
        if self.router_layers is not None:
            self.router_layers = sorted(set(self.router_layers))

    def validate_choices(self) -> None:
        check_choice("architecture", self.architecture, ("tri", "bi"))
        check_choice("router", self.router, ("key", "hidden", "heavy", "reference"))
        check_choice("router_scale", self.router_scale, ("head", "hidden"))
        check_choice("weighting", self.weighting, ("one_plus", "only", "random"))
        check_choice("pooling", self.pooling, ("mean", "cls"))
        check_choice("bi_pooling", self.bi_pooling, ("sentence", "all"))
        check_choice("tri_head", self.tri_head, ("none", "hadamard", "concat"))

    def validate_reference_router(self) -> None:
        if self.router != "reference":
            return
        if self.architecture != "tri":
            raise ValueError(f"`router` 'reference' needs architecture='tri', got {self.architecture!r}.")
        if not self.use_router:
            raise ValueError(
                "`router` 'reference' needs use_router=True (without routers the reference code is the plain "
                "tri-encoder)."
            )
        if self.router_scale != "head":
            raise ValueError(
                f"`router_scale` {self.router_scale!r} does not apply to router='reference', whose weights are the "
                "layer's own attention probabilities (scale: the head size)."
            )

    def validate_architecture_options(self) -> None:
        if self.bi_pooling != "sentence" and self.architecture != "bi":
            raise ValueError(f"`bi_pooling` {self.bi_pooling!r} needs architecture='bi', got {self.architecture!r}.")
        if self.tri_head != "none" and self.architecture != "tri":
            raise ValueError(f"`tri_head` {self.tri_head!r} needs architecture='tri', got {self.architecture!r}.")

    def validate_num_labels(self) -> None:
        if self.num_labels != 1:
            raise ValueError(f"`num_labels` must be 1 (CSR is a cosine-similarity regressor), got {self.num_labels}.")

    def validate_router_layers(self) -> None:
        if self.router_layers is None:
            return
        if not self.router_layers:
            raise ValueError("`router_layers` must name at least one layer (or be None for the last layer).")
        n_layers = getattr(self.backbone_config, "num_hidden_layers", None)
        for t in self.router_layers:
            if t < 0 or (n_layers is not None and t >= n_layers):
                raise ValueError(
                    f"`router_layers` index {t} is out of range for a backbone with {n_layers} layers "
                    "(0-based indices)."
                )


__all__ = ["CsrConfig"]

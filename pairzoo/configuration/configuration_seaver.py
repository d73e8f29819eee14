"""Configuration of SEAVER (Li, Fan, Gao 2024, "Attention Reallocation for Mitigating Distractions in Language Models
for Conditional Semantic Textual Similarity Measurement"; official code BaixuanLi/SEAVER)."""

from .common import LabelledConfig, check_choice, check_range


class SeaverConfig(LabelledConfig):
    r"""
    Hyper-parameters of [`SeaverForConditionalSimilarity`]: the C-STS cross-encoder whose last hidden state is
    augmented by self-reweighting. From the last layer's attention probabilities, the sentence-to-condition and
    condition-to-sentence blocks of each head give reweighting matrices `W_S = softmax(SCAttn . CSAttn)` and
    `W_C = softmax(CSAttn . SCAttn)`; the reweighted hidden states of all heads are merged by `W_o` and added to
    `alpha` times the last hidden state before the c-sts head.

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the encoder (BERT, RoBERTa, XLM-RoBERTa, DeBERTa-v2/v3, ELECTRA, MPNet, DistilBERT, ModernBERT
            or ALBERT), stored inside this config so `from_pretrained(dir)` rebuilds the model offline. Required to
            build a model.
        alpha (`float`, *optional*, defaults to 2.0):
            Weight (>= 0) of the last hidden state in `AO = RO + alpha * O`: 2.0 is the official code's value, the
            paper's best is 0, 2 or 3 depending on the backbone.
        reweight_heads (`list[int]`, *optional*, defaults to `None`):
            Distinct heads of the last layer whose attention is used (paper Table 5); `None` uses all. `W_o` maps
            `len(reweight_heads) * hidden_size` to `hidden_size`.
        detach_reweighting (`bool`, *optional*, defaults to `True`):
            Stop gradients through `W_S`/`W_C`, as the official code does; `False` also trains the last layer's
            queries and keys through them.
        reweighting_source (`str`, *optional*, defaults to `"condition"`):
            `"condition"` (the method) or `"random"` (the paper's Random-Augmentation ablation, Table 6: the blocks
            between two parts of the input split at a random position, drawn on every forward).
        use_reweighting (`bool`, *optional*, defaults to `True`):
            `False` drops the reweighting and `W_o`: exactly the cross-encoder baseline (same parameter names and
            outputs).
        use_transform (`bool`, *optional*, defaults to `False`):
            Insert the c-sts "transform" (dropout, Linear(d, d), the backbone's activation) before the head. The
            official SEAVER script trains with it; `False` matches the baseline's default.
        pooling (`str`, *optional*, defaults to `"cls"`):
            Feature of `AO` read by the head: `"cls"` (first token), `"mean"` (mean over non-padding tokens) or
            `"flatten"` (the official code: every position up to `flatten_length`, zero-padded, flattened).
        flatten_length (`int`, *optional*, defaults to `None`):
            Number of positions `pooling="flatten"` reads (the official code uses 128); required with it and only
            with it; longer inputs are an error.
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout of the transform; `None` uses the backbone's hidden dropout, as the reference code does.
        label_min (`float`, *optional*, defaults to 1.0):
            Lowest label of the regression scale; labels are mapped to [0, 1] for the MSE loss and predictions back.
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label of the regression scale.
        num_labels (`int`, *optional*, defaults to 1):
            1 gives regression (MSE); more gives classification (cross-entropy).
    """

    model_type = "seaver"

    alpha: float = 2.0
    reweight_heads: list[int] | None = None
    detach_reweighting: bool = True
    reweighting_source: str = "condition"
    use_reweighting: bool = True
    use_transform: bool = False
    pooling: str = "cls"
    flatten_length: int | None = None
    classifier_dropout: float | None = None

    def validate_alpha(self) -> None:
        check_range("alpha", self.alpha, 0.0)

    def validate_choices(self) -> None:
        check_choice("reweighting_source", self.reweighting_source, ("condition", "random"))
        check_choice("pooling", self.pooling, ("cls", "mean", "flatten"))

    def validate_flatten_length(self) -> None:
        if self.pooling == "flatten":
            if self.flatten_length is None:
                raise ValueError("`flatten_length` must be an integer with pooling='flatten', got None.")
            check_range("flatten_length", self.flatten_length, 2)
        elif self.flatten_length is not None:
            raise ValueError(f"`flatten_length` is only used with pooling='flatten', got {self.flatten_length!r}.")

    def validate_reweight_heads(self) -> None:
        """`None`, or a non-empty list of distinct non-negative head indices valid for the backbone (when known)."""
        heads = self.reweight_heads
        if heads is None:
            return
        if not heads:
            raise ValueError(f"`reweight_heads` must be None or a non-empty list of head indices, got {heads!r}.")
        num_heads = getattr(self.backbone_config, "num_attention_heads", None)
        for head in heads:
            if head < 0:
                raise ValueError(f"`reweight_heads` must hold non-negative integers, got {head!r}.")
            if num_heads is not None and head >= num_heads:
                raise ValueError(f"`reweight_heads` index {head} is out of range for {num_heads} attention heads.")
        if len(set(heads)) != len(heads):
            raise ValueError(f"`reweight_heads` must not repeat a head, got {list(heads)}.")


__all__ = ["SeaverConfig"]

"""Configuration of Comateformer (Li, Liang, Zhang: "Comateformer: Combined Attention Transformer for Semantic
Sentence Matching"): combined quasi-attention heads inside a pretrained BERT/RoBERTa encoder."""

from .common import (
    BACKBONE_SUB_CONFIG,
    LabelledConfig,
    check_choice,
    check_label_scale,
    check_range,
    coerce_backbone_config,
)

GATES = ("double_sigmoid", "center")
AFFINITY_FUNCTIONS = ("tanh", "sigmoid")
DIFFERENCE_FUNCTIONS = ("sigmoid", "tanh", "arctan")
SUPPORTED_BACKBONES = ("bert", "roberta")
# The paper's placement on BERT-base: combined heads in layers 1-3 (0-based 0-2), on 50%, 40% and 30% of their heads.
PAPER_COMBINED_LAYERS = (0, 1, 2)
PAPER_HEAD_FRACTIONS = (0.5, 0.4, 0.3)


def default_combined_layers(num_hidden_layers: "int | None") -> list[int]:
    """The paper's combined layers, its encoder's first three, clamped to the layers an encoder of `num_hidden_layers`
    layers has: [0, 1, 2] on 3 or more layers (BERT-base, the 6-layer MiniLM), [0, 1] on the 2-layer test backbones;
    [0, 1, 2] when the depth is unknown."""
    return [i for i in PAPER_COMBINED_LAYERS if num_hidden_layers is None or i < num_hidden_layers]


class ComateformerConfig(LabelledConfig):
    r"""
    Hyper-parameters of [`ComateformerModel`] and [`ComateformerForSequenceClassification`].

    In a combined head with per-head queries q_i and keys k_j (d_k = head size), all from the pretrained projections:

        E_ij = alpha * q_i . k_j / sqrt(d_k)                       (affinity)
        N_ij = -beta * ||q_i - k_j||_1 / sqrt(d_k)                 (difference, computed with torch.cdist(p=1))
        M    = affinity_fn(E') * gate(N)                           (no softmax), output = M V

    with E' = E - mean_j(E) when `center_affinity`, else E, and

        gate(N) = 2 * difference_fn(N')                            (`gate="double_sigmoid"`, the default)
        gate(N) = difference_fn(N - mean_j(N))                     (`gate="center"`)

    where N' = N - mean_j(N) when `center_difference`, else N. With the defaults (tanh, sigmoid, no centring) this is
    the paper's M = tanh(E) * 2 sigmoid(N). Means over keys j are taken per query row over non-padding keys only, and
    M is zeroed on padding keys, so padding contributes nothing. Choices the paper leaves open, made here:

    - which heads: the FIRST ceil(f * H) heads of each combined layer (`modeling_comateformer.num_combined_heads`;
      a 1e-9 tolerance makes 0.3 * 10 give 3 heads, not 4); the others keep the backbone's softmax attention,
      computed with the backbone's configured attention implementation (eager, sdpa) on that head subset;
    - centring: per query row, over the non-padding keys; `center_difference` and `gate="center"` both centre N
      (centring is idempotent, so setting both equals `gate="center"`); the factor 2 of `double_sigmoid` multiplies
      whichever `difference_fn` is chosen;
    - training: the backbone's attention dropout is applied to M, as BERT applies it to softmax probabilities;
    - `alpha` and `beta` are fixed scalars, not learned.

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the encoder (`bert` or `roberta` family). Stored inside this config so `from_pretrained(dir)`
            rebuilds the whole model offline. Required to build a model.
        combined_layers (`list[int]`, *optional*, defaults to `None`):
            0-based encoder layers that get combined heads. Unique, each in `[0, num_hidden_layers)`. `[]` gives the
            plain backbone. `None` is the paper's placement, its encoder's first three layers (1-3), clamped to the
            backbone's depth (`default_combined_layers`): `[0, 1, 2]` on BERT-base and the 6-layer MiniLM, `[0, 1]`
            on the 2-layer test backbones; it is resolved here, so the saved config lists the layers.
        combined_head_fraction (`float` or `list[float]`, *optional*, defaults to `None`):
            Fraction of heads replaced in each of `combined_layers` (one value per layer, or one value for all), each
            in [0, 1]. Layer l gets ceil(f_l * H) combined heads, the first heads of the layer. All zeros gives the
            plain backbone exactly. `None` is the paper's 0.5, 0.4, 0.3 (one per layer of three `combined_layers`),
            trimmed with the default placement on a shallower backbone (`[0.5, 0.4]` on 2 layers); other explicit
            `combined_layers` need their own fractions.
        alpha (`float`, *optional*, defaults to 1.0):
            Scale of the affinity E.
        beta (`float`, *optional*, defaults to 1.0):
            Scale of the negative L1 distance N (>= 0).
        gate (`str`, *optional*, defaults to `"double_sigmoid"`):
            `"double_sigmoid"`: gate = 2 * difference_fn(N); `"center"`: gate = difference_fn(N - mean_j N).
        affinity_fn (`str`, *optional*, defaults to `"tanh"`):
            Function of E (paper Table 3 ablation): `"tanh"` or `"sigmoid"`.
        difference_fn (`str`, *optional*, defaults to `"sigmoid"`):
            Function of N inside the gate (paper Table 3 ablation): `"sigmoid"`, `"tanh"` or `"arctan"`.
        center_affinity (`bool`, *optional*, defaults to `False`):
            Centre E per query row (over non-padding keys) before `affinity_fn` (ablation).
        center_difference (`bool`, *optional*, defaults to `False`):
            Centre N per query row (over non-padding keys) before `difference_fn` (ablation).
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout of the sequence-classification head; `None` uses the backbone's `hidden_dropout_prob`, as
            transformers' own heads do.
        label_min (`float`, *optional*, defaults to 0.0):
            Lowest label of a regression data set (the training CLI passes it: 0 for STS-B, 1 for SICK-R). The head
            predicts on the label scale itself (MSE on raw labels, like transformers' heads); the bounds are kept for
            label checks and the model card.
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label of a regression data set.
        num_labels (`int`, *optional*, defaults to 1):
            1 gives regression (`problem_type="regression"`, MSE); more gives classification (cross-entropy).
    """

    model_type = "comateformer"
    sub_configs_defaults = BACKBONE_SUB_CONFIG

    def __init__(
        self,
        backbone_config=None,
        combined_layers: "list[int] | tuple[int, ...] | None" = None,
        combined_head_fraction: "float | list[float] | tuple[float, ...] | None" = None,
        alpha: float = 1.0,
        beta: float = 1.0,
        gate: str = "double_sigmoid",
        affinity_fn: str = "tanh",
        difference_fn: str = "sigmoid",
        center_affinity: bool = False,
        center_difference: bool = False,
        classifier_dropout: "float | None" = None,
        label_min: float = 0.0,
        label_max: float = 5.0,
        **kwargs,
    ):
        backbone_config = coerce_backbone_config(backbone_config)
        num_layers = getattr(backbone_config, "num_hidden_layers", None)
        if combined_layers is None:
            combined_layers = default_combined_layers(num_layers)
            if combined_head_fraction is None:
                combined_head_fraction = PAPER_HEAD_FRACTIONS[: len(combined_layers)]
        combined_layers = list(combined_layers)
        if len(set(combined_layers)) != len(combined_layers):
            raise ValueError(f"`combined_layers` must not repeat a layer, got {combined_layers}.")
        for i in combined_layers:
            if num_layers is None:
                check_range("combined_layers", i, 0)
            elif not 0 <= i < num_layers:
                raise ValueError(
                    f"`combined_layers` holds layer {i}, outside the 0-based layers of a {num_layers}-layer backbone; "
                    f"leave `combined_layers` None for the paper's placement on this depth "
                    f"({default_combined_layers(num_layers)}) or list existing layers."
                )
        if combined_head_fraction is None:
            combined_head_fraction = PAPER_HEAD_FRACTIONS
        if isinstance(combined_head_fraction, (int, float)):
            combined_head_fraction = [combined_head_fraction] * len(combined_layers)
        if not isinstance(combined_head_fraction, (list, tuple)) or len(combined_head_fraction) != len(
            combined_layers
        ):
            raise ValueError(
                f"`combined_head_fraction` must be a number or one number per combined layer ({len(combined_layers)}),"
                f" got {combined_head_fraction!r}."
            )
        for fraction in combined_head_fraction:
            check_range("combined_head_fraction", fraction, 0.0, 1.0)
        check_range("alpha", alpha)
        check_range("beta", beta, 0.0)
        check_choice("gate", gate, GATES)
        check_choice("affinity_fn", affinity_fn, AFFINITY_FUNCTIONS)
        check_choice("difference_fn", difference_fn, DIFFERENCE_FUNCTIONS)
        if classifier_dropout is not None:
            check_range("classifier_dropout", classifier_dropout, 0.0, 1.0)
        check_label_scale(label_min, label_max)
        if backbone_config is not None:
            check_choice("backbone_config.model_type", backbone_config.model_type, SUPPORTED_BACKBONES)
            if backbone_config.is_decoder:
                raise ValueError("`backbone_config.is_decoder` must be False: Comateformer is an encoder.")
        if "id2label" not in kwargs:
            kwargs.setdefault("num_labels", 1)
        num_labels = kwargs.get("num_labels", len(kwargs.get("id2label") or {}))
        if num_labels < 1:
            raise ValueError(f"`num_labels` must be >= 1, got {num_labels}.")
        kwargs.setdefault("problem_type", "regression" if num_labels == 1 else "single_label_classification")
        check_choice("problem_type", kwargs["problem_type"], ("regression", "single_label_classification"))
        if (kwargs["problem_type"] == "regression") != (num_labels == 1):
            raise ValueError(f"`problem_type` {kwargs['problem_type']!r} does not fit `num_labels` = {num_labels}.")
        self.backbone_config = backbone_config
        self.combined_layers = combined_layers
        self.combined_head_fraction = [float(f) for f in combined_head_fraction]
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.gate = gate
        self.affinity_fn = affinity_fn
        self.difference_fn = difference_fn
        self.center_affinity = center_affinity
        self.center_difference = center_difference
        self.classifier_dropout = classifier_dropout
        self.label_min = float(label_min)
        self.label_max = float(label_max)
        super().__init__(**kwargs)


__all__ = ["ComateformerConfig"]

"""Configuration of Comateformer (Li, Liang, Zhang: "Comateformer: Combined Attention Transformer for Semantic
Sentence Matching"): combined quasi-attention heads inside a pretrained encoder."""

import math

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
# The paper's placement on BERT-base: combined heads in layers 1-3 (0-based 0-2), on 50%, 40% and 30% of their heads.
PAPER_COMBINED_LAYERS = (0, 1, 2)
PAPER_HEAD_FRACTIONS = (0.5, 0.4, 0.3)


def default_combined_layers(num_hidden_layers: "int | None") -> list[int]:
    """The paper's combined layers, its encoder's first three, clamped to the layers an encoder of `num_hidden_layers`
    layers has: [0, 1, 2] on 3 or more layers (BERT-base, the 6-layer MiniLM), [0, 1] on the 2-layer test backbones;
    [0, 1, 2] when the depth is unknown."""
    return [i for i in PAPER_COMBINED_LAYERS if num_hidden_layers is None or i < num_hidden_layers]


INTEGRATIONS = ("paper", "mix")
KEY_NORMALIZATIONS = ("none", "count", "l1")
REGRESSION_LOSSES = ("mse", "bce")
POOLINGS = ("cls", "mean")


class ComateformerConfig(LabelledConfig):
    r"""
    Hyper-parameters of [`ComateformerModel`] and [`ComateformerForSequenceClassification`].

    A combined head (per-head queries q_i and keys k_j of the pretrained projections, d_k the head size) computes

        E_ij = alpha * q_i . k_j / sqrt(d_k)                       (affinity)
        N_ij = -beta * ||q_i - k_j||_1 / sqrt(d_k)                 (difference)
        M    = normalize_j(affinity_fn(E') * gate(N)),  C = M V    (no softmax)

    with gate(N) = 2 * difference_fn(N' + gate_bias) (`gate="double_sigmoid"`) or difference_fn(N - mean_j N +
    gate_bias) (`gate="center"`); E' and N' are E and N, centred per query row over the non-padding keys where
    `center_affinity` / `center_difference` ask for it. The head outputs C (`integration="paper"`) or S + g (C - S)
    (`"mix"`, S being the head's softmax output). The defaults give the paper's M = tanh(E) * 2 sigmoid(N), output
    M V. The choices the paper leaves open and the reasons for the options that depart from it are in the module
    docstring of `modeling_comateformer`.

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the encoder (BERT, RoBERTa, XLM-RoBERTa, DeBERTa-v2/v3, ELECTRA, MPNet, DistilBERT, ModernBERT
            or ALBERT), stored inside this config so `from_pretrained(dir)` rebuilds the model offline. Required to
            build a model.
        combined_layers (`list[int]`, *optional*, defaults to `None`):
            Distinct 0-based encoder layers with combined heads; `[]` gives the plain backbone. `None` is the paper's
            placement, the first three layers, clamped to the backbone's depth (`default_combined_layers`).
        combined_head_fraction (`float` or `list[float]`, *optional*, defaults to `None`):
            Fraction in [0, 1] of each combined layer's heads made combined (the first ceil(f * H)), one per layer or
            one for all. `None` is the paper's 0.5, 0.4, 0.3, trimmed like the default placement.
        alpha (`float`, *optional*, defaults to 1.0):
            Scale of the affinity E.
        beta (`float`, *optional*, defaults to 1.0):
            Scale of the negative L1 distance N (>= 0).
        gate (`str`, *optional*, defaults to `"double_sigmoid"`):
            `"double_sigmoid"` (the paper) or `"center"`, the two gates above.
        affinity_fn (`str`, *optional*, defaults to `"tanh"`):
            Function of E: `"tanh"` (the paper) or `"sigmoid"` (its Table 3 ablation).
        difference_fn (`str`, *optional*, defaults to `"sigmoid"`):
            Function of N inside the gate: `"sigmoid"` (the paper), `"tanh"` or `"arctan"` (its Table 3 ablation).
        center_affinity (`bool`, *optional*, defaults to `False`):
            Centre E per query row before `affinity_fn` (not in the paper).
        center_difference (`bool`, *optional*, defaults to `False`):
            Centre N per query row before `difference_fn` (not in the paper).
        integration (`str`, *optional*, defaults to `"paper"`):
            `"paper"`: combined heads replace their softmax output. `"mix"` (not in the paper): S + g (C - S) with a
            learnable per-head g, zero-initialised, so the model starts as the backbone exactly.
        mix_scale (`float`, *optional*, defaults to 100.0):
            With `"mix"`, g = mix_scale * theta (theta the parameter), so an Adam-type optimizer moves g by about
            mix_scale times the learning rate per step. Positive and finite.
        key_normalization (`str`, *optional*, defaults to `"none"`):
            `"none"` (the paper), `"count"` (M divided by its row's number of valid keys) or `"l1"` (M divided by its
            row's L1 mass + 1e-6, so a row sums to 1 in absolute value like a softmax row).
        gate_bias (`float`, *optional*, defaults to 0.0):
            Added to the gate's input before `difference_fn` (0 is the paper), to start the combined heads open;
            finite.
        combined_dropout (`bool`, *optional*, defaults to `True`):
            Apply the backbone's attention dropout to M in training, as BERT does to softmax probabilities. `False`
            with `"mix"`: a training forward draws exactly the plain backbone's random numbers.
        log_combined_stats (`bool`, *optional*, defaults to `True`):
            In training, record per combined layer the mean gate, ||C|| / ||S|| and (with `"mix"`) the mean g;
            `training_stats()` returns them and `pairzoo.train` logs them.
        pooling (`str`, *optional*, defaults to `"cls"`):
            Feature the head reads: the first token (`"cls"`) or the mean over non-padding tokens (`"mean"`).
        regression_loss (`str`, *optional*, defaults to `"mse"`):
            Loss on labels scaled to [0, 1]: `"mse"` on the head's output (the cross-encoder's) or `"bce"` with
            logits, the prediction being sigmoid(output) (sentence-transformers' `CrossEncoder`).
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout of the classification head; `None` uses the backbone's hidden dropout.
        label_min (`float`, *optional*, defaults to 0.0):
            Lowest regression label (0 for STS-B, 1 for SICK-R); labels are scaled to [0, 1] for the loss, `scores`
            are on the label scale.
        label_max (`float`, *optional*, defaults to 5.0):
            Highest regression label.
        num_labels (`int`, *optional*, defaults to 1):
            1 gives regression (`regression_loss`); more gives classification (cross-entropy).
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
        integration: str = "paper",
        mix_scale: float = 100.0,
        key_normalization: str = "none",
        gate_bias: float = 0.0,
        combined_dropout: bool = True,
        log_combined_stats: bool = True,
        pooling: str = "cls",
        regression_loss: str = "mse",
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
        check_choice("integration", integration, INTEGRATIONS)
        check_range("mix_scale", mix_scale)
        if not 0 < mix_scale < math.inf:
            raise ValueError(f"`mix_scale` must be a positive finite number, got {mix_scale!r}.")
        check_choice("key_normalization", key_normalization, KEY_NORMALIZATIONS)
        check_range("gate_bias", gate_bias)
        if not math.isfinite(gate_bias):
            raise ValueError(f"`gate_bias` must be finite, got {gate_bias!r}.")
        check_choice("combined_dropout", combined_dropout, (True, False))
        check_choice("log_combined_stats", log_combined_stats, (True, False))
        check_choice("pooling", pooling, POOLINGS)
        check_choice("regression_loss", regression_loss, REGRESSION_LOSSES)
        if classifier_dropout is not None:
            check_range("classifier_dropout", classifier_dropout, 0.0, 1.0)
        check_label_scale(label_min, label_max)
        if backbone_config is not None:
            if getattr(backbone_config, "is_decoder", False):
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
        self.integration = integration
        self.mix_scale = float(mix_scale)
        self.key_normalization = key_normalization
        self.gate_bias = float(gate_bias)
        self.combined_dropout = combined_dropout
        self.log_combined_stats = log_combined_stats
        self.pooling = pooling
        self.regression_loss = regression_loss
        self.classifier_dropout = classifier_dropout
        self.label_min = float(label_min)
        self.label_max = float(label_max)
        super().__init__(**kwargs)


__all__ = ["ComateformerConfig"]

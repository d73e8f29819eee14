"""Configuration of Comateformer (Li, Liang, Zhang: "Comateformer: Combined Attention Transformer for Semantic
Sentence Matching"): combined quasi-attention heads inside a pretrained encoder."""

import math

from .common import LabelledConfig, check_choice, check_range, problem_type_error

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

    combined_layers: list[int] | None = None
    combined_head_fraction: float | list[float] | None = None
    alpha: float = 1.0
    beta: float = 1.0
    gate: str = "double_sigmoid"
    affinity_fn: str = "tanh"
    difference_fn: str = "sigmoid"
    center_affinity: bool = False
    center_difference: bool = False
    integration: str = "paper"
    mix_scale: float = 100.0
    key_normalization: str = "none"
    gate_bias: float = 0.0
    combined_dropout: bool = True
    log_combined_stats: bool = True
    pooling: str = "cls"
    regression_loss: str = "mse"
    classifier_dropout: float | None = None
    label_min: float = 0.0

    def derive_defaults(self, kwargs: dict) -> None:
        super().derive_defaults(kwargs)
        if self.combined_layers is None:
            self.combined_layers = default_combined_layers(getattr(self.backbone_config, "num_hidden_layers", None))
            if self.combined_head_fraction is None:
                self.combined_head_fraction = list(PAPER_HEAD_FRACTIONS[: len(self.combined_layers)])
        if self.combined_head_fraction is None:
            self.combined_head_fraction = list(PAPER_HEAD_FRACTIONS)
        if isinstance(self.combined_head_fraction, float):
            self.combined_head_fraction = [self.combined_head_fraction] * len(self.combined_layers)
        num_labels = len(self.id2label) if self.id2label is not None else kwargs.get("num_labels", 1)
        if self.problem_type is None:
            self.problem_type = "regression" if num_labels == 1 else "single_label_classification"
        elif self.problem_type == "single_label_classification" and num_labels == 1:
            raise problem_type_error(self.problem_type, num_labels)

    def validate_combined_layers(self) -> None:
        layers = self.combined_layers
        if layers is None:
            raise ValueError("`combined_layers` must list layers; leave it None only when building the config.")
        if len(set(layers)) != len(layers):
            raise ValueError(f"`combined_layers` must not repeat a layer, got {layers}.")
        num_layers = getattr(self.backbone_config, "num_hidden_layers", None)
        for i in layers:
            if num_layers is None:
                check_range("combined_layers", i, 0)
            elif not 0 <= i < num_layers:
                raise ValueError(
                    f"`combined_layers` holds layer {i}, outside the 0-based layers of a {num_layers}-layer backbone; "
                    f"leave `combined_layers` None for the paper's placement on this depth "
                    f"({default_combined_layers(num_layers)}) or list existing layers."
                )

    def validate_combined_head_fraction(self) -> None:
        fractions = self.combined_head_fraction
        if not isinstance(fractions, list) or len(fractions) != len(self.combined_layers):
            raise ValueError(
                "`combined_head_fraction` must be a number or one number per combined layer "
                f"({len(self.combined_layers)}), got {fractions!r}."
            )
        for fraction in fractions:
            check_range("combined_head_fraction", fraction, 0.0, 1.0)

    def validate_functions(self) -> None:
        check_range("alpha", self.alpha)
        check_range("beta", self.beta, 0.0)
        check_choice("gate", self.gate, GATES)
        check_choice("affinity_fn", self.affinity_fn, AFFINITY_FUNCTIONS)
        check_choice("difference_fn", self.difference_fn, DIFFERENCE_FUNCTIONS)
        check_choice("integration", self.integration, INTEGRATIONS)
        if not 0 < self.mix_scale < math.inf:
            raise ValueError(f"`mix_scale` must be a positive finite number, got {self.mix_scale!r}.")
        check_choice("key_normalization", self.key_normalization, KEY_NORMALIZATIONS)

    def validate_head(self) -> None:
        check_choice("pooling", self.pooling, POOLINGS)
        check_choice("regression_loss", self.regression_loss, REGRESSION_LOSSES)
        if getattr(self.backbone_config, "is_decoder", False):
            raise ValueError("`backbone_config.is_decoder` must be False: Comateformer is an encoder.")


__all__ = ["ComateformerConfig"]

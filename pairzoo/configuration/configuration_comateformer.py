"""Configuration of Comateformer (Li, Liang, Zhang: "Comateformer: Combined Attention Transformer for Semantic
Sentence Matching"): combined quasi-attention heads inside a pretrained BERT/RoBERTa encoder."""

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
SUPPORTED_BACKBONES = ("bert", "roberta")
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

    In a combined head with per-head queries q_i and keys k_j (d_k = head size), all from the pretrained projections:

        E_ij = alpha * q_i . k_j / sqrt(d_k)                       (affinity)
        N_ij = -beta * ||q_i - k_j||_1 / sqrt(d_k)                 (difference, computed with torch.cdist(p=1))
        M    = normalize_j(affinity_fn(E') * gate(N))              (no softmax), C = M V

    with E' = E - mean_j(E) when `center_affinity`, else E, and

        gate(N) = 2 * difference_fn(N' + gate_bias)                (`gate="double_sigmoid"`, the default)
        gate(N) = difference_fn(N - mean_j(N) + gate_bias)         (`gate="center"`)

    where N' = N - mean_j(N) when `center_difference`, else N, and `normalize_j` is the identity
    (`key_normalization="none"`). The head's output is C (`integration="paper"`) or S + g (C - S) (`"mix"`), S being
    the head's softmax attention output. With the defaults (tanh, sigmoid, no centring, `gate_bias=0`, no key
    normalisation, `integration="paper"`) this is the paper's M = tanh(E) * 2 sigmoid(N), output M V. Means and sums
    over keys j are taken per query row over non-padding keys only, and M is zeroed on padding keys, so padding
    contributes nothing. Choices the paper leaves open, made here:

    - which heads: the FIRST ceil(f * H) heads of each combined layer (`modeling_comateformer.num_combined_heads`;
      a 1e-9 tolerance makes 0.3 * 10 give 3 heads, not 4); the others keep the backbone's softmax attention,
      computed with the backbone's configured attention implementation (eager, sdpa) on that head subset;
    - centring: per query row, over the non-padding keys; `center_difference` and `gate="center"` both centre N
      (centring is idempotent, so setting both equals `gate="center"`); the factor 2 of `double_sigmoid` multiplies
      whichever `difference_fn` is chosen;
    - training: the backbone's attention dropout is applied to M, as BERT applies it to softmax probabilities;
    - `alpha` and `beta` are fixed scalars, not learned.

    Options that depart from the paper, to inject combined heads gently into a pretrained encoder (the paper calls this
    an open problem). Measured on MiniLM at initialisation: the paper's gate 2 sigmoid(N) is about 0.001-0.013
    (N is about -7 to -9), so combined heads start nearly muted, and once a gate opens M V is not normalised over keys:
    a row of M has an L1 mass that grows with the number of keys (C is 9-18x a softmax head's output at 16 tokens,
    76-171x at 123), whereas a softmax row sums to 1.

    - `integration="mix"`: per combined head a learnable scalar g, zero-initialised (ReZero-style), interpolates
      S + g (C - S) between the backbone's softmax head (g = 0) and the paper's combined head (g = 1). At
      initialisation the model is the backbone exactly (S + 0 = S), so fine-tuning starts where the plain arm starts
      and the data decide how much combined attention to let in; the interpolation (rather than S + g C) keeps the
      paper's form at g = 1. Costs one more softmax attention over the combined heads. g = `mix_scale` * theta with
      theta the parameter: Adam moves a parameter by about the learning rate per step whatever its gradient, so at a
      fine-tuning learning rate (2e-5, a few hundred steps) a plain g could not move past about 0.01 and the mix would
      stay the backbone; `mix_scale` multiplies that speed.
      Measured (MiniLM, the sentence-transformers peer's recipe, dev, `benchmarks/quality.py --profile cpu-full`,
      docs/results.md, seeds 0-2): against the plain backbone, mix is -0.14 accuracy on SICK-E, -1.06 on MRPC and
      -0.73 Spearman on STS-B, each within the summed seed std; `mix_scale=10` is -0.53 on STS-B
      although its gates end below 0.007 in absolute value (the model stays within 1% of the backbone): a gap that
      size with the gates near zero points to run-to-run noise (plain's seed std is 0.46) rather than to the combined
      heads (not tested further). The paper's form (`"paper"`) loses 2.8-10 points on all three (seeds 0-2). With
      `key_normalization="l1"` mix is further below: -1.17 on STS-B, -0.54 on SICK-E (within the seed std) and -2.04
      on MRPC (beyond it), seeds 0-2.
    - `combined_dropout=False` (with `"mix"`): no attention dropout on M, so a training forward draws exactly the
      random numbers the plain backbone (`combined_layers=[]`) draws; building combined layers draws none either, so
      one seed gives both the same head and the same dropout masks. At g = 0 the two then train identically, and
      the difference between the arms is what the combined heads do, not another random stream. With dropout on M
      (the default) each combined layer draws extra numbers and every later mask differs from the plain arm's.
      Measured (MiniLM, the peer's recipe, dev, seeds 0-2, `benchmarks/quality.py --profile cpu-full`, arm
      `comateformer (mix, no M dropout)`): STS-B 81.65 +- 0.30 against plain 81.84 +- 0.46 (-0.19; per seed -0.37,
      -0.17, -0.05), MRPC 73.53 +- 1.30 against 74.18 +- 1.35 (-0.65; -0.74, -0.25, -0.98), where mix with dropout on
      M is -0.73 and -1.06: removing the shifted random stream closes most of mix's STS-B gap, and what is left is
      below plain on every seed, i.e. the combined heads themselves cost a little. SICK-E 82.09 +- 0.31 against
      82.56 +- 0.42 (-0.47; -0.61, -0.20, -0.61; mix with dropout on M: -0.14). So "plain - 0.5" holds on STS-B and
      SICK-E and misses by 0.15 on MRPC; no gain over plain on any task. With `mix_scale=10` as well (arm
      `comateformer (mix, no M dropout, scale 10)`, same runs otherwise): STS-B 81.85 +- 0.46, SICK-E 82.56 +- 0.42,
      MRPC 74.18 +- 1.35, the plain arm to within one dev example on every seed (per seed +0.00, +0.01, +0.00;
      -0.20, +0.20, 0.00; 0, 0, 0). That meets "plain - 0.5" everywhere, but by leaving the backbone as it is: the
      per-layer mean mix gate (over heads, signed) ends within +-0.007, the paper's gate stays nearly closed
      (0.001-0.009) and ||C|| / ||S|| is 0.03-0.16 (training logs of the 9 runs), and the dev scores are plain's.
      Letting the combined heads in further costs more on MRPC: with the gate opened and C put on S's scale
      (`key_normalization="count"`, `center_difference=True`, no dropout on M, `mix_scale` 100; mean gate 0.99,
      ||C|| / ||S|| 0.42-0.52) MRPC is 72.79 +- 0.85 (-1.39; per seed -0.98, -0.98, -2.21), not run further. In
      all 12 runs of these two arms (the first with training logs of the mix gate) layer 1's mean mix gate ends
      negative (-0.004 to -0.006 at `mix_scale` 10, -0.035 to -0.043 here): training moves those heads away from
      the combined head's output, not toward it.
    - `key_normalization="count"`: M divided by the number of valid keys of its row (output = the mean of the
      gated values instead of their sum), so C no longer grows with the length (with the paper's nearly closed
      gate C is then 0.0002-0.01x S on MiniLM: pair it with an open gate, `center_difference` or `gate_bias`);
      `"l1"`: M divided by sum_j |M_ij| + 1e-6, so each row has L1 mass 1 like a softmax row (C is a signed weighted
      average of values, on the scale of a softmax head's output whatever the gate: 0.5-1.2x S on MiniLM at
      initialisation from 16 to 128 tokens; a gate factor common to a row cancels).
    - `gate_bias`: b shifts the gate's input. With `gate="double_sigmoid"` the gate is 1 where N' + b = 0: pick b
      about minus the typical N of the backbone at initialisation (the `difference` maps returned with
      `output_combined_attention=True`: -7 to -9 on MiniLM, where b = 8 gives a mean gate of 1.0-1.6), so combined
      heads start open; without key normalisation C is then 10-100x S. With `center_difference=True` each row's N'
      already has mean 0 (gate about 1 for a typical key) and b = 0 suffices; with `gate="center"`
      (difference_fn(N - mean N), 0.5 at the mean) b = 2.2 gives about 0.9 at the mean. The training logs'
      `gate_mean` shows where the gate goes.

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
            `"double_sigmoid"`: gate = 2 * difference_fn(N' + gate_bias); `"center"`: gate = difference_fn(N - mean_j N
            + gate_bias).
        affinity_fn (`str`, *optional*, defaults to `"tanh"`):
            Function of E (paper Table 3 ablation): `"tanh"` or `"sigmoid"`.
        difference_fn (`str`, *optional*, defaults to `"sigmoid"`):
            Function of N inside the gate (paper Table 3 ablation): `"sigmoid"`, `"tanh"` or `"arctan"`.
        center_affinity (`bool`, *optional*, defaults to `False`):
            Centre E per query row (over non-padding keys) before `affinity_fn` (ablation).
        center_difference (`bool`, *optional*, defaults to `False`):
            Centre N per query row (over non-padding keys) before `difference_fn` (ablation).
        integration (`str`, *optional*, defaults to `"paper"`):
            `"paper"`: combined heads replace the softmax output of their heads (the paper); `"mix"`: output
            S + g (C - S) with a learnable per-head g, zero-initialised (the model starts as the backbone exactly).
        mix_scale (`float`, *optional*, defaults to 100.0):
            With `integration="mix"`: g = mix_scale * theta, theta the zero-initialised parameter; an Adam-type
            optimizer can move g by about mix_scale * learning rate per step. Positive and finite.
        key_normalization (`str`, *optional*, defaults to `"none"`):
            `"none"` (the paper), `"count"` (M divided by the number of valid keys of its row) or `"l1"` (M divided
            by its row's L1 mass + 1e-6).
        gate_bias (`float`, *optional*, defaults to 0.0):
            Added to the gate's input N' before `difference_fn` (0 = the paper); finite.
        combined_dropout (`bool`, *optional*, defaults to `True`):
            Apply the backbone's attention dropout to M in training, as BERT applies it to softmax probabilities
            (`True`). `False`: no dropout on M; with `integration="mix"` a training forward then draws exactly the
            random numbers of the plain backbone (the softmax path's dropout on every head is its only one).
        log_combined_stats (`bool`, *optional*, defaults to `True`):
            In training mode, each combined layer records the mean gate and the ratio ||C|| / ||S|| (and the mean mix
            gate with `integration="mix"`); `training_stats()` returns them and `pairzoo.train` adds them to the
            Trainer's logs (`TrainingStatsCallback`) and its run's metrics. Detached statistics; with
            `integration="paper"` it costs one softmax attention without gradient over the combined heads.
        pooling (`str`, *optional*, defaults to `"cls"`):
            Feature the head reads: the first token (`"cls"`) or the mean over non-padding tokens (`"mean"`).
        regression_loss (`str`, *optional*, defaults to `"mse"`):
            Regression loss on labels scaled to [0, 1] by (y - label_min) / (label_max - label_min): `"mse"` on the
            head's output (the cross-encoder's), or `"bce"`: binary cross-entropy with logits, the prediction being
            sigmoid(output) (the sentence-transformers `CrossEncoder` recipe).
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout of the sequence-classification head; `None` uses the backbone's `hidden_dropout_prob`, as
            transformers' own heads do.
        label_min (`float`, *optional*, defaults to 0.0):
            Lowest label of a regression data set (the training CLI passes it: 0 for STS-B, 1 for SICK-R). Labels are
            scaled to [0, 1] for the loss; `logits` are the prediction on [0, 1], `scores` on the label scale.
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label of a regression data set.
        num_labels (`int`, *optional*, defaults to 1):
            1 gives regression (`problem_type="regression"`, `regression_loss`); more gives classification
            (cross-entropy).
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

"""Configuration of the lightweight Siamese matchers (ESIM, RE2) with the plug-in feature-attention blocks FA and SFA
(Zang, Liu: "Modeling Selective Feature Attention for Representation-based Siamese Text Matching")."""

import math

from transformers import PretrainedConfig

from .common import BACKBONE_SUB_CONFIG, check_choice, check_label_scale, check_range, coerce_backbone_config

MATCHERS = ("esim", "re2")
FEATURE_ATTENTIONS = ("none", "fa", "sfa")
# Eq. 9 of the SFA paper: every bottleneck width must exceed 8.33 log L (natural log, L the sequence length).
BOTTLENECK_FACTOR = 8.33


def bottleneck_floor(length: int) -> float:
    """The eq. 9 lower bound 8.33 ln(L) that every bottleneck width must exceed for sequences of `length` tokens."""
    return BOTTLENECK_FACTOR * math.log(length)


def _check_positive_int(field: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{field}` must be a positive integer, got {value!r}.")


class SiameseMatcherConfig(PretrainedConfig):
    r"""
    Hyper-parameters of [`SiameseMatcherForSequenceClassification`]: a lightweight Siamese text matcher (`esim` or
    `re2`) on word embeddings, with an optional feature-attention block (`fa` or `sfa`) on both branches after the
    word-level interaction attention. There is no transformer encoder: the backbone only provides the tokenizer and
    the initial word-embedding matrix (GloVe is not available offline, so MiniLM's input embeddings replace it).

    Both blocks act on the `hidden_size`-wide token features that leave the interaction stage: ESIM's projected
    local-inference features F([a; a~; a - a~; a * a~]) that enter the composition BiLSTM, and the fusion output of
    every RE2 block. Writing D = `hidden_size` and L = `max_sequence_length`, the bottleneck rule of the paper (eq. 9)
    asks that each bottleneck width exceeds 8.33 ln L: D // r for FA, and 2 (D // r1) and 2 (D // r1) // r2 for SFA;
    it is checked here for the block in use.

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the backbone whose tokenizer and input embedding matrix the model uses (only `vocab_size` and
            `hidden_size` are read, as defaults of `vocab_size` and `embedding_size`). Stored so that
            `from_pretrained(dir)` and the model card know the tokenizer family.
        matcher (`str`, *optional*, defaults to `"esim"`):
            Host network: `"esim"` (Chen et al. 2017) or `"re2"` (Yang et al. 2019).
        feature_attention (`str`, *optional*, defaults to `"none"`):
            Block after the interaction attention: `"none"`, `"fa"` (feature attention, squeeze-excitation over
            features) or `"sfa"` (selective feature attention over stacked BiGRU branches).
        fa_reduction (`int`, *optional*, defaults to 2):
            r of FA: the excitation bottleneck has D // r features.
        sfa_branches (`int`, *optional*, defaults to 3):
            N, the number of stacked BiGRU layers (branches) of SFA.
        sfa_reductions (`list[int]`, *optional*, defaults to `[2, 2]`):
            (r1, r2) of SFA: the 1x1 convolution reduces D to D // r1 (each BiGRU direction has D // r1 units, so
            branches are 2 (D // r1) wide) and the shared squeeze FC has 2 (D // r1) // r2 units.
        max_sequence_length (`int`, *optional*, defaults to 128):
            L, the longest sentence (in tokens) the model is designed for; used only by the eq. 9 bottleneck check
            (the training CLI's default `--max_length` is 128). Not named `max_length`, which transformers reserves
            for generation.
        hidden_size (`int`, *optional*, defaults to 150):
            Width of the matcher's hidden layers (ESIM: LSTM units per direction and the projection; RE2: encoder,
            alignment, fusion and prediction width) and D of the feature-attention blocks.
        embedding_size (`int`, *optional*, defaults to `None`):
            Word-embedding width; `None` uses `backbone_config.hidden_size` (384 for MiniLM, whose input embedding
            matrix then initialises the embeddings).
        vocab_size (`int`, *optional*, defaults to `None`):
            Vocabulary size; `None` uses `backbone_config.vocab_size` (30522 for MiniLM's WordPiece tokenizer).
        freeze_embeddings (`bool`, *optional*, defaults to `False`):
            Keep the word embeddings fixed during training (RE2's original setting) instead of fine-tuning them
            (ESIM's).
        dropout (`float`, *optional*, defaults to 0.2):
            Dropout of embeddings and hidden layers.
        re2_blocks (`int`, *optional*, defaults to 2):
            Number of RE2 blocks (encoder, alignment, fusion) joined by augmented residual connections.
        re2_encoder_layers (`int`, *optional*, defaults to 2):
            Convolution layers of each RE2 encoder.
        re2_kernel_size (`int`, *optional*, defaults to 3):
            Kernel size of the RE2 encoder convolutions (odd, so lengths are kept).
        label_min (`float`, *optional*, defaults to 1.0):
            Lowest label of the regression scale. Labels are mapped to [0, 1] by `(y - label_min) / (label_max -
            label_min)` for the MSE loss and predictions are mapped back (as the cross-encoder does).
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label of the regression scale.
        num_labels (`int`, *optional*, defaults to 1):
            1 gives regression (MSE); more gives classification (cross-entropy).
    """

    model_type = "siamese-matcher"
    sub_configs_defaults = BACKBONE_SUB_CONFIG

    def __init__(
        self,
        backbone_config=None,
        matcher: str = "esim",
        feature_attention: str = "none",
        fa_reduction: int = 2,
        sfa_branches: int = 3,
        sfa_reductions: "list[int] | tuple[int, int]" = (2, 2),
        max_sequence_length: int = 128,
        hidden_size: int = 150,
        embedding_size: "int | None" = None,
        vocab_size: "int | None" = None,
        freeze_embeddings: bool = False,
        dropout: float = 0.2,
        re2_blocks: int = 2,
        re2_encoder_layers: int = 2,
        re2_kernel_size: int = 3,
        label_min: float = 1.0,
        label_max: float = 5.0,
        **kwargs,
    ):
        backbone_config = coerce_backbone_config(backbone_config)
        check_choice("matcher", matcher, MATCHERS)
        check_choice("feature_attention", feature_attention, FEATURE_ATTENTIONS)
        for field, value in (
            ("fa_reduction", fa_reduction),
            ("sfa_branches", sfa_branches),
            ("max_sequence_length", max_sequence_length),
            ("hidden_size", hidden_size),
            ("re2_blocks", re2_blocks),
            ("re2_encoder_layers", re2_encoder_layers),
            ("re2_kernel_size", re2_kernel_size),
        ):
            _check_positive_int(field, value)
        if max_sequence_length < 2:
            raise ValueError(f"`max_sequence_length` must be at least 2, got {max_sequence_length}.")
        if re2_kernel_size % 2 == 0:
            raise ValueError(f"`re2_kernel_size` must be odd so that lengths are kept, got {re2_kernel_size}.")
        if not isinstance(sfa_reductions, (list, tuple)) or len(sfa_reductions) != 2:
            raise ValueError(f"`sfa_reductions` must be a pair (r1, r2), got {sfa_reductions!r}.")
        for value in sfa_reductions:
            _check_positive_int("sfa_reductions", value)
        if embedding_size is None and backbone_config is not None:
            embedding_size = backbone_config.hidden_size
        if vocab_size is None and backbone_config is not None:
            vocab_size = backbone_config.vocab_size
        for field, value in (("embedding_size", embedding_size), ("vocab_size", vocab_size)):
            if value is not None:
                _check_positive_int(field, value)
        check_choice("freeze_embeddings", freeze_embeddings, (True, False))
        check_range("dropout", dropout, 0.0, 1.0)
        check_label_scale(label_min, label_max)
        if "id2label" not in kwargs:
            kwargs.setdefault("num_labels", 1)
        if kwargs.get("num_labels") is not None and kwargs["num_labels"] < 1:
            raise ValueError(f"`num_labels` must be >= 1, got {kwargs['num_labels']}.")
        self.backbone_config = backbone_config
        self.matcher = matcher
        self.feature_attention = feature_attention
        self.fa_reduction = fa_reduction
        self.sfa_branches = sfa_branches
        self.sfa_reductions = [int(r) for r in sfa_reductions]
        self.max_sequence_length = max_sequence_length
        self.hidden_size = hidden_size
        self.embedding_size = embedding_size
        self.vocab_size = vocab_size
        self.freeze_embeddings = freeze_embeddings
        self.dropout = float(dropout)
        self.re2_blocks = re2_blocks
        self.re2_encoder_layers = re2_encoder_layers
        self.re2_kernel_size = re2_kernel_size
        self.label_min = float(label_min)
        self.label_max = float(label_max)
        self._check_bottlenecks()
        super().__init__(**kwargs)

    def to_diff_dict(self) -> dict:
        """The base diff drops `id2label` when it equals transformers' two-label default, and a reload would then fall
        back to regression (`num_labels` 1); keep the labels explicitly."""
        diff = super().to_diff_dict()
        diff.setdefault("id2label", {str(i): label for i, label in self.id2label.items()})
        return diff

    def bottleneck_widths(self) -> dict[str, int]:
        """The bottleneck widths of the block in use, keyed by the field that sets each (empty for `none`)."""
        if self.feature_attention == "fa":
            return {"fa_reduction": self.hidden_size // self.fa_reduction}
        if self.feature_attention == "sfa":
            r1, r2 = self.sfa_reductions
            branch = 2 * (self.hidden_size // r1)
            return {"sfa_reductions[0] (r1)": branch, "sfa_reductions[1] (r2)": branch // r2}
        return {}

    def _check_bottlenecks(self) -> None:
        floor = bottleneck_floor(self.max_sequence_length)
        for field, width in self.bottleneck_widths().items():
            if width <= floor:
                raise ValueError(
                    f"`{field}` gives a bottleneck of {width} features for hidden_size={self.hidden_size}, but the "
                    f"bottleneck rule (SFA paper eq. 9) needs more than 8.33 ln(max_sequence_length) = {floor:.1f} "
                    f"for max_sequence_length={self.max_sequence_length}; lower the reduction, raise `hidden_size` or "
                    "lower `max_sequence_length`."
                )


__all__ = ["SiameseMatcherConfig"]

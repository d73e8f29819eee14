"""Configuration of the lightweight Siamese matchers (ESIM, RE2, BiMPM, CAFE, DIIN, DRCN) with the plug-in
feature-attention blocks FA and SFA (Zang, Liu: "Modeling Selective Feature Attention for Representation-based Siamese
Text Matching")."""

import math

from transformers import PretrainedConfig

from .common import LabelledConfig, check_choice, check_range

MATCHERS = ("esim", "re2", "bimpm", "cafe", "diin", "drcn")
# CAFE appends one factorization-machine scalar per (alignment, comparison): {inter, intra} x {concat, sub, mul}.
CAFE_FACTORIZED_FEATURES = 6
FEATURE_ATTENTIONS = ("none", "fa", "sfa")
SFA_SQUEEZES = ("paper", "branch_sum")
# False: the paper (the block replaces its input); True: x + block(x); "gated": x + g block(x), g zero at init
FEATURE_ATTENTION_RESIDUALS = (False, True, "gated")
# Per-host defaults of FA's r, SFA's (r1, r2) and N, used where the field is None: the SFA paper's Table 1 where its
# values give whole widths within eq. 9 at this zoo's default widths and L = 128 (see `SiameseMatcherConfig`).
HOST_DEFAULTS: "dict[str, dict[str, float | int | tuple[float, float]]]" = {
    "esim": {"fa_reduction": 1, "sfa_reductions": (3, 2), "sfa_branches": 3},
    "re2": {"fa_reduction": 1, "sfa_reductions": (3, 2), "sfa_branches": 3},
    "bimpm": {"fa_reduction": 2, "sfa_reductions": (4, 1.6), "sfa_branches": 2},
    "cafe": {"fa_reduction": 1, "sfa_reductions": (3, 2), "sfa_branches": 3},
    "diin": {"fa_reduction": 1, "sfa_reductions": (3, 2), "sfa_branches": 3},
    "drcn": {"fa_reduction": 1, "sfa_reductions": (3, 4), "sfa_branches": 3},
}
# Eq. 9 of the SFA paper: every bottleneck width must exceed 8.33 log L (natural log, L the sequence length).
BOTTLENECK_FACTOR = 8.33


def bottleneck_floor(length: int) -> float:
    """The eq. 9 lower bound 8.33 ln(L) that every bottleneck width must exceed for sequences of `length` tokens."""
    return BOTTLENECK_FACTOR * math.log(length)


def reduced_width(width: int, ratio: float, field: str) -> int:
    """`width / ratio` features, which must be a whole number: a ratio need not be an integer (BiMPM's r1 = 3.75 in
    the SFA paper) but must divide the width exactly. A ValueError names `field` otherwise."""
    value = width / ratio
    if abs(value - round(value)) > 1e-9 * value or round(value) < 1:
        raise ValueError(
            f"`{field}` = {ratio!r} reduces {width} features to {width} / {ratio!r} = {value:.4g}, not a whole number "
            f"of features; pick a ratio that divides {width} (or change the width: `hidden_size`, or "
            "`bimpm_perspectives` for BiMPM)."
        )
    return round(value)


def input_embedding_width(backbone_config: PretrainedConfig) -> int:
    """Width of a backbone's token-embedding matrix (`get_input_embeddings()`): its `embedding_size` where the
    architecture factorises the embeddings (ALBERT, ELECTRA-small, DeBERTa-v2 when set; the encoder projects them to
    `hidden_size` before its first layer), otherwise `hidden_size`."""
    return getattr(backbone_config, "embedding_size", None) or backbone_config.hidden_size


def _ratio(field: str, value: "float | int") -> "float | int":
    """A reduction ratio >= 1, kept an int when it is a whole number (so 3.0 is stored as 3)."""
    check_range(field, value, 1.0)
    return int(value) if float(value).is_integer() else float(value)


def _check_positive_int(field: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"`{field}` must be a positive integer, got {value!r}.")


class SiameseMatcherConfig(LabelledConfig):
    r"""
    Hyper-parameters of [`SiameseMatcherForSequenceClassification`]: a lightweight Siamese text matcher (`esim`,
    `re2`, `bimpm`, `cafe`, `diin` or `drcn`) on word embeddings, with an optional feature-attention block (`fa` or
    `sfa`) on both branches after the word-level interaction stage. There is no transformer encoder: the backbone only
    provides the tokenizer and the initial word-embedding matrix (GloVe is not available offline, so the backbone's
    input embeddings replace it).

    Both blocks act on the token features that leave the interaction stage, D = `feature_attention_width()` wide:
    ESIM's projected local-inference features F([a; a~; a - a~; a * a~]) that enter the composition BiLSTM (D =
    `hidden_size`); the fusion output of every RE2 block (D = `hidden_size`); BiMPM's multi-perspective matching
    vectors that enter the aggregation BiLSTM (D = 8 `bimpm_perspectives`: 4 strategies x 2 LSTM directions); CAFE's
    factorization-augmented word features that enter its LSTM (D = `hidden_size` + 6); DIIN's self-attended, fuse-gated
    encodings that form the interaction tensor (D = `hidden_size`); and the output of each of DRCN's autoencoder
    bottlenecks (D = 2 `hidden_size`, two per branch with the default five layers). Writing L =
    `max_sequence_length`, the bottleneck rule of the paper (eq. 9) asks that each bottleneck width exceeds 8.33 ln L:
    D / r for FA, and 2 D / r1 and 2 D / (r1 r2) for SFA. Each width must be a whole number (a ratio may be
    non-integer, such as 3.75, where it divides exactly); both rules are checked here for the block in use.

    `fa_reduction`, `sfa_reductions` and `sfa_branches` default per host (`None` takes the `matcher`'s row). The SFA
    paper's Table 1 sets r = 1, r1 = 3, r2 = 5, N = 3 for ESIM, RE2, CAFE, DIIN and DRCN and r = 2, r1 = 3.75, r2 = 4,
    N = 2 for BiMPM; at this zoo's default widths and L = 128 some of its values break one of the two rules, and those
    (marked *) are replaced by the nearest values that keep both (a squeeze of about 50 features):

    | matcher | D | r | (r1, r2) | N | SFA widths 2 D / r1, 2 D / (r1 r2) | Table 1's r2 (or r1) would give |
    |---|---|---|---|---|---|---|
    | esim, re2, diin | 150 | 1 | (3, 2*) | 3 | 100, 50 | 20 <= 40.4 (eq. 9) |
    | cafe | 156 | 1 | (3, 2*) | 3 | 104, 52 | 20.8 (not whole) |
    | drcn | 300 | 1 | (3, 4*) | 3 | 200, 50 | 40 <= 40.4 (eq. 9; Table 1 holds for L <= 121) |
    | bimpm | 160 | 2 | (4*, 1.6*) | 2 | 80, 50 | r1 = 3.75: 42.7 (not whole) |

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the backbone whose tokenizer and input embedding matrix the model uses (only `vocab_size` and
            the matrix's width are read, as defaults of `vocab_size` and `embedding_size`). Stored so that
            `from_pretrained(dir)` and the model card know the tokenizer family.
        matcher (`str`, *optional*, defaults to `"esim"`):
            Host network: `"esim"` (Chen et al. 2017), `"re2"` (Yang et al. 2019), `"bimpm"` (Wang et al. 2017),
            `"cafe"` (Tay et al. 2018), `"diin"` (Gong et al. 2018) or `"drcn"` (Kim et al. 2019).
        feature_attention (`str`, *optional*, defaults to `"none"`):
            Block after the interaction attention: `"none"`, `"fa"` (feature attention, squeeze-excitation over
            features) or `"sfa"` (selective feature attention over stacked BiGRU branches).
        fa_reduction (`float`, *optional*, defaults to `None`):
            r of FA: the excitation bottleneck has D / r features. `None`: the host's default (table above).
        sfa_branches (`int`, *optional*, defaults to `None`):
            N, the number of stacked BiGRU layers (branches) of SFA. `None`: the host's default.
        sfa_reductions (`list[float]`, *optional*, defaults to `None`):
            (r1, r2) of SFA: the 1x1 convolution reduces D to D / r1 (each BiGRU direction has D / r1 units, so
            branches are 2 D / r1 wide) and the shared squeeze FC has 2 D / (r1 r2) units. `None`: the host's
            default.
        sfa_squeeze (`str`, *optional*, defaults to `"paper"`):
            The squeeze s of SFA's eq. 6 over the stacked branches x^(1..N): `"paper"` (eq. 6 and the reference
            code), s = mean_{n,l} x^(n)_l + max_{n,l} x^(n)_l over branches and valid tokens together; `"branch_sum"`
            sums the branches first, s = mean_l sum_n x^(n)_l + max_l sum_n x^(n)_l.
        feature_attention_residual (`bool` or `str`, *optional*, defaults to `False`):
            How an FA/SFA block's output u uses its input x. `False` (the paper): u = block(x); `True`: u = x +
            block(x); `"gated"`: u = x + g block(x), g a learnable scalar per block, zero at initialisation (ReZero),
            so the host starts as without the blocks; `pairzoo.train` logs the gates (`train_stats/siamese/...`).
        feature_attention_gate_trainable (`bool`, *optional*, defaults to `True`):
            With `feature_attention_residual="gated"`: whether the gates learn. `False` keeps them at zero: the host
            itself drawn from the gated arm's random stream, a control that separates what the blocks add from the
            initialisation shift their construction causes.
        max_sequence_length (`int`, *optional*, defaults to 128):
            L, the longest sentence (in tokens) the model is designed for; used only by the eq. 9 bottleneck check
            (the training CLI's default `--max_length` is 128). Not named `max_length`, which transformers reserves
            for generation.
        hidden_size (`int`, *optional*, defaults to 150):
            Width of the matcher's hidden layers: ESIM: LSTM units per direction and the projection; RE2: encoder,
            alignment, fusion and prediction width; BiMPM: context and aggregation LSTM units per direction; CAFE:
            highway width and LSTM units; DIIN: highway width; DRCN: LSTM units per direction (the autoencoders
            compress to 2 `hidden_size`).
        embedding_size (`int`, *optional*, defaults to `None`):
            Word-embedding width; `None` uses the width of the backbone's input embedding matrix, which then
            initialises the embeddings: `hidden_size` (384 for MiniLM), or `embedding_size` where the backbone
            factorises its embeddings (128 for ALBERT and ELECTRA-small). The hosts' first layers read this width.
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
        bimpm_perspectives (`int`, *optional*, defaults to 20):
            l, BiMPM's number of perspectives (the paper's 20): each of the 8 matching functions (4 strategies x 2
            directions) has its own l x `hidden_size` weight W.
        highway_layers (`int`, *optional*, defaults to 2):
            Highway layers of CAFE's input encoder and of its prediction layer, and of DIIN's encoding layer (two in
            both papers).
        cafe_fm_factors (`int`, *optional*, defaults to 10):
            k, the latent factor size of CAFE's factorization machines (the paper's 10).
        diin_dense_blocks (`int`, *optional*, defaults to 3):
            Dense blocks of DIIN's DenseNet feature extractor (the paper's 3), each followed by a transition layer.
        diin_dense_layers (`int`, *optional*, defaults to 4):
            3 x 3 convolution layers per dense block (the paper uses 8; 4 keeps the default light on CPU).
        diin_growth_rate (`int`, *optional*, defaults to 20):
            Feature maps each dense layer adds (the paper's 20).
        diin_first_scale (`float`, *optional*, defaults to 0.3):
            eta, the ratio by which DIIN's first 1 x 1 convolution scales the interaction tensor's channels.
        diin_transition_scale (`float`, *optional*, defaults to 0.5):
            theta, the channel compression ratio of DIIN's transition layers.
        drcn_layers (`int`, *optional*, defaults to 5):
            Densely connected co-attentive BiLSTM layers of DRCN (the paper's 5); an autoencoder follows every second
            layer below the top one (layers 2 and 4 of 5), so at least 3 are needed.
        drcn_reconstruction_weight (`float`, *optional*, defaults to 1.0):
            Weight of DRCN's autoencoder reconstruction loss (mean squared error on valid tokens), added to the task
            loss when labels are given.
        label_min (`float`, *optional*, defaults to 1.0):
            Lowest label of the regression scale. Labels are mapped to [0, 1] by `(y - label_min) / (label_max -
            label_min)` for the MSE loss and predictions are mapped back (as the cross-encoder does).
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label of the regression scale.
        num_labels (`int`, *optional*, defaults to 1):
            1 gives regression (MSE); more gives classification (cross-entropy).
    """

    model_type = "siamese-matcher"

    matcher: str = "esim"
    feature_attention: str = "none"
    fa_reduction: float | None = None
    sfa_branches: int | None = None
    sfa_reductions: list[float] | tuple[float, float] | None = None
    sfa_squeeze: str = "paper"
    feature_attention_residual: bool | str = False
    feature_attention_gate_trainable: bool = True
    max_sequence_length: int = 128
    hidden_size: int = 150
    embedding_size: int | None = None
    vocab_size: int | None = None
    freeze_embeddings: bool = False
    dropout: float = 0.2
    re2_blocks: int = 2
    re2_encoder_layers: int = 2
    re2_kernel_size: int = 3
    bimpm_perspectives: int = 20
    highway_layers: int = 2
    cafe_fm_factors: int = 10
    diin_dense_blocks: int = 3
    diin_dense_layers: int = 4
    diin_growth_rate: int = 20
    diin_first_scale: float = 0.3
    diin_transition_scale: float = 0.5
    drcn_layers: int = 5
    drcn_reconstruction_weight: float = 1.0

    def derive_defaults(self, kwargs: dict) -> None:
        super().derive_defaults(kwargs)
        host = HOST_DEFAULTS.get(self.matcher)
        if host is not None:
            if self.fa_reduction is None:
                self.fa_reduction = host["fa_reduction"]
            if self.sfa_branches is None:
                self.sfa_branches = host["sfa_branches"]
            if self.sfa_reductions is None:
                self.sfa_reductions = list(host["sfa_reductions"])
        if self.fa_reduction is not None:
            self.fa_reduction = _ratio("fa_reduction", self.fa_reduction)
        if isinstance(self.sfa_reductions, list) and len(self.sfa_reductions) == 2:
            self.sfa_reductions = [_ratio("sfa_reductions", value) for value in self.sfa_reductions]
        if self.backbone_config is not None:
            if self.embedding_size is None:
                self.embedding_size = input_embedding_width(self.backbone_config)
            if self.vocab_size is None:
                self.vocab_size = self.backbone_config.vocab_size

    def validate_choices(self) -> None:
        check_choice("matcher", self.matcher, MATCHERS)
        check_choice("feature_attention", self.feature_attention, FEATURE_ATTENTIONS)
        check_choice("sfa_squeeze", self.sfa_squeeze, SFA_SQUEEZES)
        check_choice("feature_attention_residual", self.feature_attention_residual, FEATURE_ATTENTION_RESIDUALS)
        if not self.feature_attention_gate_trainable and self.feature_attention_residual != "gated":
            raise ValueError(
                "`feature_attention_gate_trainable=False` needs feature_attention_residual='gated', got "
                f"{self.feature_attention_residual!r}."
            )

    def validate_sizes(self) -> None:
        for field in (
            "sfa_branches",
            "max_sequence_length",
            "hidden_size",
            "re2_blocks",
            "re2_encoder_layers",
            "re2_kernel_size",
            "bimpm_perspectives",
            "highway_layers",
            "cafe_fm_factors",
            "diin_dense_blocks",
            "diin_dense_layers",
            "diin_growth_rate",
            "drcn_layers",
            "embedding_size",
            "vocab_size",
        ):
            value = getattr(self, field)
            if value is not None:
                _check_positive_int(field, value)
        for field in ("diin_first_scale", "diin_transition_scale"):
            check_range(field, getattr(self, field), 0.0, 1.0)
            if getattr(self, field) == 0:
                raise ValueError(f"`{field}` must be in (0, 1], got {getattr(self, field)!r}.")
        if self.drcn_layers < 3:
            raise ValueError(
                f"`drcn_layers` must be at least 3 (an autoencoder follows layer 2), got {self.drcn_layers}."
            )
        check_range("drcn_reconstruction_weight", self.drcn_reconstruction_weight, 0.0)
        if self.max_sequence_length < 2:
            raise ValueError(f"`max_sequence_length` must be at least 2, got {self.max_sequence_length}.")
        if self.re2_kernel_size % 2 == 0:
            raise ValueError(f"`re2_kernel_size` must be odd so that lengths are kept, got {self.re2_kernel_size}.")
        check_range("dropout", self.dropout, 0.0, 1.0)

    def validate_reductions(self) -> None:
        if self.sfa_reductions is None or len(self.sfa_reductions) != 2:
            raise ValueError(f"`sfa_reductions` must be a pair (r1, r2), got {self.sfa_reductions!r}.")
        check_range("fa_reduction", self.fa_reduction, 1.0)
        for value in self.sfa_reductions:
            check_range("sfa_reductions", value, 1.0)
        self._check_bottlenecks()

    def feature_attention_width(self) -> int:
        """D, the width of the interaction-stage token features the FA/SFA blocks of `matcher` act on."""
        if self.matcher == "bimpm":
            return 8 * self.bimpm_perspectives
        if self.matcher == "cafe":
            return self.hidden_size + CAFE_FACTORIZED_FEATURES
        if self.matcher == "drcn":
            return 2 * self.hidden_size
        return self.hidden_size

    def bottleneck_widths(self) -> dict[str, int]:
        """The bottleneck widths of the block in use, keyed by the field that sets each (empty for `none`); a ratio
        that does not divide its width exactly is a ValueError naming the field."""
        width = self.feature_attention_width()
        if self.feature_attention == "fa":
            return {"fa_reduction": reduced_width(width, self.fa_reduction, "fa_reduction")}
        if self.feature_attention == "sfa":
            r1, r2 = self.sfa_reductions
            branch = 2 * reduced_width(width, r1, "sfa_reductions[0] (r1)")
            return {
                "sfa_reductions[0] (r1)": branch,
                "sfa_reductions[1] (r2)": reduced_width(branch, r2, "sfa_reductions[1] (r2)"),
            }
        return {}

    def _check_bottlenecks(self) -> None:
        floor = bottleneck_floor(self.max_sequence_length)
        for field, width in self.bottleneck_widths().items():
            if width <= floor:
                raise ValueError(
                    f"`{field}` gives a bottleneck of {width} features for the {self.matcher} block width "
                    f"{self.feature_attention_width()} (hidden_size={self.hidden_size}), but the bottleneck rule (SFA "
                    f"paper eq. 9) needs more than 8.33 ln(max_sequence_length) = {floor:.1f} for "
                    f"max_sequence_length={self.max_sequence_length}; lower the reduction, widen the features "
                    "(`hidden_size`, or `bimpm_perspectives` for BiMPM) or lower `max_sequence_length`."
                )


__all__ = ["SiameseMatcherConfig"]

"""Configuration of neighbor attention on a frozen masked-language-model encoder."""

from .common import PairzooConfig, check_choice, check_range

TRAINING_MODES = ("neighbor", "full", "bitfit")
PROMPT_FORMATS = ("label_words", "mask_only")
DECODERS = ("mlm_head", "input_embeddings")
MASK_REGULARIZER_STATES = ("layer_input", "layer_output")
CLASSIFIER_NORMS = ("none", "batch")


def default_neighbor_layers(num_hidden_layers: int) -> list[int]:
    """The upper half of the encoder except its last layer, 0-based: layers n//2 .. n-2, and at least layer n-2.

    BERT-base (12 layers) gives 6..10, the paper's 1-based 7-11; the 6-layer MiniLM gives [3, 4] (1-based 4-5); a
    2-layer encoder (the tiny test backbones) gives [0], the one layer below its last; a 1-layer encoder gives none.
    """
    return list(range(max(0, min(num_hidden_layers // 2, num_hidden_layers - 2)), num_hidden_layers - 1))


class NeighborAttentionConfig(PairzooConfig):
    r"""
    Hyper-parameters of [`NeighborAttentionForSequenceClassification`]: a frozen masked-language-model encoder reads
    `[CLS] [MASK]' Y1 or ... or Yp of [MASK] [SEP] [MASK]' x1 [SEP] [MASK]' x2 [SEP]`, its upper layers add neighbor
    attention (each token also attends to k vocabulary neighbours), and a linear head classifies the [MASK] state.
    The defaults are the paper's form; `classifier_norm="batch"` departs from it.

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the encoder (BERT, RoBERTa, XLM-RoBERTa, DeBERTa-v2/v3, ELECTRA, MPNet, DistilBERT, ModernBERT
            or ALBERT), stored inside this config so `from_pretrained(dir)` rebuilds the model offline. Required to
            build a model.
        training_mode (`str`, *optional*, defaults to `"neighbor"`):
            `"neighbor"`: the paper's method (frozen encoder; K_b, V_b, f_e, LN_e and the head train). Baselines
            without neighbor attention: `"full"` fine-tunes the whole encoder, `"bitfit"` only its bias terms.
        neighbor_layers (`list[int]`, *optional*, defaults to `None`):
            0-based layers with neighbor attention, never the last. `None`: the upper half except the last layer
            (`default_neighbor_layers`; BERT-base's 6-10, the paper's).
        num_candidates (`int`, *optional*, defaults to 100):
            K, vocabulary candidates per token: the top-K of exp(W_e h_i^T / sqrt(d)).
        num_neighbors (`int`, *optional*, defaults to 10):
            k <= K neighbours per token: sampled from the candidates in proportion to that score in training
            (Gumbel-top-k, without replacement), the top-k at evaluation.
        alpha (`float`, *optional*, defaults to 0.1):
            Weight of the neighbor branch: h' = LN((1 - alpha) h_s + alpha h_b + h); 0 gives the frozen encoder.
        lambda_m (`float`, *optional*, defaults to 1.0):
            Weight of the regulariser L_m in CE - lambda_m L_m - lambda_n L_n (1 in the paper, 0 turns it off).
        lambda_n (`float`, *optional*, defaults to 1.0):
            Weight of the regulariser L_n (1 in the paper, 0 turns it off).
        mask_regularizer_state (`str`, *optional*, defaults to `"layer_input"`):
            [MASK] state of a neighbor layer that enters L_m: its input (`"layer_input"`, the paper) or its output
            (`"layer_output"`, which sends L_m's gradient through every neighbor layer's K_b and V_b).
        untouched_fraction (`float`, *optional*, defaults to 0.15):
            Probability that a token skips every neighbor layer in a training forward (paper Appendix D); 0 turns it
            off.
        connecting_tokens (`bool`, *optional*, defaults to `True`):
            Put the connecting token [MASK]' (the tokenizer's mask token) before the label-word part and each sentence.
        label_words (`list[str]`, *optional*, defaults to `None`):
            Words Y1..Yp written into the input, at least one per class. `None` uses the class names of `id2label`,
            lower-cased, `_` read as a space.
        prompt_format (`str`, *optional*, defaults to `"label_words"`):
            `"label_words"` (the paper's input) or `"mask_only"` (the ablation without label words).
        token_decoder (`str`, *optional*, defaults to `None`):
            How the expressiveness evaluation decodes the [MASK] state to tokens: `"mlm_head"` (the architecture's MLM
            head) or `"input_embeddings"` (h W_e^T). `None`: `from_backbone` picks the MLM head where the checkpoint
            has its weights.
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout before the linear head; `None` uses the backbone's hidden dropout.
        classifier_norm (`str`, *optional*, defaults to `"none"`):
            `"none"`: the paper's head. `"batch"` (not in the paper): a BatchNorm1d standardises the [MASK] state per
            feature before the head and trains with it in every `training_mode`.
        num_labels (`int`, *optional*, defaults to 2):
            Number of classes (at least 2; cross-entropy). `id2label` sets it too.
    """

    model_type = "neighbor-attention"

    training_mode: str = "neighbor"
    neighbor_layers: list[int] | None = None
    num_candidates: int = 100
    num_neighbors: int = 10
    alpha: float = 0.1
    lambda_m: float = 1.0
    lambda_n: float = 1.0
    mask_regularizer_state: str = "layer_input"
    untouched_fraction: float = 0.15
    connecting_tokens: bool = True
    label_words: list[str] | None = None
    prompt_format: str = "label_words"
    token_decoder: str | None = None
    classifier_dropout: float | None = None
    classifier_norm: str = "none"

    def derive_defaults(self, kwargs: dict) -> None:
        super().derive_defaults(kwargs)
        if self.neighbor_layers is not None and len(set(self.neighbor_layers)) == len(self.neighbor_layers):
            self.neighbor_layers = sorted(self.neighbor_layers)

    def validate_choices(self) -> None:
        check_choice("training_mode", self.training_mode, TRAINING_MODES)
        check_choice("prompt_format", self.prompt_format, PROMPT_FORMATS)
        check_choice("mask_regularizer_state", self.mask_regularizer_state, MASK_REGULARIZER_STATES)
        check_choice("classifier_norm", self.classifier_norm, CLASSIFIER_NORMS)
        if self.token_decoder is not None:
            check_choice("token_decoder", self.token_decoder, DECODERS)

    def validate_neighbors(self) -> None:
        for field in ("num_candidates", "num_neighbors"):
            if getattr(self, field) < 1:
                raise ValueError(f"`{field}` must be a positive integer, got {getattr(self, field)!r}.")
        if self.num_neighbors > self.num_candidates:
            raise ValueError(
                f"`num_neighbors` (k={self.num_neighbors}) must not exceed `num_candidates` (K={self.num_candidates})."
            )

    def validate_ranges(self) -> None:
        check_range("alpha", self.alpha, 0.0, 1.0)
        check_range("lambda_m", self.lambda_m, 0.0)
        check_range("lambda_n", self.lambda_n, 0.0)
        check_range("untouched_fraction", self.untouched_fraction, 0.0, 1.0)

    def validate_labels(self) -> None:
        if self.num_labels < 2:
            raise ValueError(f"`num_labels` must be >= 2 (the [MASK] head is a classifier), got {self.num_labels}.")
        if self.label_words is not None:
            if any(not word.strip() for word in self.label_words):
                raise ValueError(f"`label_words` must be non-empty strings, got {self.label_words!r}.")
            if len(self.label_words) < self.num_labels:
                raise ValueError(
                    f"`label_words` has {len(self.label_words)} words for {self.num_labels} classes; give one word "
                    "per class."
                )

    def validate_neighbor_layers(self) -> None:
        if self.neighbor_layers is not None and len(set(self.neighbor_layers)) != len(self.neighbor_layers):
            raise ValueError(f"`neighbor_layers` must not repeat a layer, got {self.neighbor_layers}.")
        if self.backbone_config is None:
            return
        layers = self.backbone_config.num_hidden_layers
        chosen = default_neighbor_layers(layers) if self.neighbor_layers is None else self.neighbor_layers
        if any(not 0 <= i < layers - 1 for i in chosen):
            raise ValueError(
                f"`neighbor_layers` must be 0-based layers in [0, {layers - 2}] (the last layer stays "
                f"neighbor-free), got {chosen}; `None` gives {default_neighbor_layers(layers)} on this "
                f"{layers}-layer encoder."
            )
        if self.training_mode == "neighbor" and not chosen:
            raise ValueError(
                f"`neighbor_layers` is empty for a {layers}-layer encoder; name at least one layer below the last "
                "(a 1-layer encoder has none: use `training_mode='full'` or `'bitfit'`)."
            )
        if self.num_candidates > self.backbone_config.vocab_size:
            raise ValueError(
                f"`num_candidates` ({self.num_candidates}) exceeds the vocabulary ({self.backbone_config.vocab_size})."
            )

    @property
    def resolved_neighbor_layers(self) -> list[int]:
        """`neighbor_layers`, or the default for the backbone's depth when `None`; empty outside `"neighbor"` mode."""
        if self.training_mode != "neighbor":
            return []
        if self.neighbor_layers is not None:
            return list(self.neighbor_layers)
        return default_neighbor_layers(self.backbone_config.num_hidden_layers)


__all__ = ["NeighborAttentionConfig", "default_neighbor_layers"]

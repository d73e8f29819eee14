"""Configuration of neighbor attention on a frozen masked-language-model encoder."""

from .common import BACKBONE_SUB_CONFIG, PairzooConfig, check_choice, check_range, coerce_backbone_config

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

    Options that depart from the paper (the defaults keep the paper's form):

    - `classifier_norm="batch"`: a BatchNorm1d (affine, torch's default momentum and eps) standardises the [MASK]
      state per feature before the dropout and the linear head. It trains in every `training_mode` (it belongs to
      the head, like the classifier), and its running statistics are saved with the model and used at evaluation.
      A one-example training batch (no per-feature variance) is normalised with the running statistics instead.
      Why: on the bundled MiniLM, neighbor attention and BitFit (the same head) stay at SICK-E's majority class, and
      the frozen encoder's [MASK] states are an ill-conditioned input for a linear head rather than an uninformative
      one. Measured on the frozen MiniLM, SICK-E (all 4,439 training rows, dev), the [MASK] states of this prompt
      (`python -m benchmarks.probe_mask --backbone minilm --dataset sick-e`): the states share a common component of
      norm 11.8 and vary around it by 1.9 on average (mean pairwise cosine 0.973); a ridge probe on per-feature
      standardised states reaches 73.5% dev accuracy (majority class 56.8%). The paper's head alone (dropout 0.1 +
      linear; AdamW, weight decay 0.01, batch 16, 5 epochs) on the raw states stays at the majority class at lr 1e-3
      (60.2 at lr 1e-2); on standardised states it reaches 68.5 at lr 1e-3 (60.4 at lr 1e-2). End to end at the
      `cpu-medium` budget (2,000 rows, 1 epoch, lr 1e-3, seeds 0-2; one-off `pairzoo.train` runs): neighbor attention
      with this option 61.41 / 61.41 / 56.77 and BitFit with it 58.18 / 58.99 / 61.21; without it both stayed at
      56.77 on every seed of the committed runs, as did neighbor attention on seed 0 with the current code (full
      fine-tuning: 62.83 on average).

    Args:
        backbone_config (`PretrainedConfig` or `dict`, *optional*, defaults to `None`):
            Config of the encoder (BERT or RoBERTa family). Stored inside this config so that `from_pretrained(dir)`
            rebuilds the whole model offline. Required to build a model.
        training_mode (`str`, *optional*, defaults to `"neighbor"`):
            `"neighbor"`: the paper's method, frozen encoder, only K_b, V_b, f_e, LN_e and the classifier train.
            `"full"`: baseline, full fine-tuning of the [MASK] formulation (no neighbor attention).
            `"bitfit"`: baseline, only the encoder's bias terms (and the classifier) train, no neighbor attention.
        neighbor_layers (`list[int]`, *optional*, defaults to `None`):
            0-based encoder layers with neighbor attention (`"neighbor"` mode only). `None` takes the upper half
            except the last layer (`default_neighbor_layers`: [3, 4] on the 6-layer MiniLM, 6-10 on BERT-base, [0] on
            a 2-layer encoder). The last layer is always frozen and neighbor-free, so it may not be listed.
        num_candidates (`int`, *optional*, defaults to 100):
            K, vocabulary candidates per token: the top-K of exp(W_e h_i^T / sqrt(d)).
        num_neighbors (`int`, *optional*, defaults to 10):
            k <= K neighbours per token: sampled from the candidates in training (without replacement, proportionally
            to exp(W_e h_i^T / sqrt(d)), by the Gumbel-top-k trick) and the top-k at evaluation.
        alpha (`float`, *optional*, defaults to 0.1):
            Weight of the neighbor branch: h' = LN((1 - alpha) h_s + alpha h_b + h). 0 gives the frozen encoder.
        lambda_m (`float`, *optional*, defaults to 1.0):
            Weight of the regulariser L_m (cosine between h_[MASK] and a sampled neighbour of each token); the
            objective is CE - lambda_m L_m - lambda_n L_n, weighted 1 in the paper. 0 turns it off (plain NeiAttn).
        lambda_n (`float`, *optional*, defaults to 1.0):
            Weight of the regulariser L_n (cosine between sg(h_i) and its neighbours), 1 in the paper. 0 turns it off.
        mask_regularizer_state (`str`, *optional*, defaults to `"layer_input"`):
            Which [MASK] state of neighbor layer l enters L_m. `"layer_input"`: h^(l)_[MASK], the layer's input, as
            the paper writes it; the first neighbor layer's input comes from the frozen layers below, so its L_m term
            trains nothing. `"layer_output"`: the [MASK] state after the layer (this implementation's earlier form),
            which puts a gradient of L_m through every neighbor layer's K_b and V_b.
        untouched_fraction (`float`, *optional*, defaults to 0.15):
            Probability that a token skips neighbor attention (h_b replaced by h_s) in training (Appendix D). The
            untouched tokens are drawn once per forward pass and skip every neighbor layer, as in the paper. Applied
            in training only, like dropout, so evaluation is deterministic. 0 turns it off.
        connecting_tokens (`bool`, *optional*, defaults to `True`):
            Put the connecting token [MASK]' (the tokenizer's mask token) before the label-word part and each sentence.
        label_words (`list[str]`, *optional*, defaults to `None`):
            Words Y1..Yp written into the input, one per class at least (fewer is a ValueError). `None` uses the class
            names of `id2label`, lower-cased with `_` read as a space (e.g. `not_entailment` -> `not entailment`).
        prompt_format (`str`, *optional*, defaults to `"label_words"`):
            `"label_words"`: the paper's input with label words. `"mask_only"`: the label-word-free ablation
            `[CLS] [MASK]' [MASK] [SEP] [MASK]' x1 [SEP] [MASK]' x2 [SEP]`.
        token_decoder (`str`, *optional*, defaults to `None`):
            How the [MASK] state is decoded to tokens for the expressiveness evaluation (never used in the loss):
            `"mlm_head"` (the backbone's MLM transform, tied input embeddings and output bias) or
            `"input_embeddings"` (logits h W_e^T through the tied input-embedding matrix, for encoders saved without an
            MLM head such as the bundled MiniLM). `None`: `from_backbone` picks `"mlm_head"` when the checkpoint has
            MLM-head weights and `"input_embeddings"` otherwise; a randomly initialised model builds an MLM head.
        classifier_dropout (`float`, *optional*, defaults to `None`):
            Dropout before the linear head; `None` uses the backbone's `hidden_dropout_prob`.
        classifier_norm (`str`, *optional*, defaults to `"none"`):
            Normalisation of the [MASK] state before the dropout and the linear head. `"none"`: the paper's head.
            `"batch"`: per-feature batch normalisation with learned scale and shift (see the options above).
        num_labels (`int`, *optional*, defaults to 2):
            Number of classes (at least 2; cross-entropy). `id2label` sets it too.
    """

    model_type = "neighbor-attention"
    sub_configs_defaults = BACKBONE_SUB_CONFIG

    def __init__(
        self,
        backbone_config=None,
        training_mode: str = "neighbor",
        neighbor_layers: "list[int] | None" = None,
        num_candidates: int = 100,
        num_neighbors: int = 10,
        alpha: float = 0.1,
        lambda_m: float = 1.0,
        lambda_n: float = 1.0,
        mask_regularizer_state: str = "layer_input",
        untouched_fraction: float = 0.15,
        connecting_tokens: bool = True,
        label_words: "list[str] | None" = None,
        prompt_format: str = "label_words",
        token_decoder: "str | None" = None,
        classifier_dropout: "float | None" = None,
        classifier_norm: str = "none",
        **kwargs,
    ):
        check_choice("training_mode", training_mode, TRAINING_MODES)
        check_choice("prompt_format", prompt_format, PROMPT_FORMATS)
        check_choice("mask_regularizer_state", mask_regularizer_state, MASK_REGULARIZER_STATES)
        check_choice("classifier_norm", classifier_norm, CLASSIFIER_NORMS)
        if token_decoder is not None:
            check_choice("token_decoder", token_decoder, DECODERS)
        for field, value in (("num_candidates", num_candidates), ("num_neighbors", num_neighbors)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"`{field}` must be a positive integer, got {value!r}.")
        if num_neighbors > num_candidates:
            raise ValueError(
                f"`num_neighbors` (k={num_neighbors}) must not exceed `num_candidates` (K={num_candidates})."
            )
        check_range("alpha", alpha, 0.0, 1.0)
        check_range("lambda_m", lambda_m, 0.0)
        check_range("lambda_n", lambda_n, 0.0)
        check_range("untouched_fraction", untouched_fraction, 0.0, 1.0)
        if classifier_dropout is not None:
            check_range("classifier_dropout", classifier_dropout, 0.0, 1.0)
        num_labels = len(kwargs["id2label"]) if kwargs.get("id2label") else kwargs.get("num_labels", 2)
        if num_labels is not None and num_labels < 2:
            raise ValueError(f"`num_labels` must be >= 2 (the [MASK] head is a classifier), got {num_labels}.")
        if label_words is not None:
            label_words = list(label_words)
            if any(not isinstance(w, str) or not w.strip() for w in label_words):
                raise ValueError(f"`label_words` must be non-empty strings, got {label_words!r}.")
            if num_labels is not None and len(label_words) < num_labels:
                raise ValueError(
                    f"`label_words` has {len(label_words)} words for {num_labels} classes; give one word per class."
                )
        self.backbone_config = coerce_backbone_config(backbone_config)
        if neighbor_layers is not None:
            if len(set(neighbor_layers)) != len(neighbor_layers):
                raise ValueError(f"`neighbor_layers` must not repeat a layer, got {neighbor_layers}.")
            neighbor_layers = sorted(neighbor_layers)
        if self.backbone_config is not None:
            layers = self.backbone_config.num_hidden_layers
            chosen = default_neighbor_layers(layers) if neighbor_layers is None else neighbor_layers
            if any(not 0 <= i < layers - 1 for i in chosen):
                raise ValueError(
                    f"`neighbor_layers` must be 0-based layers in [0, {layers - 2}] (the last layer stays "
                    f"neighbor-free), got {chosen}; `None` gives {default_neighbor_layers(layers)} on this "
                    f"{layers}-layer encoder."
                )
            if training_mode == "neighbor" and not chosen:
                raise ValueError(
                    f"`neighbor_layers` is empty for a {layers}-layer encoder; name at least one layer below the last "
                    "(a 1-layer encoder has none: use `training_mode='full'` or `'bitfit'`)."
                )
            if num_candidates > self.backbone_config.vocab_size:
                raise ValueError(
                    f"`num_candidates` ({num_candidates}) exceeds the vocabulary ({self.backbone_config.vocab_size})."
                )
        self.training_mode = training_mode
        self.neighbor_layers = neighbor_layers
        self.num_candidates = num_candidates
        self.num_neighbors = num_neighbors
        self.alpha = float(alpha)
        self.lambda_m = float(lambda_m)
        self.lambda_n = float(lambda_n)
        self.mask_regularizer_state = mask_regularizer_state
        self.untouched_fraction = float(untouched_fraction)
        self.connecting_tokens = connecting_tokens
        self.label_words = label_words
        self.prompt_format = prompt_format
        self.token_decoder = token_decoder
        self.classifier_dropout = classifier_dropout
        self.classifier_norm = classifier_norm
        super().__init__(**kwargs)

    @property
    def resolved_neighbor_layers(self) -> list[int]:
        """`neighbor_layers`, or the default for the backbone's depth when `None`; empty outside `"neighbor"` mode."""
        if self.training_mode != "neighbor":
            return []
        if self.neighbor_layers is not None:
            return list(self.neighbor_layers)
        return default_neighbor_layers(self.backbone_config.num_hidden_layers)


__all__ = ["NeighborAttentionConfig", "default_neighbor_layers"]

"""Neighbor attention on a frozen masked-language-model encoder (Bai, Shang, Sun, Balasubramanian 2022: "Learning for
Expressive Task-Related Sentence Representations"). No public code exists; this file is the reference implementation.

Task formulation (paper eq. 1, 4). `encode_neighbor_attention_inputs` writes
`[CLS] [MASK]' Y1 or Y2 or ... or Yp of [MASK] [SEP] [MASK]' x1 [SEP] [MASK]' x2 [SEP]` with the tokenizer's own
cls/sep/mask tokens ([MASK]' is the mask token too; `connecting_tokens=False` drops it). A linear head on the last
hidden state of the label [MASK] (its position is the `mask_positions` input) predicts the class; cross-entropy.
With `classifier_norm="batch"` (not in the paper) a BatchNorm1d (affine, torch's default momentum and eps)
standardises that state per feature first; it belongs to the head, so it trains in every `training_mode`, and its
running statistics are saved and used at evaluation (a one-example training batch is normalised with them too). Why:
a frozen encoder's [MASK] states can share a large common component and vary little around it, an ill-conditioned
input for a linear head (`benchmarks/probe_mask.py` measures this for a backbone).

Neighbor attention (paper section 4), with h the hidden states entering a neighbor layer, W_e the input-embedding
matrix, d the hidden size:

- selection, once, at the first neighbor layer, batched: s_i = h_i W_e^T / sqrt(d) (B, L, V); the token's own id
  and the padding id are excluded (other special tokens stay candidates); candidates = top-K of s_i; neighbours = k
  of them, drawn without replacement with probability proportional to exp(s_i) (Gumbel-top-k) in training, the top-k
  at evaluation. No Python loop over tokens. Where the embeddings are narrower than the hidden states (ELECTRA-small,
  ALBERT) W_e is taken in the hidden space, mapped by the encoder's embedding projection.
- e_ij = LN_emb(W_e[j] + P[pos_i] + T[type_i]): the frozen embedding layer's output (without dropout) for the
  neighbour's id at token i's position, computed by that layer itself on a copy of the input with id j in place of
  token i's, at the input's own position ids (the "neighbour embedding plus the i-th position embedding"); e_i the
  same for the token's own id (the encoder's embedding output without dropout). Architectures whose embedding layer
  adds no position (DeBERTa-v3, ModernBERT) give the embedding of the id alone; ELECTRA-small's and ALBERT's
  projection is included.
- m_ij = LN_e(f_e(e_ij - e_i) + (e_ij - e_i) + h_i), f_e a d x d linear map, LN_e a LayerNorm.
- in each neighbor layer l: h_s = f(MHA(Q h_i, K h, V h)) is the frozen self-attention (f = the frozen output
  projection and dropout); h_b,i = f(MHA(Q h_i, K_b r_i, V_b r_i)) with r_i = [sg(h_i), m_i1, ..., m_ik] (per-token
  attention over k + 1 keys, the frozen query Q and head split, scaled by 1/sqrt(head size)); h' = LN((1 - alpha) h_s
  + alpha h_b + h) with the layer's frozen attention LayerNorm, then the layer's frozen feed-forward block as usual.
  f is linear up to its dropout, so the layer runs through its own module with its attention context replaced by
  (1 - alpha) ctx_s + alpha ctx_b before the output projection (a forward pre-hook): one dropout mask serves both
  branches. With alpha = 0 the layer is the frozen layer exactly. The keys of h_b all sit at token i's position, so
  the attention's position terms are left out: absolute positions are already in the states, rotary rotations of a
  query and a key at one position cancel, MPNet's relative bias is one constant over the keys; DeBERTa's
  position-to-content term at offset 0 is the one term dropped.
- neighbour update after each neighbor layer but the last: m'_ij = f(MHA(Q m_ij, K_b z_i, V_b z_i)) with
  z_i = [sg(h_i), sg(h_[MASK]), m_i1..m_ik], m <- LN(m' + m) with the same frozen attention LayerNorm (no FFN); f
  is the layer's output projection followed by the backbone's hidden dropout.
- pre-LN encoders (ModernBERT: h + f(MHA(norm(h))) with no norm after the attention), by analogy: the frozen query
  and K_b, V_b read the layer's attention norm of what they project (norm(h_i), norm(sg(h_i)), norm(m_ij)), h' =
  (1 - alpha) h_s + alpha h_b + h then the layer's feed-forward block (the layer's own residual), and the neighbour
  update is m <- m + m'. Selection, m_ij and the regularisers read h as written.
- each neighbor layer has its own K_b, V_b (d x d, initialised from that layer's pretrained key/value projections
  by `from_backbone`); f_e and LN_e are shared (they build m once). Only K_b, V_b, f_e, LN_e and the classifier (with
  its BatchNorm under `classifier_norm="batch"`) train.
- untouched tokens (Appendix D): in training each token independently keeps h_b = h_s with probability
  `untouched_fraction`, drawn once per forward pass: an untouched token skips every neighbor layer.

Regularisers (paper section 5), averaged over neighbor layers and non-padding tokens other than the label [MASK]:
L_m = cos(h^(l)_[MASK], sg(m_ij)) for one neighbour j per token (random in training, the first at evaluation), with
h^(l) the neighbor layer's input (the first neighbor layer's input comes from frozen layers, so its term trains
nothing; `mask_regularizer_state="layer_output"` uses the state after the layer instead), and
L_n = cos(sg(h_i), m_ij) over all neighbours; the loss is CE - lambda_m L_m - lambda_n L_n (both weights 1 by
default, as in the paper's objective).

Baselines (`training_mode`): `full` fine-tunes the whole encoder on the same [MASK] formulation; `bitfit` trains only
the encoder's bias terms. Neither has neighbor attention.

Decoding for expressiveness: `decode_mask_logits` maps the [MASK] state to vocabulary logits through the backbone
architecture's own MLM head (`MaskedLMHead`: transformers' `AutoModelForMaskedLM` class without its encoder, decoder
tied to the input embeddings) when the model has one, or through the input-embedding matrix alone (in the hidden
space, as for the selection; `token_decoder="input_embeddings"`, for checkpoints saved without an MLM head: the
bundled MiniLM, sentence-embedding models, ELECTRA discriminators); a randomly initialised model builds an MLM head.
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModelForMaskedLM, PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import ModelOutput, can_return_tuple, logging

from ..configuration.configuration_neighbor_attention import NeighborAttentionConfig
from .common import _HUB_KWARGS, PairzooPreTrainedModel, build_backbone, logger
from .encoders import (
    EncoderStack,
    attention_dropout,
    attention_input,
    attention_output_norm,
    default_position_ids,
    embedding_output,
    embedding_projection,
    encoder_architecture,
    head_shape,
    hidden_dropout,
    layer_norm_eps,
    output_projection,
    project,
    projection_modules,
    word_embeddings,
)


def resolve_label_words(config: NeighborAttentionConfig) -> list[str]:
    """The label words of `config`: `label_words`, or the `id2label` names lower-cased with `_` read as a space."""
    if config.label_words is not None:
        words = list(config.label_words)
    else:
        words = [str(config.id2label[i]).lower().replace("_", " ") for i in range(config.num_labels)]
    if len(words) < config.num_labels:
        raise ValueError(f"`label_words` has {len(words)} words for {config.num_labels} classes.")
    return words


def encode_neighbor_attention_inputs(
    tokenizer,
    sentences1: "list[str]",
    sentences2: "list[str] | None" = None,
    label_words: "list[str] | None" = None,
    max_length: int = 128,
    connecting_tokens: bool = True,
    prompt_format: str = "label_words",
) -> dict[str, torch.Tensor]:
    """Right-padded `input_ids`, `attention_mask` and `mask_positions` (B,) of the neighbor-attention input.

    `label_words` format: `[CLS] [MASK]' Y1 or ... or Yp of [MASK] [SEP] [MASK]' x1 [SEP] [MASK]' x2 [SEP]`;
    `mask_only`: the same without `Y1 or ... or Yp of`. [MASK]' (the tokenizer's mask token) is dropped with
    `connecting_tokens=False`; without `sentences2` the `[MASK]' x2 [SEP]` part is absent. Only the sentences are
    truncated (longest first) to fit `max_length`; the prompt never is. A label word that tokenizes to nothing, or a
    prompt longer than `max_length`, is a ValueError.
    """
    if tokenizer.cls_token_id is None or tokenizer.sep_token_id is None or tokenizer.mask_token_id is None:
        raise ValueError("the tokenizer needs cls, sep and mask tokens for the neighbor-attention input.")
    if sentences2 is not None and len(sentences2) != len(sentences1):
        raise ValueError(f"{len(sentences1)} first sentences but {len(sentences2)} second sentences.")
    cls, sep, mask = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.mask_token_id
    connect = [mask] if connecting_tokens else []
    words: list[int] = []
    if prompt_format == "label_words":
        if not label_words:
            raise ValueError("`label_words` are required for prompt_format='label_words'.")
        for word in label_words:
            if not str(word).strip() or not tokenizer(str(word), add_special_tokens=False)["input_ids"]:
                raise ValueError(f"label word {word!r} tokenizes to nothing; choose words the tokenizer can encode.")
        words = tokenizer(" or ".join(str(w).strip() for w in label_words) + " of", add_special_tokens=False)[
            "input_ids"
        ]
    elif prompt_format != "mask_only":
        raise ValueError(f"`prompt_format` must be 'label_words' or 'mask_only', got {prompt_format!r}.")
    prefix = [cls, *connect, *words, mask, sep]
    rows, positions = [], []
    for i, text in enumerate(sentences1):
        parts = [text] if sentences2 is None else [text, sentences2[i]]
        pieces = []
        for field, part in zip(("sentence1", "sentence2"), parts):
            if not isinstance(part, str) or not part.strip():
                raise ValueError(f"`{field}`[{i}] must be a non-empty string, got {part!r}.")
            pieces.append(tokenizer(part, add_special_tokens=False)["input_ids"])
        budget = max_length - len(prefix) - len(pieces) * (len(connect) + 1)
        if budget < len(pieces):
            raise ValueError(f"`max_length` {max_length} leaves no room for the sentences after the prompt.")
        while sum(len(p) for p in pieces) > budget:
            longest = max(range(len(pieces)), key=lambda n: len(pieces[n]))
            pieces[longest] = pieces[longest][:-1]
        ids = list(prefix)
        for piece in pieces:
            ids += [*connect, *piece, sep]
        rows.append(ids)
        positions.append(len(prefix) - 2)
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return {
        "input_ids": torch.tensor([r + [pad] * (width - len(r)) for r in rows], dtype=torch.long),
        "attention_mask": torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=torch.long),
        "mask_positions": torch.tensor(positions, dtype=torch.long),
    }


@dataclass
class NeighborAttentionOutput(ModelOutput):
    r"""
    Output of [`NeighborAttentionForSequenceClassification`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `labels` is given):
            CE - lambda_m L_m - lambda_n L_n.
        logits (`torch.FloatTensor` of shape `(batch_size, num_labels)`): class scores from the [MASK] state.
        hidden_states (`tuple(torch.FloatTensor)`, *optional*, with `output_hidden_states=True`): the embedding
            output and the output of every layer (neighbor layers included), each `(batch_size, sequence_length,
            hidden_size)`; the last is `last_hidden_state`.
        mask_hidden_state (`torch.FloatTensor` of shape `(batch_size, hidden_size)`, *optional*): last hidden state of
            the label [MASK] (with `output_internals=True`).
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`, *optional*):
            last hidden states of all tokens (with `output_internals=True`).
        neighbor_ids (`torch.LongTensor` of shape `(batch_size, sequence_length, num_neighbors)`, *optional*): the
            vocabulary ids of each token's neighbours (with `output_internals=True`, `"neighbor"` mode).
        regularizer_m (`torch.FloatTensor` of shape `()`, *optional*): L_m (with `output_internals=True`).
        regularizer_n (`torch.FloatTensor` of shape `()`, *optional*): L_n (with `output_internals=True`).
    """

    loss: "torch.FloatTensor | None" = None
    logits: "torch.FloatTensor | None" = None
    hidden_states: "tuple[torch.FloatTensor, ...] | None" = None
    mask_hidden_state: "torch.FloatTensor | None" = None
    last_hidden_state: "torch.FloatTensor | None" = None
    neighbor_ids: "torch.LongTensor | None" = None
    regularizer_m: "torch.FloatTensor | None" = None
    regularizer_n: "torch.FloatTensor | None" = None


class _EncoderStandIn(nn.Module):
    """Takes the encoder's place inside a masked-LM model: hands back the hidden states it is given as
    `inputs_embeds` as its last hidden state. Any other attribute is read from the real encoder of the call (a head
    that reads the word embeddings from the encoder, DeBERTa's non-legacy one, finds them there)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder_of_call: list = []

    def forward(self, *args, inputs_embeds: "torch.Tensor | None" = None, **kwargs) -> BaseModelOutput:
        return BaseModelOutput(last_hidden_state=inputs_embeds)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            encoders = self.__dict__.get("encoder_of_call")
            if not encoders:
                raise
            return getattr(encoders[0], name)


class _TiedDecoder(nn.Module):
    """A masked-LM decoder whose weight is the encoder's input-embedding matrix, read at each call; only its output
    bias (if any) is stored."""

    def __init__(self, bias: "nn.Parameter | None") -> None:
        super().__init__()
        self.bias = bias
        self.weight_of_call: list = []

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(hidden, self.weight_of_call[0], self.bias)


class MaskedLMHead(nn.Module):
    """The backbone architecture's own masked-LM head: the modules transformers' `AutoModelForMaskedLM` class puts
    after its encoder (registered here under that class's names, e.g. BERT's `cls`, RoBERTa's `lm_head`, DistilBERT's
    `vocab_transform` ...), run through that class's own forward on given hidden states, so each architecture's
    transform, activation and norm are its own. A decoder tied to the input embeddings (the default of every
    architecture) stores only its output bias and reads the matrix from the backbone at each call; a head's second
    registration of that bias (BERT's `cls.predictions.bias`) is dropped. An untied decoder keeps its own weight.
    """

    def __init__(self, backbone_config: PreTrainedConfig) -> None:
        super().__init__()
        device = torch.get_default_device()
        with torch.device("meta"):  # the encoder built here is replaced at once: no memory for it
            mlm = AutoModelForMaskedLM.from_config(backbone_config)
        paths = {id(module): name for name, module in mlm.named_modules()}
        decoder = mlm.get_output_embeddings()
        decoder_path, encoder_prefix = paths[id(decoder)], mlm.base_model_prefix + "."
        # transformers' record of ties (target -> source), kept where `from_pretrained` builds without tying
        ties = mlm.all_tied_weights_keys
        kept = decoder
        if ties.get(f"{decoder_path}.weight") == f"{paths[id(mlm.get_input_embeddings())]}.weight":
            kept = _TiedDecoder(decoder.bias)
            parent, _, name = decoder_path.rpartition(".")
            setattr(mlm.get_submodule(parent), name, kept)
        setattr(mlm, mlm.base_model_prefix, _EncoderStandIn())
        if device.type != "meta":  # built inside `from_pretrained` the weights stay on meta until loaded
            mlm.to_empty(device=device)
            for module in mlm.modules():
                if module is not mlm and not isinstance(module, _TiedDecoder):
                    mlm._init_weights(module)
            if isinstance(kept, _TiedDecoder) and kept.bias is not None:
                init.zeros_(kept.bias)
        for target, source in ties.items():  # the head's second registration of a decoder parameter is dropped
            for own, other in ((target, source), (source, target)):
                if own.startswith(decoder_path + ".") and not other.startswith(encoder_prefix):
                    parent, _, name = other.rpartition(".")
                    del mlm.get_submodule(parent)._parameters[name]
        for name, child in mlm.named_children():
            if name != mlm.base_model_prefix:
                self.add_module(name, child)
        # lists, so that modules registered above are not registered a second time
        self._mlm = [mlm]
        self._decoder_path = decoder_path
        self._tied_decoder = [kept] if isinstance(kept, _TiedDecoder) else []
        self._untied_decoder = [] if self._tied_decoder else [kept]

    @property
    def untied_decoder(self) -> "nn.Linear | None":
        """The decoder when it keeps its own weight (not tied to the input embeddings), else None."""
        return self._untied_decoder[0] if self._untied_decoder else None

    def replace_untied_decoder(self, decoder: nn.Linear) -> None:
        """Put `decoder` in the untied decoder's place (transformers' `set_output_embeddings`)."""
        parent, _, name = self._decoder_path.rpartition(".")
        setattr(self._mlm[0].get_submodule(parent), name, decoder)
        if not parent:  # a direct child of the masked-LM class is registered here too
            setattr(self, name, decoder)
        self._untied_decoder[:] = [decoder]

    @torch.no_grad()
    def resize_vocabulary(self, old_size: int, new_size: int) -> None:
        """Give the head's vocabulary-sized biases (a tied decoder's output bias, a head's unused second bias)
        `new_size` entries after the vocabulary changed from `old_size`: the first ones kept, new tokens zero (as
        transformers pads a tied decoder's bias). The untied decoder is resized by `resize_token_embeddings` itself."""
        resized: dict = {}
        for module in self.modules():
            if module is self.untied_decoder:
                continue
            for name, param in list(module._parameters.items()):
                if param is None or param.dim() != 1 or param.shape[0] != old_size:
                    continue
                if id(param) not in resized:
                    values = param.new_zeros(new_size)
                    values[: min(old_size, new_size)] = param[: min(old_size, new_size)]
                    resized[id(param)] = nn.Parameter(values, requires_grad=param.requires_grad)
                module._parameters[name] = resized[id(param)]

    def forward(self, hidden: torch.Tensor, backbone: PreTrainedModel) -> torch.Tensor:
        """Vocabulary logits (..., V) of hidden states (..., d) of `backbone`."""
        mlm = self._mlm[0]
        stand_in = getattr(mlm, mlm.base_model_prefix)
        stand_in.encoder_of_call[:] = [backbone]
        for decoder in self._tied_decoder:
            decoder.weight_of_call[:] = [word_embeddings(backbone).weight]
        try:
            return mlm(inputs_embeds=hidden).logits
        finally:
            stand_in.encoder_of_call.clear()
            for decoder in self._tied_decoder:
                decoder.weight_of_call.clear()


def earlier_head_key_mapping(backbone_config: PreTrainedConfig) -> "dict[str, str]":
    """transformers' `key_mapping` (checkpoint-key pattern -> name here) from the MLM-head keys of pairzoo saves made
    before the head took its architecture's own modules (`lm_head.dense`, `lm_head.layer_norm`, `lm_head.bias`,
    written for BERT- and RoBERTa-style heads, the only ones then supported) to `MaskedLMHead`'s names for
    `backbone_config`; empty where the architecture's head has another shape."""
    with torch.device("meta"):
        head = MaskedLMHead(backbone_config)
    modules = dict(head.named_modules())
    shapes = (
        ("cls.predictions.transform", "LayerNorm", "cls.predictions.decoder"),  # BERT
        ("lm_head", "layer_norm", "lm_head.decoder"),  # RoBERTa, XLM-R
    )
    for transform, norm, decoder in shapes:
        if {f"{transform}.dense", f"{transform}.{norm}", decoder} <= modules.keys():
            return {
                r"^lm_head\.dense": f"lm_head.{transform}.dense",
                r"^lm_head\.layer_norm": f"lm_head.{transform}.{norm}",
                r"^lm_head\.bias": f"lm_head.{decoder}.bias",
            }
    return {}


class NeighborProjections(nn.Module):
    """The trainable key and value maps K_b, V_b of one neighbor layer."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)


def masked_lm_from_pretrained(name_or_path: str) -> "tuple[PreTrainedModel, bool]":
    """A checkpoint as its architecture's `AutoModelForMaskedLM`, and whether it lacked MLM-head weights (a missing
    key outside the encoder; that head is then newly initialised).

    transformers' own load report is held back: for a checkpoint saved without a head (a sentence-embedding model,
    the bundled MiniLM) it lists the head and calls the checkpoint corrupted. Encoder weights the checkpoint lacks are
    logged here instead, by name.
    """
    verbosity = logging.get_verbosity()
    logging.set_verbosity_error()
    try:
        mlm, info = AutoModelForMaskedLM.from_pretrained(name_or_path, output_loading_info=True)
    finally:
        logging.set_verbosity(verbosity)
    prefix = mlm.base_model_prefix + "."
    encoder_missing = [key for key in info["missing_keys"] if key.startswith(prefix)]
    if encoder_missing:
        logger.warning(
            "%s lacks %d encoder weight(s), newly initialised: %s", name_or_path, len(encoder_missing), encoder_missing
        )
    return mlm, len(encoder_missing) < len(info["missing_keys"])


def _pretrained_projection(
    backbone: PreTrainedModel, index: int, position: int
) -> "tuple[torch.Tensor, torch.Tensor | None]":
    """Weight and bias (or None) of layer `index`'s key (`position` 1) or value (2) projection, sliced out of a fused
    query/key/value projection the way `project` reads it."""
    modules = projection_modules(backbone, index)
    if len(modules) > 1:
        return modules[position].weight, modules[position].bias
    fused = modules[0]
    bias = None if fused.bias is None else fused.bias.unflatten(0, (3, -1))[position]
    return fused.weight.unflatten(0, (3, -1))[position], bias


class NeighborAttentionForSequenceClassification(PairzooPreTrainedModel):
    """Frozen MLM encoder + neighbor attention in its upper layers; a linear head on the label [MASK] state (after a
    BatchNorm1d with `classifier_norm="batch"`)."""

    config_class = NeighborAttentionConfig
    input_format = "prompt"
    frozen_modules = ("lm_head",)  # the MLM head decodes [MASK] states for evaluation and the regularisers only

    def __init__(self, config: NeighborAttentionConfig) -> None:
        super().__init__(config)
        backbone_config = config.backbone_config
        encoder_architecture(backbone_config)  # an architecture pairzoo does not know is a ValueError naming it
        hidden = backbone_config.hidden_size
        self.backbone = build_backbone(backbone_config)
        self.neighbor_layers = config.resolved_neighbor_layers
        if self.neighbor_layers:
            self.neighbor_projections = nn.ModuleList(NeighborProjections(hidden) for _ in self.neighbor_layers)
            self.neighbor_transform = nn.Linear(hidden, hidden)  # f_e
            self.neighbor_layer_norm = nn.LayerNorm(hidden, eps=layer_norm_eps(backbone_config))  # LN_e
        self.lm_head = None
        if config.token_decoder != "input_embeddings":
            self.lm_head = MaskedLMHead(backbone_config)
        dropout = config.classifier_dropout
        self.dropout = nn.Dropout(hidden_dropout(backbone_config) if dropout is None else dropout)
        self.classifier_norm = nn.BatchNorm1d(hidden) if config.classifier_norm == "batch" else None
        self.classifier = nn.Linear(hidden, config.num_labels)
        self.post_init()
        self._set_trainable()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, _TiedDecoder) and module.bias is not None:
            init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm1d):
            init.ones_(module.weight)
            init.zeros_(module.bias)
            init.zeros_(module.running_mean)
            init.ones_(module.running_var)
            init.zeros_(module.num_batches_tracked)

    def _set_trainable(self) -> None:
        """Freeze what the training mode keeps fixed; the MLM decoder (evaluation only) is always frozen. The head
        (classifier and its BatchNorm) is outside the backbone and trains in every mode."""
        mode = self.config.training_mode
        for name, param in self.backbone.named_parameters():
            param.requires_grad = mode == "full" or (mode == "bitfit" and name.endswith(".bias"))
        if self.lm_head is not None:
            self.lm_head.requires_grad_(False)

    def get_output_embeddings(self) -> "nn.Linear | None":
        """The MLM head's decoder where it keeps its own weight; None where [MASK] states are decoded through the
        input embeddings (`get_input_embeddings()`): a decoder tied to them reads their current matrix at each call
        and stores only its bias, and `token_decoder="input_embeddings"` uses the matrix alone."""
        return None if self.lm_head is None else self.lm_head.untied_decoder

    def set_output_embeddings(self, new_embeddings: nn.Linear) -> None:
        """Replace the MLM head's untied decoder; a ValueError where there is none (`get_output_embeddings`)."""
        if self.get_output_embeddings() is None:
            raise ValueError(
                "this model has no output embeddings of its own to set: its [MASK] states are decoded through the "
                "input embeddings (set those with `set_input_embeddings`)."
            )
        self.lm_head.replace_untied_decoder(new_embeddings)

    def resize_token_embeddings(
        self, new_num_tokens: "int | None" = None, pad_to_multiple_of: "int | None" = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """`PairzooPreTrainedModel.resize_token_embeddings` with the MLM head kept consistent: a decoder tied to the
        input embeddings reads the resized matrix, an untied one is resized with them (transformers' rule for output
        embeddings), and the head's vocabulary-sized biases keep their entries, new tokens getting zero
        (`MaskedLMHead.resize_vocabulary`). The resized parameters keep the head's `requires_grad` (frozen)."""
        old_size = word_embeddings(self.backbone).num_embeddings
        embeddings = super().resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if self.lm_head is not None:
            self.lm_head.resize_vocabulary(old_size, embeddings.num_embeddings)
        return embeddings

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs) -> "PairzooPreTrainedModel":
        """`PairzooPreTrainedModel.from_pretrained`, which also loads a save whose MLM head has pairzoo's earlier
        layout (`earlier_head_key_mapping`) into this head's names; saved again, the model writes these names."""
        mapping = {}
        if "key_mapping" not in kwargs and pretrained_model_name_or_path is not None:
            mapping = cls._earlier_head_keys(str(pretrained_model_name_or_path), kwargs)
        loaded = super().from_pretrained(
            pretrained_model_name_or_path, *model_args, **({"key_mapping": mapping} if mapping else {}), **kwargs
        )
        model = loaded[0] if isinstance(loaded, tuple) else loaded
        conversions = getattr(model, "_weight_conversions", None)
        if mapping and conversions:  # transformers would save in the loaded layout: keep the current one
            ours = set(mapping.values())
            model._weight_conversions = [c for c in conversions if c.target_patterns[0] not in ours]
        return loaded

    @classmethod
    def _earlier_head_keys(cls, path: str, kwargs: dict) -> "dict[str, str]":
        """`earlier_head_key_mapping` for the neighbor-attention save at `path` (the `config` in `kwargs` where given);
        empty for another checkpoint or a model without an MLM head."""
        config = kwargs.get("config")
        if not isinstance(config, cls.config_class):
            hub_kwargs = {key: kwargs[key] for key in _HUB_KWARGS if key in kwargs}
            try:
                saved = PreTrainedConfig.get_config_dict(path, **hub_kwargs)[0]
            except OSError:  # no config.json there: transformers' own error follows
                return {}
            if saved.get("model_type") != cls.config_class.model_type:
                return {}
            config = cls.config_class.from_dict(saved)
        if config.token_decoder == "input_embeddings":
            return {}
        return earlier_head_key_mapping(config.backbone_config)

    @classmethod
    def from_backbone(cls, name_or_path: str, **method_kwargs) -> "NeighborAttentionForSequenceClassification":
        """Build on a pretrained masked LM (`AutoModelForMaskedLM`): encoder weights, the MLM head when the checkpoint
        has one, and K_b/V_b initialised from each neighbor layer's pretrained key/value projections.

        With `token_decoder=None` the MLM head is used when the checkpoint holds its weights and the tied
        input-embedding matrix otherwise (logged); `token_decoder="mlm_head"` on a checkpoint without one is an
        error.
        """
        mlm, head_missing = masked_lm_from_pretrained(name_or_path)
        decoder = method_kwargs.get("token_decoder")
        if decoder == "mlm_head" and head_missing:
            raise ValueError(f"token_decoder='mlm_head' but {name_or_path!r} has no MLM-head weights.")
        if decoder is None:
            decoder = "input_embeddings" if head_missing else "mlm_head"
            if head_missing:
                logger.warning(
                    "%s has no MLM head: [MASK] states are decoded through the input embeddings.", name_or_path
                )
        config = cls.config_class(backbone_config=mlm.base_model.config, **{**method_kwargs, "token_decoder": decoder})
        model = cls(config)
        model.backbone.load_state_dict(mlm.base_model.state_dict(), strict=True)
        with torch.no_grad():
            if model.lm_head is not None:
                source = mlm.state_dict()
                model.lm_head.load_state_dict({key: source[key] for key in model.lm_head.state_dict()}, strict=True)
            for projections, index in zip(getattr(model, "neighbor_projections", []), model.neighbor_layers):
                for target, position in ((projections.key, 1), (projections.value, 2)):
                    weight, bias = _pretrained_projection(model.backbone, index, position)
                    target.weight.copy_(weight)
                    if bias is None:
                        target.bias.zero_()
                    else:
                        target.bias.copy_(bias)
        model.config.backbone_config.name_or_path = str(name_or_path)
        return model

    # ------------------------------------------------------------------ pieces

    def _word_embeddings_in_hidden_space(self) -> torch.Tensor:
        """W_e (V, d): the input-embedding matrix, mapped by the embedding projection where the embeddings are narrower
        than the hidden states (ELECTRA-small, ALBERT)."""
        weight = word_embeddings(self.backbone).weight
        projection = embedding_projection(self.backbone)
        return weight if projection is None else projection(weight)

    @torch.no_grad()
    def select_neighbors(self, hidden: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """Vocabulary ids (B, L, k) of each token's neighbours from its hidden state (B, L, d); batched matrix work.

        s = h W_e^T / sqrt(d) with the token's own id and the padding id excluded; top-K candidates; k of them by
        Gumbel-top-k (sampling without replacement proportional to exp(s)) in training, the top-k at evaluation.
        """
        config = self.config
        weight = self._word_embeddings_in_hidden_space()
        scores = (hidden / hidden.shape[-1] ** 0.5) @ weight.T
        scores.scatter_(-1, input_ids.unsqueeze(-1), float("-inf"))
        padding = word_embeddings(self.backbone).padding_idx
        if padding is not None:
            scores[..., padding] = float("-inf")
        candidate_scores, candidates = scores.topk(config.num_candidates, dim=-1)
        if not self.training:
            return candidates[..., : config.num_neighbors]
        uniform = torch.rand_like(candidate_scores).clamp_(1e-20, 1.0)
        picked = (candidate_scores - torch.log(-torch.log(uniform))).topk(config.num_neighbors, dim=-1).indices
        return candidates.gather(-1, picked)

    def initial_neighbor_states(
        self,
        hidden: torch.Tensor,
        input_ids: torch.Tensor,
        neighbor_ids: torch.Tensor,
        token_type_ids: "torch.Tensor | None" = None,
        attention_mask: "torch.Tensor | None" = None,
    ) -> torch.Tensor:
        """m_ij = LN_e(f_e(e_ij - e_i) + (e_ij - e_i) + h_i): (B, L, k, d).

        The embedding layer runs once on B (k + 1) rows, each at the input's own position ids: the input (e_i) and,
        for each j, every token's j-th neighbour in its place (e_ij).
        """
        batch, _, count = neighbor_ids.shape
        ids = torch.cat([input_ids.unsqueeze(1), neighbor_ids.transpose(1, 2)], dim=1).flatten(0, 1)

        def repeat(values: "torch.Tensor | None") -> "torch.Tensor | None":
            return None if values is None else values.unsqueeze(1).expand(-1, count + 1, -1).flatten(0, 1)

        positions = repeat(default_position_ids(self.backbone, input_ids))
        embedded = embedding_output(self.backbone, ids, repeat(token_type_ids), repeat(attention_mask), positions)
        embedded = embedded.unflatten(0, (batch, count + 1))
        delta = embedded[:, 1:].transpose(1, 2) - embedded[:, 0].unsqueeze(2)
        return self.neighbor_layer_norm(self.neighbor_transform(delta) + delta + hidden.unsqueeze(2))

    def _per_token_attention(self, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
        """MHA of each token's queries (B, L, q, d) over its own keys/values (B, L, n, d) -> (B, L, q, d), with the
        frozen layer's head split, 1/sqrt(head size) scaling and attention dropout; no projection applied here."""
        heads, size = head_shape(self.backbone.config)
        q = queries.unflatten(-1, (heads, size))
        k = keys.unflatten(-1, (heads, size))
        v = values.unflatten(-1, (heads, size))
        scores = torch.einsum("blqhd,blnhd->blhqn", q, k) * size**-0.5
        dropout = attention_dropout(self.backbone.config)
        probabilities = nn.functional.dropout(scores.softmax(-1), dropout, self.training)
        return torch.einsum("blhqn,blnhd->blqhd", probabilities, v).flatten(-2)

    def _neighbor_layer(
        self,
        index: int,
        hidden: torch.Tensor,
        stack: EncoderStack,
        neighbors: torch.Tensor,
        projections: NeighborProjections,
        untouched: "torch.Tensor | None",
        mask_positions: torch.Tensor,
        update: bool,
    ) -> "tuple[torch.Tensor, torch.Tensor | None]":
        """One encoder layer with neighbor attention, LN((1-alpha) h_s + alpha h_b + h) then the frozen FFN, and (with
        `update`) the neighbour update m <- LN(f(MHA(Q m, K_b z, V_b z)) + m), z_i = [sg(h_i), sg(h_[MASK]), m_i]
        (pre-LN layouts: the module docstring's analogue).

        The layer runs through its own module (`stack.run_with_context`); a forward pre-hook on its output projection
        replaces the attention context ctx_s by (1 - alpha) ctx_s + alpha ctx_b (ctx_s for untouched tokens). r_i and
        z_i share their rows, so K_b and V_b are applied once to sg(h) and to m and the results reused.
        """
        backbone, alpha = self.backbone, self.config.alpha
        frozen = attention_input(backbone, index, hidden.detach())
        read_neighbors = attention_input(backbone, index, neighbors)
        key_h, value_h = projections.key(frozen).unsqueeze(2), projections.value(frozen).unsqueeze(2)
        key_m, value_m = projections.key(read_neighbors), projections.value(read_neighbors)
        context_b = self._per_token_attention(
            project(backbone, index, "query", attention_input(backbone, index, hidden)).unsqueeze(2),
            torch.cat([key_h, key_m], dim=2),
            torch.cat([value_h, value_m], dim=2),
        ).squeeze(2)

        def mix(context_s: torch.Tensor, hidden: torch.Tensor, context_b: torch.Tensor) -> torch.Tensor:
            mixed = (1 - alpha) * context_s + alpha * context_b
            if untouched is not None:
                mixed = torch.where(untouched.unsqueeze(-1), context_s, mixed)
            return mixed

        new_hidden = stack.run_with_context(index, hidden, mix, context_b)
        if not update:
            return new_hidden, None
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        key_c = key_h[rows, mask_positions].unsqueeze(1).expand(-1, hidden.shape[1], -1, -1)
        value_c = value_h[rows, mask_positions].unsqueeze(1).expand(-1, hidden.shape[1], -1, -1)
        updated = self._per_token_attention(
            project(backbone, index, "query", read_neighbors),
            torch.cat([key_h, key_c, key_m], dim=2),
            torch.cat([value_h, value_c, value_m], dim=2),
        )
        dense = output_projection(backbone, index)
        updated = nn.functional.dropout(dense(updated), hidden_dropout(backbone.config), self.training) + neighbors
        norm = attention_output_norm(backbone, index)
        return new_hidden, updated if norm is None else norm(updated)

    def decode_mask_logits(self, mask_hidden_state: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits (B, V) of [MASK] states (B, d): the MLM head, or h W_e^T without one."""
        if self.lm_head is not None:
            return self.lm_head(mask_hidden_state, self.backbone)
        return mask_hidden_state @ self._word_embeddings_in_hidden_space().T

    # ------------------------------------------------------------------ forward

    @can_return_tuple
    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        mask_positions: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        labels: "torch.LongTensor | None" = None,
        output_hidden_states: "bool | None" = None,
        output_internals: bool = False,
    ) -> NeighborAttentionOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): right-padded prompt input from
                `encode_neighbor_attention_inputs`.
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            mask_positions (`torch.LongTensor` of shape `(batch_size,)`): position of the label [MASK] per example,
                in [0, sequence_length) (checked where inputs enter: collators, pipelines, `PAIRZOO_CHECK_INPUTS=1`).
            labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*): class indices.
            output_hidden_states (`bool`, *optional*): also return the hidden states after the embeddings and after
                every layer.
            output_internals (`bool`, *optional*, defaults to `False`): also return the method's internals: the
                [MASK] and all last hidden states, the neighbour ids and the regulariser values.
        """
        if input_ids is None:
            raise ValueError("`input_ids` are required.")
        if mask_positions is None:
            raise ValueError(
                "`mask_positions` (the label [MASK] position per example) is required; "
                "build inputs with `encode_neighbor_attention_inputs`."
            )
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        mask_positions = mask_positions.view(-1).long()
        config = self.config
        rows = torch.arange(input_ids.shape[0], device=input_ids.device)
        stack = EncoderStack(self.backbone, attention_mask)
        valid = attention_mask.bool()
        context = valid.clone()
        context[rows, mask_positions] = False
        hidden, neighbors, neighbor_ids = stack.embed(input_ids, token_type_ids), None, None
        all_hidden = [hidden] if self.output_flags(output_hidden_states)[0] else None
        reg_m, reg_n = [], []
        untouched = None
        if self.training and self.neighbor_layers and config.untouched_fraction > 0:
            untouched = torch.rand(valid.shape, device=input_ids.device) < config.untouched_fraction
        for index in range(len(stack)):
            if index not in self.neighbor_layers:
                hidden = stack.run(index, hidden)
                if all_hidden is not None:
                    all_hidden.append(hidden)
                continue
            slot = self.neighbor_layers.index(index)
            projections = self.neighbor_projections[slot]
            if neighbors is None:
                neighbor_ids = self.select_neighbors(hidden, input_ids)
                neighbors = self.initial_neighbor_states(
                    hidden, input_ids, neighbor_ids, token_type_ids, attention_mask
                )
            update = slot < len(self.neighbor_layers) - 1
            new_hidden, new_neighbors = self._neighbor_layer(
                index, hidden, stack, neighbors, projections, untouched, mask_positions, update
            )
            mask_source = hidden if config.mask_regularizer_state == "layer_input" else new_hidden
            reg_m.append(self._mask_regularizer(mask_source[rows, mask_positions], neighbors, context))
            reg_n.append(self._neighbor_regularizer(hidden, neighbors, context))
            hidden, neighbors = new_hidden, new_neighbors
            if all_hidden is not None:
                all_hidden.append(hidden)
        hidden = stack.finish(hidden)
        if all_hidden is not None:
            all_hidden[-1] = hidden  # the last entry is the last hidden state, as in transformers' encoders
        mask_state = hidden[rows, mask_positions]
        norm = self.classifier_norm
        if norm is None:
            head_input = mask_state
        elif norm.training and len(mask_state) == 1:
            # a one-example training batch has no per-feature variance: it is normalised with the running statistics
            head_input = nn.functional.batch_norm(
                mask_state, norm.running_mean, norm.running_var, norm.weight, norm.bias, training=False, eps=norm.eps
            )
        else:
            head_input = norm(mask_state)
        logits = self.classifier(self.dropout(head_input))
        regularizer_m = torch.stack(reg_m).mean() if reg_m else None
        regularizer_n = torch.stack(reg_n).mean() if reg_n else None
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits, labels.long().view(-1))
            if regularizer_m is not None and config.lambda_m > 0:
                loss = loss - config.lambda_m * regularizer_m
            if regularizer_n is not None and config.lambda_n > 0:
                loss = loss - config.lambda_n * regularizer_n
        hidden_states = None if all_hidden is None else tuple(all_hidden)
        if not output_internals:
            return NeighborAttentionOutput(loss=loss, logits=logits, hidden_states=hidden_states)
        return NeighborAttentionOutput(
            loss=loss,
            logits=logits,
            hidden_states=hidden_states,
            mask_hidden_state=mask_state,
            last_hidden_state=hidden,
            neighbor_ids=neighbor_ids,
            regularizer_m=regularizer_m,
            regularizer_n=regularizer_n,
        )

    def _mask_regularizer(self, mask_state: torch.Tensor, neighbors: torch.Tensor, context: torch.Tensor):
        """L_m: mean cos(h_[MASK], sg(m_ij)) over context tokens, one neighbour j each (random in training)."""
        batch, length, count, _ = neighbors.shape
        if self.training:
            pick = torch.randint(count, (batch, length), device=neighbors.device)
        else:
            pick = torch.zeros(batch, length, dtype=torch.long, device=neighbors.device)
        sampled = neighbors.gather(2, pick[:, :, None, None].expand(-1, -1, 1, neighbors.shape[-1])).squeeze(2)
        cosine = nn.functional.cosine_similarity(mask_state.unsqueeze(1), sampled.detach(), dim=-1)
        return (cosine * context).sum() / context.sum().clamp_min(1)

    @staticmethod
    def _neighbor_regularizer(hidden: torch.Tensor, neighbors: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """L_n: mean cos(sg(h_i), m_ij) over context tokens and all their neighbours."""
        cosine = nn.functional.cosine_similarity(hidden.detach().unsqueeze(2), neighbors, dim=-1).mean(-1)
        return (cosine * context).sum() / context.sum().clamp_min(1)


__all__ = [
    "MaskedLMHead",
    "NeighborAttentionForSequenceClassification",
    "NeighborAttentionOutput",
    "encode_neighbor_attention_inputs",
    "resolve_label_words",
]

"""Neighbor attention on a frozen masked-language-model encoder (Bai, Shang, Sun, Balasubramanian 2022: "Learning for
Expressive Task-Related Sentence Representations"). No public code exists; this file is the reference implementation.

Task formulation (paper eq. 1, 4). `encode_neighbor_attention_inputs` writes
`[CLS] [MASK]' Y1 or Y2 or ... or Yp of [MASK] [SEP] [MASK]' x1 [SEP] [MASK]' x2 [SEP]` with the tokenizer's own
cls/sep/mask tokens ([MASK]' is the mask token too; `connecting_tokens=False` drops it). A linear head on the last
hidden state of the label [MASK] (its position is the `mask_positions` input) predicts the class; cross-entropy.
With `classifier_norm="batch"` (not in the paper) a BatchNorm1d standardises that state per feature first.

Neighbor attention (paper section 4), with h the hidden states entering a neighbor layer, W_e the input-embedding
matrix, d the hidden size:

- selection, once, at the first neighbor layer, batched: s_i = h_i W_e^T / sqrt(d) (B, L, V); the token's own id
  and the padding id are excluded (other special tokens stay candidates); candidates = top-K of s_i; neighbours = k
  of them, drawn without replacement with probability proportional to exp(s_i) (Gumbel-top-k) in training, the top-k
  at evaluation. No Python loop over tokens.
- e_ij = LN_emb(W_e[j] + P[pos_i] + T[type_i]), the frozen embedding layer applied to the neighbour's id at token
  i's position (the "neighbour embedding plus the i-th position embedding"); e_i the same for the token's own id (the
  encoder's embedding output without dropout).
- m_ij = LN_e(f_e(e_ij - e_i) + (e_ij - e_i) + h_i), f_e a d x d linear map, LN_e a LayerNorm.
- in each neighbor layer l: h_s = f(MHA(Q h_i, K h, V h)) is the frozen self-attention (f = the frozen output dense
  and dropout); h_b,i = f(MHA(Q h_i, K_b r_i, V_b r_i)) with r_i = [sg(h_i), m_i1, ..., m_ik] (per-token attention
  over k + 1 keys, the frozen query Q and head split); h' = LN((1 - alpha) h_s + alpha h_b + h) with the layer's
  frozen attention LayerNorm, then the layer's frozen feed-forward block as usual. With alpha = 0 the layer is the
  frozen layer exactly.
- neighbour update after each neighbor layer but the last: m'_ij = f(MHA(Q m_ij, K_b z_i, V_b z_i)) with
  z_i = [sg(h_i), sg(h_[MASK]), m_i1..m_ik], m <- LN(m' + m) with the same frozen attention LayerNorm (no FFN).
- each neighbor layer has its own K_b, V_b (d x d, initialised from that layer's pretrained key/value projections
  by `from_backbone`); f_e and LN_e are shared (they build m once). Only K_b, V_b, f_e, LN_e and the classifier (with
  its BatchNorm under `classifier_norm="batch"`) train.
- untouched tokens (Appendix D): in training each token independently keeps h_b = h_s with probability
  `untouched_fraction`, drawn once per forward pass: an untouched token skips every neighbor layer.

Regularisers (paper section 5), averaged over neighbor layers and non-padding tokens other than the label [MASK]:
L_m = cos(h^(l)_[MASK], sg(m_ij)) for one neighbour j per token (random in training, the first at evaluation), with
h^(l) the neighbor layer's input (`mask_regularizer_state="layer_output"` uses the state after the layer instead), and
L_n = cos(sg(h_i), m_ij) over all neighbours; the loss is CE - lambda_m L_m - lambda_n L_n (both weights 1 by
default, as in the paper's objective).

Baselines (`training_mode`): `full` fine-tunes the whole encoder on the same [MASK] formulation; `bitfit` trains only
the encoder's bias terms. Neither has neighbor attention.

Decoding for expressiveness: `decode_mask_logits` maps the [MASK] state to vocabulary logits through the backbone's
MLM head (transform + tied input embeddings + bias) when the model has one, or through the tied input-embedding
matrix alone (`token_decoder="input_embeddings"`, the bundled MiniLM, which is saved without an MLM head).
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModelForMaskedLM
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.masking_utils import create_bidirectional_mask
from transformers.utils import ModelOutput, logging

from ..configuration.configuration_neighbor_attention import NeighborAttentionConfig
from .common import PairzooPreTrainedModel, build_backbone

logger = logging.get_logger(__name__)


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
        mask_hidden_state (`torch.FloatTensor` of shape `(batch_size, hidden_size)`, *optional*): last hidden state of
            the label [MASK] (with `output_details=True`).
        hidden_states (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`, *optional*): last
            hidden states of all tokens (with `output_details=True`).
        neighbor_ids (`torch.LongTensor` of shape `(batch_size, sequence_length, num_neighbors)`, *optional*): the
            vocabulary ids of each token's neighbours (with `output_details=True`, `"neighbor"` mode).
        regularizer_m (`torch.FloatTensor` of shape `()`, *optional*): L_m (with `output_details=True`).
        regularizer_n (`torch.FloatTensor` of shape `()`, *optional*): L_n (with `output_details=True`).
    """

    loss: "torch.FloatTensor | None" = None
    logits: "torch.FloatTensor | None" = None
    mask_hidden_state: "torch.FloatTensor | None" = None
    hidden_states: "torch.FloatTensor | None" = None
    neighbor_ids: "torch.LongTensor | None" = None
    regularizer_m: "torch.FloatTensor | None" = None
    regularizer_n: "torch.FloatTensor | None" = None


class MaskedLMDecoder(nn.Module):
    """The BERT/RoBERTa MLM head with the decoder tied to the input embeddings: LN(act(dense h)) W_e^T + b."""

    def __init__(self, hidden_size: int, vocab_size: int, activation: str, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.activation = ACT2FN[activation]
        self.layer_norm = nn.LayerNorm(hidden_size, eps=eps)
        self.bias = nn.Parameter(torch.zeros(vocab_size))

    def forward(self, hidden: torch.Tensor, word_embeddings: torch.Tensor) -> torch.Tensor:
        """(..., d) -> (..., V)."""
        return self.layer_norm(self.activation(self.dense(hidden))) @ word_embeddings.T + self.bias


class NeighborProjections(nn.Module):
    """The trainable key and value maps K_b, V_b of one neighbor layer."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.key = nn.Linear(hidden_size, hidden_size)
        self.value = nn.Linear(hidden_size, hidden_size)


def _mlm_head_parts(mlm: nn.Module) -> "tuple[nn.Linear, nn.LayerNorm, torch.Tensor, str]":
    """Transform dense, LayerNorm, output bias and activation of a BERT or RoBERTa masked-LM model."""
    if hasattr(mlm, "cls") and hasattr(mlm.cls, "predictions"):
        head = mlm.cls.predictions
        return head.transform.dense, head.transform.LayerNorm, head.bias, mlm.config.hidden_act
    if hasattr(mlm, "lm_head") and hasattr(mlm.lm_head, "layer_norm"):
        return mlm.lm_head.dense, mlm.lm_head.layer_norm, mlm.lm_head.bias, "gelu"
    raise ValueError(f"token_decoder='mlm_head' supports BERT and RoBERTa MLM heads, not {type(mlm).__name__}.")


class NeighborAttentionForSequenceClassification(PairzooPreTrainedModel):
    """Frozen MLM encoder + neighbor attention in its upper layers; a linear head on the label [MASK] state (after a
    BatchNorm1d with `classifier_norm="batch"`)."""

    config_class = NeighborAttentionConfig
    input_format = "prompt"

    def __init__(self, config: NeighborAttentionConfig) -> None:
        super().__init__(config)
        backbone_config = config.backbone_config
        hidden = backbone_config.hidden_size
        self.backbone = build_backbone(backbone_config)
        self.neighbor_layers = config.resolved_neighbor_layers
        if self.neighbor_layers:
            self.neighbor_projections = nn.ModuleList(NeighborProjections(hidden) for _ in self.neighbor_layers)
            self.neighbor_transform = nn.Linear(hidden, hidden)  # f_e
            self.neighbor_layer_norm = nn.LayerNorm(hidden, eps=backbone_config.layer_norm_eps)  # LN_e
        self.lm_head = None
        if config.token_decoder != "input_embeddings":
            activation = "gelu" if backbone_config.model_type == "roberta" else backbone_config.hidden_act
            self.lm_head = MaskedLMDecoder(
                hidden, backbone_config.vocab_size, activation, backbone_config.layer_norm_eps
            )
        dropout = config.classifier_dropout
        self.dropout = nn.Dropout(backbone_config.hidden_dropout_prob if dropout is None else dropout)
        self.classifier_norm = nn.BatchNorm1d(hidden) if config.classifier_norm == "batch" else None
        self.classifier = nn.Linear(hidden, config.num_labels)
        self.post_init()
        self._set_trainable()

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, MaskedLMDecoder):
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

    @classmethod
    def from_backbone(cls, name_or_path: str, **method_kwargs) -> "NeighborAttentionForSequenceClassification":
        """Build on a pretrained masked LM: encoder weights, the MLM head when the checkpoint has one, and K_b/V_b
        initialised from each neighbor layer's pretrained key/value projections.

        With `token_decoder=None` the MLM head is used when the checkpoint holds its weights and the tied
        input-embedding matrix otherwise (logged); `token_decoder="mlm_head"` on a checkpoint without one is an
        error.
        """
        mlm, info = AutoModelForMaskedLM.from_pretrained(name_or_path, output_loading_info=True)
        head_missing = any(k.startswith(("cls.", "lm_head.")) for k in info["missing_keys"])
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
                dense, norm, bias, _ = _mlm_head_parts(mlm)
                model.lm_head.dense.load_state_dict(dense.state_dict())
                model.lm_head.layer_norm.load_state_dict(norm.state_dict())
                model.lm_head.bias.copy_(bias)
            for projections, index in zip(getattr(model, "neighbor_projections", []), model.neighbor_layers):
                attention = model.backbone.encoder.layer[index].attention.self
                projections.key.load_state_dict(attention.key.state_dict())
                projections.value.load_state_dict(attention.value.state_dict())
        model.config.backbone_config.name_or_path = str(name_or_path)
        return model

    # ------------------------------------------------------------------ pieces

    def _position_and_type(self, input_ids: torch.Tensor, token_type_ids: "torch.Tensor | None") -> torch.Tensor:
        """P[pos_i] + T[type_i] (B, L, d), as the frozen embedding layer adds them (RoBERTa offsets included)."""
        embeddings = self.backbone.embeddings
        create = getattr(type(embeddings), "create_position_ids_from_input_ids", None)
        if create is not None:
            position_ids = create(input_ids, embeddings.padding_idx)
        else:
            position_ids = torch.arange(input_ids.shape[1], device=input_ids.device)[None].expand_as(input_ids)
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        return embeddings.position_embeddings(position_ids) + embeddings.token_type_embeddings(token_type_ids)

    @torch.no_grad()
    def select_neighbors(self, hidden: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
        """Vocabulary ids (B, L, k) of each token's neighbours from its hidden state (B, L, d); batched matrix work.

        s = h W_e^T / sqrt(d) with the token's own id and the padding id excluded; top-K candidates; k of them by
        Gumbel-top-k (sampling without replacement proportional to exp(s)) in training, the top-k at evaluation.
        """
        config = self.config
        weight = self.backbone.embeddings.word_embeddings.weight
        scores = (hidden / hidden.shape[-1] ** 0.5) @ weight.T
        scores.scatter_(-1, input_ids.unsqueeze(-1), float("-inf"))
        padding = self.backbone.embeddings.word_embeddings.padding_idx
        if padding is not None:
            scores[..., padding] = float("-inf")
        candidate_scores, candidates = scores.topk(config.num_candidates, dim=-1)
        if not self.training:
            return candidates[..., : config.num_neighbors]
        uniform = torch.rand_like(candidate_scores).clamp_(1e-20, 1.0)
        picked = (candidate_scores - torch.log(-torch.log(uniform))).topk(config.num_neighbors, dim=-1).indices
        return candidates.gather(-1, picked)

    def initial_neighbor_states(
        self, hidden: torch.Tensor, input_ids: torch.Tensor, neighbor_ids: torch.Tensor, token_type_ids=None
    ) -> torch.Tensor:
        """m_ij = LN_e(f_e(e_ij - e_i) + (e_ij - e_i) + h_i): (B, L, k, d)."""
        embeddings = self.backbone.embeddings
        extra = self._position_and_type(input_ids, token_type_ids)
        own = embeddings.LayerNorm(embeddings.word_embeddings(input_ids) + extra)
        neighbors = embeddings.LayerNorm(embeddings.word_embeddings(neighbor_ids) + extra.unsqueeze(2))
        delta = neighbors - own.unsqueeze(2)
        return self.neighbor_layer_norm(self.neighbor_transform(delta) + delta + hidden.unsqueeze(2))

    @staticmethod
    def _per_token_attention(
        attention: nn.Module, queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor
    ) -> torch.Tensor:
        """MHA of each token's queries (B, L, q, d) over its own keys/values (B, L, n, d) -> (B, L, q, d), with the
        frozen layer's head split, scaling and attention dropout; no projection applied here."""
        heads, size = attention.num_attention_heads, attention.attention_head_size
        q = queries.unflatten(-1, (heads, size))
        k = keys.unflatten(-1, (heads, size))
        v = values.unflatten(-1, (heads, size))
        scores = torch.einsum("blqhd,blnhd->blhqn", q, k) * attention.scaling
        probabilities = attention.dropout(scores.softmax(-1))
        return torch.einsum("blhqn,blnhd->blqhd", probabilities, v).flatten(-2)

    def _neighbor_layer(
        self,
        index: int,
        hidden: torch.Tensor,
        mask: "torch.Tensor | None",
        neighbors: torch.Tensor,
        projections: NeighborProjections,
        untouched: "torch.Tensor | None",
        mask_positions: torch.Tensor,
        update: bool,
    ) -> "tuple[torch.Tensor, torch.Tensor | None]":
        """One encoder layer with neighbor attention, LN((1-alpha) h_s + alpha h_b + h) then the frozen FFN, and (with
        `update`) the neighbour update m <- LN(f(MHA(Q m, K_b z, V_b z)) + m), z_i = [sg(h_i), sg(h_[MASK]), m_i].

        r_i and z_i share their rows, so K_b and V_b are applied once to sg(h) and to m and the results reused.
        """
        layer = self.backbone.encoder.layer[index]
        attention, output = layer.attention.self, layer.attention.output
        alpha = self.config.alpha
        context, _ = attention(hidden, attention_mask=mask)
        h_s = output.dropout(output.dense(context))
        frozen = hidden.detach()
        key_h, value_h = projections.key(frozen).unsqueeze(2), projections.value(frozen).unsqueeze(2)
        key_m, value_m = projections.key(neighbors), projections.value(neighbors)
        h_b = self._per_token_attention(
            attention,
            attention.query(hidden).unsqueeze(2),
            torch.cat([key_h, key_m], dim=2),
            torch.cat([value_h, value_m], dim=2),
        ).squeeze(2)
        h_b = output.dropout(output.dense(h_b))
        if untouched is not None:
            h_b = torch.where(untouched.unsqueeze(-1), h_s, h_b)
        new_hidden = layer.feed_forward_chunk(output.LayerNorm((1 - alpha) * h_s + alpha * h_b + hidden))
        if not update:
            return new_hidden, None
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        key_c = key_h[rows, mask_positions].unsqueeze(1).expand(-1, hidden.shape[1], -1, -1)
        value_c = value_h[rows, mask_positions].unsqueeze(1).expand(-1, hidden.shape[1], -1, -1)
        updated = self._per_token_attention(
            attention,
            attention.query(neighbors),
            torch.cat([key_h, key_c, key_m], dim=2),
            torch.cat([value_h, value_c, value_m], dim=2),
        )
        return new_hidden, output.LayerNorm(output.dropout(output.dense(updated)) + neighbors)

    def decode_mask_logits(self, mask_hidden_state: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits (B, V) of [MASK] states (B, d): the MLM head, or h W_e^T without one."""
        weight = self.backbone.embeddings.word_embeddings.weight
        if self.lm_head is not None:
            return self.lm_head(mask_hidden_state, weight)
        return mask_hidden_state @ weight.T

    # ------------------------------------------------------------------ forward

    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        mask_positions: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        labels: "torch.LongTensor | None" = None,
        output_details: bool = False,
        **kwargs,
    ) -> NeighborAttentionOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): right-padded prompt input from
                `encode_neighbor_attention_inputs`.
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            mask_positions (`torch.LongTensor` of shape `(batch_size,)`): position of the label [MASK] per example.
            labels (`torch.LongTensor` of shape `(batch_size,)`, *optional*): class indices.
            output_details (`bool`, *optional*, defaults to `False`): also return the [MASK] and all last hidden
                states, the neighbour ids and the regulariser values.
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
        length = input_ids.shape[1]
        if bool(((mask_positions < 0) | (mask_positions >= length)).any()):
            raise ValueError(f"`mask_positions` must lie in [0, {length}), got {mask_positions.tolist()}.")
        config = self.config
        rows = torch.arange(input_ids.shape[0], device=input_ids.device)
        embedding_output = self.backbone.embeddings(input_ids=input_ids, token_type_ids=token_type_ids)
        mask = create_bidirectional_mask(
            config=self.backbone.config, inputs_embeds=embedding_output, attention_mask=attention_mask
        )
        valid = attention_mask.bool()
        context = valid.clone()
        context[rows, mask_positions] = False
        hidden, neighbors, neighbor_ids = embedding_output, None, None
        reg_m, reg_n = [], []
        untouched = None
        if self.training and self.neighbor_layers and config.untouched_fraction > 0:
            untouched = torch.rand(valid.shape, device=input_ids.device) < config.untouched_fraction
        for index, layer in enumerate(self.backbone.encoder.layer):
            if index not in self.neighbor_layers:
                hidden = layer(hidden, attention_mask=mask)
                continue
            slot = self.neighbor_layers.index(index)
            projections = self.neighbor_projections[slot]
            if neighbors is None:
                neighbor_ids = self.select_neighbors(hidden, input_ids)
                neighbors = self.initial_neighbor_states(hidden, input_ids, neighbor_ids, token_type_ids)
            update = slot < len(self.neighbor_layers) - 1
            new_hidden, new_neighbors = self._neighbor_layer(
                index, hidden, mask, neighbors, projections, untouched, mask_positions, update
            )
            mask_source = hidden if config.mask_regularizer_state == "layer_input" else new_hidden
            reg_m.append(self._mask_regularizer(mask_source[rows, mask_positions], neighbors, context))
            reg_n.append(self._neighbor_regularizer(hidden, neighbors, context))
            hidden, neighbors = new_hidden, new_neighbors
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
        if not output_details:
            return NeighborAttentionOutput(loss=loss, logits=logits)
        return NeighborAttentionOutput(
            loss=loss,
            logits=logits,
            mask_hidden_state=mask_state,
            hidden_states=hidden,
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
    "MaskedLMDecoder",
    "NeighborAttentionForSequenceClassification",
    "NeighborAttentionOutput",
    "encode_neighbor_attention_inputs",
    "resolve_label_words",
]

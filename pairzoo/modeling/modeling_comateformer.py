"""Comateformer (Li, Liang, Zhang: "Comateformer: Combined Attention Transformer for Semantic Sentence Matching").

In the combined layers of a pretrained BERT/RoBERTa encoder the first ceil(f * H) heads replace softmax attention by
the combined quasi-attention M = tanh(E) * 2 sigmoid(N) (E: scaled dot-product affinity, N: negative scaled L1
distance of queries and keys), output M V; the other heads keep softmax attention. The self-attention module of a
combined layer is a subclass of the backbone's own class with the same parameter names, so pretrained weights load
unchanged, and with no combined head the model is the backbone exactly. No public code exists for the paper; the
equations follow its sections 3.2-3.5 and the choices it leaves open are listed in `ComateformerConfig`. The pair
classifier reads the first token through Linear(d, d) + tanh, started from the checkpoint's trained pooler when it has
one (as `BertForSequenceClassification` fine-tuning starts), then a new output projection.
"""

from dataclasses import dataclass

import torch
from torch import nn
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.bert.modeling_bert import eager_attention_forward as bert_eager_attention_forward
from transformers.models.roberta.modeling_roberta import RobertaSelfAttention
from transformers.utils import ModelOutput

from ..configuration.configuration_comateformer import ComateformerConfig
from .common import PairzooPreTrainedModel, build_backbone

# Largest number of (batch, head, query, key) entries of one chunk of combined heads (2**23 floats = 32 MiB per map).
_CHUNK_ELEMENTS = 2**23
_AFFINITY_FUNCTIONS = {"tanh": torch.tanh, "sigmoid": torch.sigmoid}
_DIFFERENCE_FUNCTIONS = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "arctan": torch.atan}


def num_combined_heads(fraction: float, num_heads: int) -> int:
    """Combined heads of a layer: ceil(fraction * num_heads); they are the FIRST heads of the layer.

    A 1e-9 tolerance absorbs float noise (0.3 * 10 = 3.0000000000000004 gives 3 heads, not 4).
    """
    scaled = fraction * num_heads - 1e-9
    return max(0, int(-(-scaled // 1)))


def combined_heads_per_layer(config: ComateformerConfig) -> dict[int, int]:
    """`{layer index: number of combined heads}` of every layer with at least one combined head, by layer index."""
    num_heads = config.backbone_config.num_attention_heads
    heads = {
        layer: num_combined_heads(fraction, num_heads)
        for layer, fraction in zip(config.combined_layers, config.combined_head_fraction)
    }
    return {layer: h for layer, h in sorted(heads.items()) if h > 0}


def key_keep_mask(attention_mask: "torch.Tensor | None") -> "torch.Tensor | None":
    """The backbone's 4-D attention mask as a boolean `keep` mask (True = attend), or None when nothing is masked.

    Under `sdpa` the mask is boolean (True = attend) or None when there is no padding; under `eager` it is additive
    (0 = attend, the dtype's minimum = masked). Entries above half the dtype's minimum count as kept.
    """
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 4:
        raise ValueError(
            "Comateformer's combined heads need a 4-D attention mask (eager or sdpa attention); got "
            f"{type(attention_mask).__name__} {getattr(attention_mask, 'shape', '')}."
        )
    if attention_mask.dtype == torch.bool:
        return attention_mask
    return attention_mask > torch.finfo(attention_mask.dtype).min / 2


def _center(scores: torch.Tensor, keep: "torch.Tensor | None") -> torch.Tensor:
    """Subtract the per-query-row mean over kept keys."""
    if keep is None:
        return scores - scores.mean(-1, keepdim=True)
    weight = keep.to(scores.dtype)
    mean = (scores * weight).sum(-1, keepdim=True) / weight.sum(-1, keepdim=True).clamp_min(1.0)
    return scores - mean


def combined_attention_maps(
    query: torch.Tensor,
    key: torch.Tensor,
    keep: "torch.Tensor | None",
    config: ComateformerConfig,
) -> "tuple[torch.Tensor, torch.Tensor, torch.Tensor]":
    """Affinity E, difference N and combined attention M of queries/keys `(B, h, L, d)`; each `(B, h, Lq, Lk)`.

    E = alpha q.k / sqrt(d), N = -beta ||q - k||_1 / sqrt(d) (pairwise L1 by `torch.cdist`, never a (B, h, L, L, d)
    tensor), M = affinity_fn(E') * gate(N), zeroed on keys where `keep` (broadcastable boolean, True = attend) is
    False. E and N are returned as defined, before centring and masking.
    """
    scaling = query.shape[-1] ** -0.5
    affinity = torch.matmul(query, key.transpose(-1, -2)) * (config.alpha * scaling)
    difference = torch.cdist(query, key, p=1) * (-config.beta * scaling)
    centred_affinity = _center(affinity, keep) if config.center_affinity else affinity
    centred_difference = (
        _center(difference, keep) if config.center_difference or config.gate == "center" else difference
    )
    gate = _DIFFERENCE_FUNCTIONS[config.difference_fn](centred_difference)
    if config.gate == "double_sigmoid":
        gate = 2.0 * gate
    combined = _AFFINITY_FUNCTIONS[config.affinity_fn](centred_affinity) * gate
    if keep is not None:
        combined = combined.masked_fill(~keep, 0.0)
    return affinity, difference, combined


class ComateformerSelfAttentionMixin:
    """Forward of a combined self-attention layer; mixed into the backbone's own self-attention class.

    Heads `[0, num_combined_heads)` use the combined attention, computed in chunks of heads so that inference holds
    at most about 2**23 entries per map at once (one head at least); the others use the backbone's configured
    attention function (eager, sdpa, ...) on that head subset. Returns `(attn_output (B, L, H*d) before the output
    projection, weights)`
    like the parent; `weights` is `(B, H, L, L)` with M in the combined heads' slots when the attention function
    returns probabilities (eager), else None. Passing a dict as `comateformer_maps` records `(E, N, M)` under the
    layer index.
    """

    def setup_combined(self, num_combined: int, comateformer_config: ComateformerConfig) -> None:
        """Store the number of combined heads and the combined-attention settings (called once after creation)."""
        self.num_combined_heads = num_combined
        self.comateformer_config = comateformer_config

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: "torch.Tensor | None" = None,
        past_key_values=None,
        **kwargs,
    ) -> "tuple[torch.Tensor, torch.Tensor | None]":
        if past_key_values is not None:
            raise ValueError("Comateformer's combined attention is encoder-only and takes no `past_key_values`.")
        maps = kwargs.pop("comateformer_maps", None)
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.attention_head_size)
        query = self.query(hidden_states).view(*hidden_shape).transpose(1, 2)
        key = self.key(hidden_states).view(*hidden_shape).transpose(1, 2)
        value = self.value(hidden_states).view(*hidden_shape).transpose(1, 2)
        h = self.num_combined_heads
        dropout = self.dropout.p if self.training else 0.0

        keep = key_keep_mask(attention_mask)
        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, bert_eager_attention_forward
        )
        softmax_output, softmax_weights = attention_interface(
            self,
            query[:, h:],
            key[:, h:],
            value[:, h:],
            attention_mask,
            dropout=dropout,
            scaling=self.scaling,
            **kwargs,
        )
        # Combined heads in chunks of at most _CHUNK_ELEMENTS map entries (one head at least): without autograd only
        # one chunk's (B, c, L, L) maps are alive at once; short inputs still run all heads in one batched call.
        keep_maps = maps is not None or softmax_weights is not None
        chunk = max(1, _CHUNK_ELEMENTS // (query.shape[0] * query.shape[2] * key.shape[2]))
        combined_outputs, head_maps = [], []
        for start in range(0, h, chunk):
            heads = slice(start, min(start + chunk, h))
            affinity, difference, combined = combined_attention_maps(
                query[:, heads], key[:, heads], keep, self.comateformer_config
            )
            combined_weights = nn.functional.dropout(combined, p=dropout, training=self.training)
            combined_outputs.append(torch.matmul(combined_weights, value[:, heads]))
            if keep_maps:
                head_maps.append((affinity, difference, combined))
        combined_output = torch.cat(combined_outputs, dim=1).transpose(1, 2)
        attn_output = torch.cat([combined_output, softmax_output], dim=2).reshape(*input_shape, -1).contiguous()
        weights = None
        if keep_maps:
            affinity, difference, combined = (torch.cat(per_head, dim=1) for per_head in zip(*head_maps))
            if softmax_weights is not None:
                weights = torch.cat([combined, softmax_weights], dim=1)
            if maps is not None:
                maps[self.layer_idx] = (affinity, difference, combined)
        return attn_output, weights


class ComateformerBertSelfAttention(ComateformerSelfAttentionMixin, BertSelfAttention):
    """`BertSelfAttention` (same parameters) with combined heads."""


class ComateformerRobertaSelfAttention(ComateformerSelfAttentionMixin, RobertaSelfAttention):
    """`RobertaSelfAttention` (same parameters) with combined heads."""


_COMBINED_ATTENTION_CLASSES = {"bert": ComateformerBertSelfAttention, "roberta": ComateformerRobertaSelfAttention}


@dataclass
class ComateformerModelOutput(ModelOutput):
    r"""
    Output of [`ComateformerModel`].

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`):
            Last layer of the encoder.
        hidden_states (`tuple(torch.FloatTensor)`, *optional*):
            Embeddings and every layer, each `(batch_size, sequence_length, hidden_size)`, when asked for.
        attentions (`tuple(torch.FloatTensor)`, *optional*):
            Per layer `(batch_size, num_heads, sequence_length, sequence_length)`, when asked for under an attention
            implementation that returns them (`eager`); combined heads hold M there.
        affinity (`tuple(torch.FloatTensor)`, *optional*, returned with `output_combined_attention=True`):
            E per layer with combined heads (in layer order), each `(batch_size, num_combined_heads_l, sequence_length,
            sequence_length)`.
        difference (`tuple(torch.FloatTensor)`, *optional*, returned with `output_combined_attention=True`):
            N per layer with combined heads, shaped like `affinity`.
        combined_attention (`tuple(torch.FloatTensor)`, *optional*, returned with `output_combined_attention=True`):
            M (zero on padding keys) per layer with combined heads, shaped like `affinity`.
    """

    last_hidden_state: "torch.FloatTensor | None" = None
    hidden_states: "tuple[torch.FloatTensor, ...] | None" = None
    attentions: "tuple[torch.FloatTensor, ...] | None" = None
    affinity: "tuple[torch.FloatTensor, ...] | None" = None
    difference: "tuple[torch.FloatTensor, ...] | None" = None
    combined_attention: "tuple[torch.FloatTensor, ...] | None" = None


@dataclass
class ComateformerSequenceClassifierOutput(ModelOutput):
    r"""
    Output of [`ComateformerForSequenceClassification`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `labels` is given):
            MSE on the label scale (regression) or cross-entropy (classification).
        logits (`torch.FloatTensor` of shape `(batch_size, num_labels)`):
            Regression: the prediction on the label scale (`num_labels == 1`). Classification: class scores.
        hidden_states, attentions, affinity, difference, combined_attention:
            As in [`ComateformerModelOutput`], when asked for.
    """

    loss: "torch.FloatTensor | None" = None
    logits: "torch.FloatTensor | None" = None
    hidden_states: "tuple[torch.FloatTensor, ...] | None" = None
    attentions: "tuple[torch.FloatTensor, ...] | None" = None
    affinity: "tuple[torch.FloatTensor, ...] | None" = None
    difference: "tuple[torch.FloatTensor, ...] | None" = None
    combined_attention: "tuple[torch.FloatTensor, ...] | None" = None


class ComateformerPreTrainedModel(PairzooPreTrainedModel):
    """Shared part of the Comateformer models: the backbone with combined self-attention in the combined layers."""

    config_class = ComateformerConfig
    input_format = "pair"
    accepts_loss_kwargs = False  # the loss is a batch mean; the Trainer must not pass `num_items_in_batch`

    def _build_encoder(self, config: ComateformerConfig) -> None:
        self.backbone = build_backbone(config.backbone_config)
        attention_class = _COMBINED_ATTENTION_CLASSES[config.backbone_config.model_type]
        for layer_idx, heads in combined_heads_per_layer(config).items():
            attention = self.backbone.encoder.layer[layer_idx].attention
            combined = attention_class(attention.self.config, is_causal=False, layer_idx=layer_idx)
            combined.load_state_dict(attention.self.state_dict())
            combined.setup_combined(heads, config)
            attention.self = combined

    def _encode(
        self,
        input_ids: "torch.LongTensor | None",
        attention_mask: "torch.LongTensor | None",
        token_type_ids: "torch.LongTensor | None",
        output_hidden_states: "bool | None",
        output_attentions: "bool | None",
        output_combined_attention: bool,
        **kwargs,
    ) -> ComateformerModelOutput:
        if output_combined_attention:
            kwargs["comateformer_maps"] = maps = {}
        outputs = self.backbone(
            input_ids=input_ids,
            attention_mask=attention_mask,
            token_type_ids=token_type_ids,
            output_hidden_states=output_hidden_states,
            output_attentions=output_attentions,
            **kwargs,
        )
        per_map = [None, None, None]
        if output_combined_attention:
            per_map = [tuple(maps[layer][k] for layer in sorted(maps)) for k in range(3)]
        return ComateformerModelOutput(
            last_hidden_state=outputs.last_hidden_state,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            affinity=per_map[0],
            difference=per_map[1],
            combined_attention=per_map[2],
        )


class ComateformerModel(ComateformerPreTrainedModel):
    """The Comateformer encoder: hidden states of a sentence pair (and, on request, E, N and M of combined heads)."""

    def __init__(self, config: ComateformerConfig) -> None:
        super().__init__(config)
        self._build_encoder(config)
        self.post_init()

    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        output_hidden_states: "bool | None" = None,
        output_attentions: "bool | None" = None,
        output_combined_attention: bool = False,
        **kwargs,
    ) -> ComateformerModelOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): the tokenizer's pair encoding
                of (sentence1, sentence2).
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            token_type_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*): segment ids.
            output_combined_attention (`bool`, defaults to `False`): also return E, N and M of every combined head.
        """
        return self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states,
            output_attentions,
            output_combined_attention,
            **kwargs,
        )


class ComateformerClassificationHead(nn.Module):
    """First-token head like RoBERTa's: dropout, Linear(d, d), tanh, dropout, Linear(d, num_labels)."""

    def __init__(self, config: ComateformerConfig) -> None:
        super().__init__()
        backbone = config.backbone_config
        dropout = config.classifier_dropout if config.classifier_dropout is not None else backbone.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(backbone.hidden_size, backbone.hidden_size)
        self.out_proj = nn.Linear(backbone.hidden_size, config.num_labels)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(B, L, d) -> (B, num_labels) from the first token."""
        features = torch.tanh(self.dense(self.dropout(hidden_states[:, 0])))
        return self.out_proj(self.dropout(features))


class ComateformerForSequenceClassification(ComateformerPreTrainedModel):
    """Comateformer with a first-token head: regression (`num_labels == 1`) or classification of a sentence pair."""

    def __init__(self, config: ComateformerConfig) -> None:
        super().__init__(config)
        self._build_encoder(config)
        self.classifier = ComateformerClassificationHead(config)
        self.post_init()

    @torch.no_grad()
    def init_head_from_pooler(self, dense: nn.Linear) -> None:
        """The head's Linear(d, d) + tanh is BERT's pooler: start it from the checkpoint's trained pooler, as
        `BertForSequenceClassification` does (the output projection stays freshly initialised)."""
        self.classifier.dense.load_state_dict(dense.state_dict())

    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        labels: "torch.Tensor | None" = None,
        output_hidden_states: "bool | None" = None,
        output_attentions: "bool | None" = None,
        output_combined_attention: bool = False,
        **kwargs,
    ) -> ComateformerSequenceClassifierOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): the tokenizer's pair encoding
                of (sentence1, sentence2).
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            token_type_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*): segment ids.
            labels (`torch.Tensor` of shape `(batch_size,)`, *optional*): scores on the label scale (regression) or
                class indices (classification).
            output_combined_attention (`bool`, defaults to `False`): also return E, N and M of every combined head.
        """
        encoded = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states,
            output_attentions,
            output_combined_attention,
            **kwargs,
        )
        logits = self.classifier(encoded.last_hidden_state)
        loss = None
        if labels is not None:
            if self.config.num_labels == 1:
                loss = nn.functional.mse_loss(logits.squeeze(-1), labels.to(logits.dtype).view(-1))
            else:
                loss = nn.functional.cross_entropy(logits, labels.long().view(-1))
        return ComateformerSequenceClassifierOutput(
            loss=loss,
            logits=logits,
            hidden_states=encoded.hidden_states,
            attentions=encoded.attentions,
            affinity=encoded.affinity,
            difference=encoded.difference,
            combined_attention=encoded.combined_attention,
        )


__all__ = [
    "ComateformerForSequenceClassification",
    "ComateformerModel",
    "ComateformerModelOutput",
    "ComateformerPreTrainedModel",
    "ComateformerSequenceClassifierOutput",
    "combined_attention_maps",
    "num_combined_heads",
]

"""Comateformer (Li, Liang, Zhang: "Comateformer: Combined Attention Transformer for Semantic Sentence Matching").

In the combined layers of a pretrained BERT/RoBERTa encoder the first ceil(f * H) heads replace softmax attention by
the combined quasi-attention M = tanh(E) * 2 sigmoid(N) (E: scaled dot-product affinity, N: negative scaled L1
distance of queries and keys), output M V; the other heads keep softmax attention. The self-attention module of a
combined layer is a subclass of the backbone's own class with the same parameter names, so pretrained weights load
unchanged, and with no combined head the model is the backbone exactly. No public code exists for the paper; the
equations follow its sections 3.2-3.5 and the choices it leaves open are listed in `ComateformerConfig`, with the
options that depart from it (`integration="mix"`, `key_normalization`, `gate_bias`). The pair classifier reads the
first token (or the token mean) through Linear(d, d) + tanh, started from the checkpoint's trained pooler when it has
one (as `BertForSequenceClassification` fine-tuning starts), then a new output projection; regression is trained on
labels scaled to [0, 1] with the cross-encoder's loss (`similarity_loss_and_scores`).

In training mode every combined layer records the mean gate and ||C|| / ||S|| (`training_stats`); `pairzoo.train`
adds them to the Trainer's logs (`TrainingStatsCallback`), so a collapse of the combined heads is seen.
"""

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from transformers import initialization as init
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import BertSelfAttention
from transformers.models.bert.modeling_bert import eager_attention_forward as bert_eager_attention_forward
from transformers.models.roberta.modeling_roberta import RobertaSelfAttention
from transformers.utils import ModelOutput

from ..configuration.configuration_comateformer import ComateformerConfig
from .common import PairzooPreTrainedModel, build_backbone, pool_hidden_states, similarity_loss_and_scores

# Largest number of (batch, head, query, key) entries of one chunk of combined heads (2**23 floats = 32 MiB per map).
_CHUNK_ELEMENTS = 2**23
# Added to a row's L1 mass by `key_normalization="l1"`, so an all-zero row stays zero instead of 0 / 0.
_L1_EPS = 1e-6
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


class CombinedAttentionMaps(NamedTuple):
    """The maps of combined heads, each `(B, h, Lq, Lk)`."""

    affinity: torch.Tensor
    difference: torch.Tensor
    gate: torch.Tensor
    combined: torch.Tensor


def _gate(difference: torch.Tensor, keep: "torch.Tensor | None", config: ComateformerConfig) -> torch.Tensor:
    """2 difference_fn(N' + gate_bias) (`gate="double_sigmoid"`) or difference_fn(N - mean N + gate_bias)."""
    centred = _center(difference, keep) if config.center_difference or config.gate == "center" else difference
    gate = _DIFFERENCE_FUNCTIONS[config.difference_fn](centred + config.gate_bias if config.gate_bias else centred)
    return 2.0 * gate if config.gate == "double_sigmoid" else gate


def combined_attention_maps(
    query: torch.Tensor,
    key: torch.Tensor,
    keep: "torch.Tensor | None",
    config: ComateformerConfig,
    return_all: bool = True,
) -> CombinedAttentionMaps:
    """Affinity E, difference N, gate and combined attention M of queries/keys `(B, h, L, d)`; each `(B, h, Lq, Lk)`.

    E = alpha q.k / sqrt(d), N = -beta ||q - k||_1 / sqrt(d) (pairwise L1 by `torch.cdist`, never a (B, h, L, L, d)
    tensor), gate = 2 difference_fn(N' + gate_bias) (or difference_fn(N - mean N + gate_bias) with `gate="center"`),
    M = affinity_fn(E') * gate, zeroed on keys where `keep` (broadcastable boolean, True = attend) is False, then
    normalised over keys by `config.key_normalization`. E and N are returned as defined, before centring and masking;
    the gate is not masked; M is the map the heads use. With `return_all=False` only M is returned (E, N and the gate
    are None), each map being released as soon as it is used, so inference holds fewer (B, h, L, L) maps at once.
    """
    scaling = query.shape[-1] ** -0.5
    difference = torch.cdist(query, key, p=1) * (-config.beta * scaling)
    gate = _gate(difference, keep, config)
    if not return_all:
        difference = None
    affinity = torch.matmul(query, key.transpose(-1, -2)) * (config.alpha * scaling)
    combined = _AFFINITY_FUNCTIONS[config.affinity_fn](_center(affinity, keep) if config.center_affinity else affinity)
    if not return_all:
        affinity = None
    combined = combined * gate
    if not return_all:
        gate = None
    if keep is not None:
        combined = combined.masked_fill(~keep, 0.0)
    if config.key_normalization == "count":
        combined = combined / (combined.shape[-1] if keep is None else keep.sum(-1, keepdim=True).clamp_min(1))
    elif config.key_normalization == "l1":
        combined = combined / (combined.abs().sum(-1, keepdim=True) + _L1_EPS)
    return CombinedAttentionMaps(affinity, difference, gate, combined)


class ComateformerSelfAttentionMixin:
    """Forward of a combined self-attention layer; mixed into the backbone's own self-attention class.

    Heads `[0, num_combined_heads)` use the combined attention, computed in chunks of heads so that inference holds
    at most about 2**23 entries per map at once (one head at least); the others use the backbone's configured
    attention function (eager, sdpa, ...) on that head subset (`integration="mix"`: on every head, the combined
    heads' softmax output S entering the mix S + g (C - S), g = `mix_scale` * the per-head `combined_mix`). Returns
    `(attn_output (B, L, H*d) before the output projection, weights)` like the parent; `weights` is `(B, H, L, L)`
    with M in the combined heads' slots when the attention function returns probabilities (eager), else None.
    Passing a dict as `comateformer_maps` records `(E, N, M)` under the layer index.

    In training mode with `log_combined_stats`, each forward adds detached statistics of the batch to running sums
    (read and reset by `pop_combined_stats`): the mean gate over combined heads and pairs of non-padding tokens, and
    sum ||C_bih|| / sum ||S_bih|| over combined heads h and non-padding tokens i of the batch (L2 norms of head
    outputs; C after attention dropout; S is the mix's own softmax output with `integration="mix"`, else recomputed
    without dropout and without gradient).
    """

    _STAT_NAMES = ("gate_mean", "mv_ratio", "mix_mean")

    def setup_combined(self, num_combined: int, comateformer_config: ComateformerConfig) -> None:
        """Store the number of combined heads and the combined-attention settings (called once after creation);
        with `integration="mix"` create the per-head mix parameter (zero: the head starts as its softmax head)."""
        self.num_combined_heads = num_combined
        self.comateformer_config = comateformer_config
        if comateformer_config.integration == "mix":
            weight = self.query.weight
            self.combined_mix = nn.Parameter(torch.zeros(num_combined, dtype=weight.dtype, device=weight.device))
        self._stats_sum = None
        self._stats_calls = 0

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ) -> None:
        """A backbone checkpoint has no mix gate: loading it leaves `combined_mix` as it is (zero after creation)
        instead of failing a strict load; every other key is checked as usual."""
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )
        if prefix + "combined_mix" in missing_keys:
            missing_keys.remove(prefix + "combined_mix")

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
        config = self.comateformer_config
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.attention_head_size)
        query = self.query(hidden_states).view(*hidden_shape).transpose(1, 2)
        key = self.key(hidden_states).view(*hidden_shape).transpose(1, 2)
        value = self.value(hidden_states).view(*hidden_shape).transpose(1, 2)
        h = self.num_combined_heads
        dropout = self.dropout.p if self.training else 0.0
        mix = config.integration == "mix"
        record = self.training and config.log_combined_stats

        keep = key_keep_mask(attention_mask)
        attention_interface = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, bert_eager_attention_forward
        )
        first = 0 if mix else h  # "mix" needs the combined heads' softmax output too
        softmax_output, softmax_weights = attention_interface(
            self,
            query[:, first:],
            key[:, first:],
            value[:, first:],
            attention_mask,
            dropout=dropout,
            scaling=self.scaling,
            **kwargs,
        )
        reference = None
        if mix:
            reference, softmax_output = softmax_output[:, :, :h], softmax_output[:, :, h:]
            softmax_weights = None if softmax_weights is None else softmax_weights[:, h:]
        elif record:
            with torch.no_grad():
                reference = attention_interface(
                    self,
                    query[:, :h],
                    key[:, :h],
                    value[:, :h],
                    attention_mask,
                    dropout=0.0,
                    scaling=self.scaling,
                    **kwargs,
                )[0]
        # Combined heads in chunks of at most _CHUNK_ELEMENTS map entries (one head at least): without autograd only
        # one chunk's (B, c, L, L) maps are alive at once; short inputs still run all heads in one batched call.
        keep_maps = maps is not None or softmax_weights is not None
        valid = None if keep is None else keep.any(-2, keepdim=True)  # (B, 1, 1, Lk): non-padding tokens
        pairs = valid & valid.transpose(-1, -2) if record and valid is not None else None  # (B, 1, L, L)
        chunk = max(1, _CHUNK_ELEMENTS // (query.shape[0] * query.shape[2] * key.shape[2]))
        combined_outputs, head_maps, gate_sum = [], [], 0.0
        for start in range(0, h, chunk):
            heads = slice(start, min(start + chunk, h))
            affinity, difference, gate, combined = combined_attention_maps(
                query[:, heads], key[:, heads], keep, config, return_all=keep_maps or record
            )
            combined_weights = combined
            if config.combined_dropout:
                combined_weights = nn.functional.dropout(combined, p=dropout, training=self.training)
            combined_outputs.append(torch.matmul(combined_weights, value[:, heads]))
            if keep_maps:
                head_maps.append((affinity, difference, combined))
            if record:
                gate_sum = gate_sum + (gate.detach() if pairs is None else gate.detach().masked_fill(~pairs, 0)).sum()
        combined_output = torch.cat(combined_outputs, dim=1).transpose(1, 2)
        if record:
            self._record_stats(gate_sum, combined_output.detach(), reference.detach(), valid)
        if mix:
            # under autocast (bf16/fp16) the head outputs come in the compute dtype and g stays float32: lerp needs one
            gate = self.mix_gate().to(combined_output.dtype).view(1, 1, -1, 1)
            combined_output = torch.lerp(reference.to(combined_output.dtype), combined_output, gate)
        attn_output = torch.cat([combined_output, softmax_output], dim=2).reshape(*input_shape, -1).contiguous()
        weights = None
        if keep_maps:
            affinity, difference, combined = (torch.cat(per_head, dim=1) for per_head in zip(*head_maps))
            if softmax_weights is not None:
                weights = torch.cat([combined, softmax_weights], dim=1)
            if maps is not None:
                maps[self.layer_idx] = (affinity, difference, combined)
        return attn_output, weights

    def mix_gate(self) -> torch.Tensor:
        """g (num_combined_heads,) of `integration="mix"`: `mix_scale` times the parameter `combined_mix`."""
        return self.comateformer_config.mix_scale * self.combined_mix

    def _record_stats(
        self,
        gate_sum: torch.Tensor,
        combined_output: torch.Tensor,
        reference: torch.Tensor,
        valid: "torch.Tensor | None",
    ) -> None:
        """Add this batch's gate mean, ||C|| / ||S|| (and mean mix gate) to the running sums; outputs (B, L, h, d)."""
        tokens = combined_output.new_ones(combined_output.shape[:2]) if valid is None else valid[:, 0, 0].float()
        pairs = tokens.sum(1).square().sum() * self.num_combined_heads
        combined_norm = (combined_output.float().norm(dim=-1) * tokens[..., None]).sum()
        reference_norm = (reference.float().norm(dim=-1) * tokens[..., None]).sum()
        values = [gate_sum.float() / pairs, combined_norm / reference_norm]
        if self.comateformer_config.integration == "mix":
            values.append(self.mix_gate().detach().float().mean())
        stats = torch.stack(values)
        self._stats_sum = stats if self._stats_sum is None else self._stats_sum + stats
        self._stats_calls += 1

    def pop_combined_stats(self) -> dict[str, float]:
        """Means over the training forwards since the last call of the recorded statistics, named
        `comateformer/layer{i}/{gate_mean,mv_ratio,mix_mean}`; empty when nothing was recorded. Resets the sums."""
        if not self._stats_calls:
            return {}
        means = (self._stats_sum / self._stats_calls).tolist()
        self._stats_sum, self._stats_calls = None, 0
        return {f"comateformer/layer{self.layer_idx}/{name}": value for name, value in zip(self._STAT_NAMES, means)}


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
            M as the heads use it (zero on padding keys, after `key_normalization`) per layer with combined heads,
            shaped like `affinity`.
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
            Regression: `regression_loss` on labels scaled to [0, 1]. Classification: cross-entropy.
        logits (`torch.FloatTensor` of shape `(batch_size, num_labels)`):
            Regression (`num_labels == 1`): the prediction on the [0, 1] scale (sigmoid of the head's output with
            `regression_loss="bce"`). Classification: unnormalised class scores.
        scores (`torch.FloatTensor` of shape `(batch_size,)`, *optional*, regression only):
            The prediction on the label scale, `label_min + (label_max - label_min) * logits[:, 0]`.
        hidden_states, attentions, affinity, difference, combined_attention:
            As in [`ComateformerModelOutput`], when asked for.
    """

    loss: "torch.FloatTensor | None" = None
    logits: "torch.FloatTensor | None" = None
    scores: "torch.FloatTensor | None" = None
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

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, ComateformerSelfAttentionMixin) and hasattr(module, "combined_mix"):
            init.zeros_(module.combined_mix)

    def training_stats(self) -> dict[str, float]:
        """`{"comateformer/layer{i}/gate_mean": ..., ".../mv_ratio": ..., ".../mix_mean": ...}` of every combined
        layer, averaged over the training forwards since the last call (see `ComateformerSelfAttentionMixin`); empty
        when none was recorded (eval mode, `log_combined_stats=False`, no combined head)."""
        stats = {}
        for module in self.modules():
            if isinstance(module, ComateformerSelfAttentionMixin):
                stats.update(module.pop_combined_stats())
        return stats

    def _build_encoder(self, config: ComateformerConfig) -> None:
        self.backbone = build_backbone(config.backbone_config)
        attention_class = _COMBINED_ATTENTION_CLASSES[config.backbone_config.model_type]
        for layer_idx, heads in combined_heads_per_layer(config).items():
            attention = self.backbone.encoder.layer[layer_idx].attention
            # The new layer takes the backbone layer's (initialised) projections. Neither its construction nor
            # post_init may draw random numbers for them: that would shift the random stream, and the head's init
            # with it, away from the plain backbone's for the same seed.
            with torch.random.fork_rng(devices=[]):
                combined = attention_class(attention.self.config, is_causal=False, layer_idx=layer_idx)
            combined.load_state_dict(attention.self.state_dict())
            for module in combined.children():
                module._is_hf_initialized = True
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
    """Head like RoBERTa's on a pooled feature: dropout, Linear(d, d), tanh, dropout, Linear(d, num_labels)."""

    def __init__(self, config: ComateformerConfig) -> None:
        super().__init__()
        backbone = config.backbone_config
        dropout = config.classifier_dropout if config.classifier_dropout is not None else backbone.hidden_dropout_prob
        self.dropout = nn.Dropout(dropout)
        self.dense = nn.Linear(backbone.hidden_size, backbone.hidden_size)
        self.out_proj = nn.Linear(backbone.hidden_size, config.num_labels)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(B, d) -> (B, num_labels)."""
        return self.out_proj(self.dropout(torch.tanh(self.dense(self.dropout(features)))))


class ComateformerForSequenceClassification(ComateformerPreTrainedModel):
    """Comateformer with a first-token (or mean) head: regression (`num_labels == 1`) or classification of a pair."""

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
            labels (`torch.Tensor` of shape `(batch_size,)`, *optional*): scores on the label scale (regression,
                scaled to [0, 1] for the loss) or class indices (classification).
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
        hidden = encoded.last_hidden_state
        mask = attention_mask if attention_mask is not None else hidden.new_ones(hidden.shape[:2])
        features = pool_hidden_states(hidden, mask, self.config.pooling)
        loss, logits, scores = similarity_loss_and_scores(self.config, self.classifier(features), labels)
        if scores is not None:
            logits = logits.unsqueeze(-1)  # (B, 1): the (batch, num_labels) shape of sequence-classification models
        return ComateformerSequenceClassifierOutput(
            loss=loss,
            logits=logits,
            scores=scores,
            hidden_states=encoded.hidden_states,
            attentions=encoded.attentions,
            affinity=encoded.affinity,
            difference=encoded.difference,
            combined_attention=encoded.combined_attention,
        )


__all__ = [
    "CombinedAttentionMaps",
    "ComateformerForSequenceClassification",
    "ComateformerModel",
    "ComateformerModelOutput",
    "ComateformerPreTrainedModel",
    "ComateformerSequenceClassifierOutput",
    "combined_attention_maps",
    "num_combined_heads",
]

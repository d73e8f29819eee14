"""Comateformer (Li, Liang, Zhang: "Comateformer: Combined Attention Transformer for Semantic Sentence Matching").

In the combined layers of a pretrained encoder the first ceil(f * H) heads replace softmax attention by the combined
quasi-attention M = tanh(E) * 2 sigmoid(N) (E: scaled dot-product affinity, N: negative scaled L1 distance of queries
and keys), output M V; the other heads keep softmax attention. The encoder keeps its own modules and parameters: the
combined heads replace the attention computation of a combined layer through the architecture's own attention module
(`CombinedHeads`: its AttentionInterface call where it makes one, hooks around it elsewhere; the per-architecture
parts come from `encoders`), so pretrained weights load unchanged and with no combined head the model is the backbone
exactly. It runs on every architecture `encoders` knows (BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, ALBERT,
ModernBERT with rotary q and k, MPNet and DeBERTa with their position terms in E). No public code exists for the
paper; the equations follow its sections 3.2-3.5 (`ComateformerConfig` writes them out). The pair classifier
reads the first token (or the token mean) through Linear(d, d) + tanh, started from the checkpoint's trained pooler
when it has one (as `BertForSequenceClassification` fine-tuning starts), then a new output projection; regression is
trained on labels scaled to [0, 1] with the cross-encoder's loss (`similarity_loss_and_scores`).

Choices the paper leaves open, made here:

- which heads: the first ceil(f * H) of each combined layer (`num_combined_heads`); the others keep the backbone's
  softmax attention under its configured implementation (eager, sdpa), on that subset of heads;
- means and sums over keys (centring, key normalisation) are taken per query row over non-padding keys, and M is
  zero on padding keys; `center_difference` and `gate="center"` both centre N (centring twice changes nothing); the
  factor 2 of `double_sigmoid` multiplies whichever `difference_fn` is chosen;
- in training the backbone's attention dropout is applied to M (`combined_dropout`), as BERT applies it to softmax
  probabilities; `alpha` and `beta` are fixed scalars, not learned;
- position information: E and N use the layer's own q and k, so where the encoder rotates them (ModernBERT) both use
  the rotated ones; where it adds position terms to the score (MPNet's relative bias, DeBERTa's c2p and p2c terms
  with its 1 / sqrt(3 d_k) scaling) E is alpha times the layer's own score and N compares the content q and k;
- ALBERT, one shared layer at every depth: combined heads follow the depth (`combined_layers` as on any encoder),
  and with `integration="mix"` its layer holds one g per head, shared by its depths as ALBERT shares every weight.

The options that depart from the paper inject combined heads gently into a pretrained encoder, which the paper calls
an open problem: there N is large and negative, so the paper's gate 2 sigmoid(N) starts nearly shut, and M V is not
normalised over keys, so once a gate opens C grows with the number of keys where a softmax row sums to 1.
`integration="mix"` starts as the backbone exactly and lets training decide how much of C to let in (S + g (C - S)
is the paper's head at g = 1; `mix_scale` lets g move at a fine-tuning learning rate); `combined_dropout=False` makes
a mix model draw the plain backbone's random numbers, so one seed gives both the same head and dropout masks and the
two differ only by what the combined heads do; `key_normalization` puts C on a softmax head's scale; `gate_bias`,
`center_difference` or `gate="center"` open the gate from the start.

In training mode every combined layer records the mean gate and ||C|| / ||S|| (`training_stats`); `pairzoo.train`
adds them to the Trainer's logs (`TrainingStatsCallback`), so a collapse of the combined heads is seen.
"""

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import nn
from transformers import AttentionInterface, PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.models.bert.modeling_bert import eager_attention_forward as bert_eager_attention_forward
from transformers.utils import ModelOutput, can_return_tuple

from ..configuration.configuration_comateformer import ComateformerConfig
from .common import PairzooPreTrainedModel, build_backbone, pool_hidden_states, similarity_loss_and_scores
from .encoders import (
    attention_dropout,
    attention_module,
    attention_scores,
    encoder_architecture,
    head_shape,
    hidden_dropout,
    layer_list,
    output_projection,
    project,
    projection_modules,
)

# Largest number of (batch, head, query, key) entries of one chunk of combined heads (2**23 floats = 32 MiB per map).
_CHUNK_ELEMENTS = 2**23
# Added to a row's L1 mass by `key_normalization="l1"`, so an all-zero row stays zero instead of 0 / 0.
_L1_EPS = 1e-6
_AFFINITY_FUNCTIONS = {"tanh": torch.tanh, "sigmoid": torch.sigmoid}
_DIFFERENCE_FUNCTIONS = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "arctan": torch.atan}
# Name of `combined_attention_forward` in transformers' AttentionInterface (per module, so an exported copy of this
# file registers its own).
COMBINED_ATTENTION = f"comateformer_combined_heads.{__name__}"


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
    """The 4-D attention mask an attention module receives as a boolean `keep` mask (True = attend), or None when
    nothing is masked.

    Under `sdpa` the mask is boolean (True = attend) or None when there is no padding; under `eager` (and MPNet) it is
    additive (0 = attend, the dtype's minimum = masked), entries above half the dtype's minimum counting as kept;
    DeBERTa's is a 0/1 integer mask of (query, key) pairs, nonzero entries counting as kept.
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
    if not attention_mask.is_floating_point():
        return attention_mask != 0
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


def pairwise_l1(query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
    """||q_i - k_j||_1, `(B, h, Lq, Lk)`, by `torch.cdist` (no `(B, h, Lq, Lk, d)` tensor; in float32 on the CPU, which
    has no half-precision cdist); while torch exports the model to ONNX, by the explicit sum instead: torch's export of
    `cdist(p=1)` computes NaN in ONNX Runtime."""
    if torch.onnx.is_in_onnx_export():
        return (query.unsqueeze(-2) - key.unsqueeze(-3)).abs().sum(-1)
    if query.device.type == "cpu" and query.dtype in (torch.float16, torch.bfloat16):
        return torch.cdist(query.float(), key.float(), p=1).to(query.dtype)
    return torch.cdist(query, key, p=1)


def combined_attention_maps(
    query: torch.Tensor,
    key: torch.Tensor,
    keep: "torch.Tensor | None",
    config: ComateformerConfig,
    return_all: bool = True,
    scores: "torch.Tensor | None" = None,
) -> CombinedAttentionMaps:
    """Affinity E, difference N, gate and combined attention M of queries/keys `(B, h, L, d)`; each `(B, h, Lq, Lk)`.

    E = alpha q.k / sqrt(d), N = -beta ||q - k||_1 / sqrt(d) (pairwise L1 by `torch.cdist`, never a (B, h, L, L, d)
    tensor), gate = 2 difference_fn(N' + gate_bias) (or difference_fn(N - mean N + gate_bias) with `gate="center"`),
    M = affinity_fn(E') * gate, zeroed on keys where `keep` (broadcastable boolean, True = attend) is False, then
    normalised over keys by `config.key_normalization`. With `scores` (the layer's own pre-softmax attention scores
    of these heads, position terms included: `encoders.attention_scores`) E = alpha * scores instead. E and N are
    returned as defined, before centring and masking; the gate is not masked; M is the map the heads use. With
    `return_all=False` only M is returned (E, N and the gate are None), each map being released as soon as it is used,
    so inference holds fewer (B, h, L, L) maps at once.
    """
    scaling = query.shape[-1] ** -0.5
    difference = pairwise_l1(query, key) * (-config.beta * scaling)
    gate = _gate(difference, keep, config)
    if not return_all:
        difference = None
    if scores is None:
        affinity = torch.matmul(query, key.transpose(-1, -2)) * (config.alpha * scaling)
    else:
        affinity = scores * config.alpha
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


def _unwrapped_forward(module: nn.Module):
    forward = type(module).forward
    while hasattr(forward, "__wrapped__"):  # decorators such as transformers' `deprecate_kwarg`
        forward = forward.__wrapped__
    return forward


def calls_attention_interface(module: nn.Module) -> bool:
    """Whether the attention module's forward looks its attention function up in transformers' AttentionInterface
    (`ALL_ATTENTION_FUNCTIONS`, by `config._attn_implementation`): BERT, RoBERTa, XLM-R, ELECTRA, DistilBERT, ALBERT
    and ModernBERT do; DeBERTa and MPNet compute their own softmax attention."""
    return "ALL_ATTENTION_FUNCTIONS" in _unwrapped_forward(module).__code__.co_names


class CombinedAttentionConfig:
    """The backbone config as a combined layer's attention module reads it: every field is the backbone config's
    (`base`), except `_attn_implementation`, which names `combined_attention_forward`. The backbone's own
    implementation, `base._attn_implementation` (eager, sdpa, ...; `set_attn_implementation` changes it as usual),
    runs the layer's softmax heads."""

    _attn_implementation = COMBINED_ATTENTION

    def __init__(self, base: PreTrainedConfig) -> None:
        self.base = base

    def __getattr__(self, name: str):
        if name.startswith("__") or name == "base":  # copying and unpickling look these up before `base` is set
            raise AttributeError(name)
        return getattr(self.base, name)


class CombinedHeads:
    """The combined heads of one attention module of the backbone, attached to it as `module.comateformer_heads`.

    The module keeps its class, parameters and forward; in each depth listed in `heads` with a nonzero count h, heads
    `[0, h)` use the combined attention, computed in chunks of heads so that inference holds at most about 2**23
    entries per map at once (one head at least), and the others the layer's own softmax attention (`integration=
    "mix"`: on every head, the combined heads' softmax output S entering the mix S + g (C - S), g = `mix_scale` * the
    per-head parameter `combined_mix`, registered on the module so its state-dict key sits beside the projections').
    How the combined heads get in depends on the architecture's attention module:

    - modules that look their attention function up in transformers' AttentionInterface (BERT, RoBERTa, XLM-R,
      ELECTRA, DistilBERT, ALBERT, ModernBERT; `calls_attention_interface`) read their config through a
      `CombinedAttentionConfig`, so they call `combined_attention_forward` with their own per-head queries, keys and
      values (ModernBERT's already rotated by its rotary embeddings), mask, dropout and scaling; the softmax heads run
      through the backbone's configured implementation on their subset of heads;
    - the others (DeBERTa, MPNet) keep computing softmax attention on every head. A forward pre-hook computes the
      combined heads from the layer's own projections of the module's input (`encoders.project`), E from the layer's
      own scores with its position terms (`encoders.attention_scores`: MPNet's relative bias, DeBERTa's c2p and p2c
      terms and scaling; N from the content queries and keys); a forward pre-hook on the output projection puts their
      output in place of the combined heads' slots of the context (whose softmax output is S), and a forward hook
      puts M into the returned probabilities.

    ALBERT runs one module at every depth: `heads` then maps each of its depths to its count (0: softmax only), the
    depth of a call is the next in the module's depth order (a forward pre-hook on the backbone restarts the count),
    and `combined_mix` (as many entries as the largest count) is shared by the depths, as ALBERT shares every weight.

    In training mode with `log_combined_stats`, each forward adds detached statistics of the batch to running sums per
    depth (read and reset by `pop_stats`): the mean gate over combined heads and pairs of non-padding tokens, and sum
    ||C_bih|| / sum ||S_bih|| over combined heads h and non-padding tokens i of the batch (L2 norms of head outputs; C
    after attention dropout; S is the mix's own softmax output with `integration="mix"`, with `"paper"` recomputed
    without dropout and without gradient where the module calls the AttentionInterface, else the layer's own softmax
    output of those heads). While `recorder` is a dict, each combined depth records `(E, N, M)` under its index.
    """

    _STAT_NAMES = ("gate_mean", "mv_ratio", "mix_mean")

    def __init__(
        self, backbone: PreTrainedModel, module: nn.Module, heads: "dict[int, int]", config: ComateformerConfig
    ) -> None:
        self.backbone, self.module, self.heads, self.config = backbone, module, heads, config
        self.depths = tuple(heads)
        self.calls = 0
        self.recorder: dict | None = None
        self._stats: dict = {}
        self._pending_context = self._pending_weights = None
        first = self.depths[0]
        if config.integration == "mix":
            weight = projection_modules(backbone, first)[0].weight
            size = max(heads.values())
            module.combined_mix = nn.Parameter(torch.zeros(size, dtype=weight.dtype, device=weight.device))
            module.register_load_state_dict_pre_hook(self._keep_mix)
        module.num_combined_heads = max(heads.values())
        module.comateformer_heads = self
        if calls_attention_interface(module):
            self.softmax_fallback = _unwrapped_forward(module).__globals__.get(
                "eager_attention_forward", bert_eager_attention_forward
            )
            module.config = CombinedAttentionConfig(module.config)
        else:
            self._parameter_names = _unwrapped_forward(module).__code__.co_varnames[1:]
            module.register_forward_pre_hook(self._before_attention, with_kwargs=True)
            output_projection(backbone, first).register_forward_pre_hook(self._before_output_projection)
            module.register_forward_hook(self._after_attention)
        if len(self.depths) > 1:
            backbone.register_forward_pre_hook(self._restart)

    def _keep_mix(self, module: nn.Module, state_dict: dict, prefix: str, *args) -> None:
        """A backbone checkpoint has no mix gate: loading it leaves `combined_mix` as it is (zero after creation)
        instead of failing a strict load; every other key is checked as usual."""
        state_dict.setdefault(prefix + "combined_mix", module.combined_mix.detach())

    def _restart(self, backbone: nn.Module, args: tuple) -> None:
        self.calls = 0

    def next_depth(self) -> int:
        """The depth of the module's current call: its only depth, or the next one in order where it is shared."""
        depth = self.depths[self.calls % len(self.depths)]
        self.calls += 1
        return depth

    def mix_gate(self, count: int) -> torch.Tensor:
        """g (count,) of `integration="mix"`: `mix_scale` times the first `count` entries of `combined_mix`."""
        return self.config.mix_scale * self.module.combined_mix[:count]

    def softmax_attention(self, module: nn.Module, *args, **kwargs) -> "tuple[torch.Tensor, torch.Tensor | None]":
        """The backbone's configured attention function (its eager one for "eager") on `args`, as the module would
        call it."""
        view = module.config
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(view.base._attn_implementation, self.softmax_fallback)
        module.config = view.base  # flash attention reads the implementation from the module's config again
        try:
            return attention(module, *args, **kwargs)
        finally:
            module.config = view

    def combine(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        keep: "torch.Tensor | None",
        dropout: float,
        keep_maps: bool,
        scores: "torch.Tensor | None" = None,
    ) -> tuple:
        """Outputs M V (B, L, h, d) of the combined heads whose queries, keys and values (B, h, L, d) are given, with
        `(E, N, M)` (each (B, h, Lq, Lk)) when `keep_maps` (else None) and what `finish` needs for the statistics."""
        config, training = self.config, self.module.training
        record = training and config.log_combined_stats
        valid = None if keep is None else keep.any(-2, keepdim=True)  # (B, 1, 1, Lk): non-padding tokens
        pairs = valid & valid.transpose(-1, -2) if record and valid is not None else None  # (B, 1, L, L)
        count = query.shape[1]
        chunk = max(1, _CHUNK_ELEMENTS // (query.shape[0] * query.shape[2] * key.shape[2]))
        outputs, head_maps, gate_sum = [], [], 0.0
        for start in range(0, count, chunk):
            heads = slice(start, min(start + chunk, count))
            affinity, difference, gate, combined = combined_attention_maps(
                query[:, heads],
                key[:, heads],
                keep,
                config,
                return_all=keep_maps or record,
                scores=None if scores is None else scores[:, heads],
            )
            weights = combined
            if config.combined_dropout:
                weights = nn.functional.dropout(combined, p=dropout, training=training)
            outputs.append(torch.matmul(weights, value[:, heads]))
            if keep_maps:
                head_maps.append((affinity, difference, combined))
            if record:
                gate_sum = gate_sum + (gate.detach() if pairs is None else gate.detach().masked_fill(~pairs, 0)).sum()
        maps = tuple(torch.cat(per_head, dim=1) for per_head in zip(*head_maps)) if keep_maps else None
        return torch.cat(outputs, dim=1).transpose(1, 2), maps, (gate_sum, valid)

    def finish(self, depth: int, output: torch.Tensor, reference: "torch.Tensor | None", statistics: tuple):
        """The combined heads' final output (B, L, h, d) at `depth`: `output` (M V) mixed with their softmax output
        `reference` under `integration="mix"`; records the statistics in training mode."""
        if self.module.training and self.config.log_combined_stats:
            self._record_stats(depth, *statistics, output.detach(), reference.detach())
        if self.config.integration != "mix":
            return output
        # under autocast (bf16/fp16) the head outputs come in the compute dtype and g stays float32: lerp needs one
        gate = self.mix_gate(output.shape[2]).to(output.dtype).view(1, 1, -1, 1)
        return torch.lerp(reference.to(output.dtype), output, gate)

    def record_maps(self, depth: int, maps: "tuple | None") -> None:
        if self.recorder is not None:
            self.recorder[depth] = maps

    def _before_attention(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        depth = self.next_depth()
        count = self.heads[depth]
        self._pending_context = self._pending_weights = None
        if not count:
            return
        inputs = {**dict(zip(self._parameter_names, args)), **kwargs}
        hidden = inputs["hidden_states"]
        heads, size = head_shape(self.backbone.config)
        query, key, value = (
            project(self.backbone, depth, which, hidden).unflatten(-1, (heads, size)).transpose(1, 2)
            for which in ("query", "key", "value")
        )
        scores = attention_scores(self.backbone, depth, query, key, inputs)[:, :count]
        dropout = attention_dropout(self.backbone.config) if module.training else 0.0
        wants_weights = bool(inputs.get("output_attentions"))
        output, maps, statistics = self.combine(
            query[:, :count],
            key[:, :count],
            value[:, :count],
            key_keep_mask(inputs.get("attention_mask")),
            dropout,
            keep_maps=wants_weights or self.recorder is not None,
            scores=scores,
        )
        self.record_maps(depth, maps)
        self._pending_context = (depth, output, statistics)
        self._pending_weights = maps[2] if wants_weights else None

    def _before_output_projection(self, projection: nn.Module, args: tuple) -> "tuple | None":
        if self._pending_context is None:
            return None
        (depth, output, statistics), self._pending_context = self._pending_context, None
        context = args[0].unflatten(-1, (-1, output.shape[-1]))  # (B, L, H, d)
        count = output.shape[2]
        output = self.finish(depth, output, context[:, :, :count], statistics)
        return (torch.cat([output.to(context.dtype), context[:, :, count:]], dim=2).flatten(-2), *args[1:])

    def _after_attention(self, module: nn.Module, args: tuple, output) -> "tuple | None":
        combined, self._pending_weights = self._pending_weights, None
        if combined is None or not isinstance(output, tuple) or len(output) < 2 or output[1] is None:
            return None
        weights = torch.cat([combined.to(output[1].dtype), output[1][:, combined.shape[1] :]], dim=1)
        return (output[0], weights, *output[2:])

    def _record_stats(
        self,
        depth: int,
        gate_sum: torch.Tensor,
        valid: "torch.Tensor | None",
        combined_output: torch.Tensor,
        reference: torch.Tensor,
    ) -> None:
        """Add this batch's gate mean, ||C|| / ||S|| (and mean mix gate) to the running sums; outputs (B, L, h, d)."""
        count = combined_output.shape[2]
        tokens = combined_output.new_ones(combined_output.shape[:2]) if valid is None else valid[:, 0, 0].float()
        pairs = tokens.sum(1).square().sum() * count
        combined_norm = (combined_output.float().norm(dim=-1) * tokens[..., None]).sum()
        reference_norm = (reference.float().norm(dim=-1) * tokens[..., None]).sum()
        values = [gate_sum.float() / pairs, combined_norm / reference_norm]
        if self.config.integration == "mix":
            values.append(self.mix_gate(count).detach().float().mean())
        stats = torch.stack(values)
        total, calls = self._stats.get(depth, (0.0, 0))
        self._stats[depth] = (stats + total, calls + 1)

    def pop_stats(self) -> "dict[str, float]":
        """Means over the training forwards since the last call of the recorded statistics, named
        `comateformer/layer{i}/{gate_mean,mv_ratio,mix_mean}`; empty when nothing was recorded. Resets the sums."""
        stats = {}
        for depth, (total, calls) in sorted(self._stats.items()):
            means = (total / calls).tolist()
            stats.update({f"comateformer/layer{depth}/{n}": v for n, v in zip(self._STAT_NAMES, means)})
        self._stats = {}
        return stats


def combined_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: "torch.Tensor | None",
    dropout: float = 0.0,
    scaling: "float | None" = None,
    **kwargs,
) -> "tuple[torch.Tensor, torch.Tensor | None]":
    """The attention function of a combined layer's module (registered in the AttentionInterface as
    `COMBINED_ATTENTION`): the combined heads of its current depth on their queries/keys/values (B, H, L, d), the
    backbone's configured attention on the others (see `CombinedHeads`). Returns `(attn_output (B, L, H, d),
    weights)` like any attention function; `weights` is `(B, H, L, L)` with M in the combined heads' slots when the
    softmax function returns probabilities (eager), else None."""
    layer: CombinedHeads = module.comateformer_heads
    depth = layer.next_depth()
    count = layer.heads[depth]
    if not count:
        return layer.softmax_attention(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    mix = layer.config.integration == "mix"
    first = 0 if mix else count  # "mix" needs the combined heads' softmax output too
    softmax_output, softmax_weights = layer.softmax_attention(
        module,
        query[:, first:],
        key[:, first:],
        value[:, first:],
        attention_mask,
        dropout=dropout,
        scaling=scaling,
        **kwargs,
    )
    reference = None
    if mix:
        reference, softmax_output = softmax_output[:, :, :count], softmax_output[:, :, count:]
        softmax_weights = None if softmax_weights is None else softmax_weights[:, count:]
    elif module.training and layer.config.log_combined_stats:
        with torch.no_grad():
            reference = layer.softmax_attention(
                module,
                query[:, :count],
                key[:, :count],
                value[:, :count],
                attention_mask,
                dropout=0.0,
                scaling=scaling,
                **kwargs,
            )[0]
    output, maps, statistics = layer.combine(
        query[:, :count],
        key[:, :count],
        value[:, :count],
        key_keep_mask(attention_mask),
        dropout,
        keep_maps=layer.recorder is not None or softmax_weights is not None,
    )
    output = layer.finish(depth, output, reference, statistics)
    layer.record_maps(depth, maps)
    weights = None if softmax_weights is None else torch.cat([maps[2], softmax_weights], dim=1)
    return torch.cat([output, softmax_output], dim=2), weights


AttentionInterface.register(COMBINED_ATTENTION, combined_attention_forward)


def install_combined_heads(backbone: PreTrainedModel, config: ComateformerConfig) -> None:
    """Give the attention modules of the combined layers of `config` their combined heads (`CombinedHeads`); the
    backbone keeps its modules and parameters (plus `combined_mix` with `integration="mix"`) and draws no random
    number, and with no combined head it is left as it is."""
    heads = combined_heads_per_layer(config)
    if not heads:
        return
    modules: dict = {}
    for depth in range(len(layer_list(backbone))):
        module = attention_module(backbone, depth)
        modules.setdefault(id(module), (module, {}))[1][depth] = heads.get(depth, 0)
    for module, per_depth in modules.values():
        if any(per_depth.values()):
            CombinedHeads(backbone, module, per_depth, config)


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
        affinity (`tuple(torch.FloatTensor)`, *optional*, returned with `output_internals=True`):
            E per layer with combined heads (in layer order), each `(batch_size, num_combined_heads_l, sequence_length,
            sequence_length)`: alpha times the layer's own attention score (with MPNet's relative bias and DeBERTa's
            c2p/p2c terms where the architecture adds them).
        difference (`tuple(torch.FloatTensor)`, *optional*, returned with `output_internals=True`):
            N per layer with combined heads, shaped like `affinity`.
        combined_attention (`tuple(torch.FloatTensor)`, *optional*, returned with `output_internals=True`):
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

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(getattr(module, "comateformer_heads", None), CombinedHeads) and hasattr(module, "combined_mix"):
            init.zeros_(module.combined_mix)

    def _combined_heads(self) -> "list[CombinedHeads]":
        """The `CombinedHeads` of the backbone's attention modules (one per module, in module order)."""
        found = (getattr(module, "comateformer_heads", None) for module in self.backbone.modules())
        return [heads for heads in found if isinstance(heads, CombinedHeads)]

    def training_stats(self) -> dict[str, float]:
        """`{"comateformer/layer{i}/gate_mean": ..., ".../mv_ratio": ..., ".../mix_mean": ...}` of every combined
        layer, averaged over the training forwards since the last call (see `CombinedHeads`); empty when none was
        recorded (eval mode, `log_combined_stats=False`, no combined head)."""
        stats = {}
        for heads in self._combined_heads():
            stats.update(heads.pop_stats())
        return stats

    def _build_encoder(self, config: ComateformerConfig) -> None:
        encoder_architecture(config.backbone_config)  # an architecture pairzoo does not know is refused here
        self.backbone = build_backbone(config.backbone_config)
        install_combined_heads(self.backbone, config)

    def _encode(
        self,
        input_ids: "torch.LongTensor | None",
        attention_mask: "torch.LongTensor | None",
        token_type_ids: "torch.LongTensor | None",
        output_hidden_states: "bool | None",
        output_attentions: "bool | None",
        output_internals: bool,
    ) -> ComateformerModelOutput:
        output_hidden_states, output_attentions = self.output_flags(output_hidden_states, output_attentions)
        segments = {}
        if token_type_ids is not None:  # DistilBERT, MPNet and ModernBERT take none
            segments["token_type_ids"] = token_type_ids
        layers = self._combined_heads() if output_internals else []
        maps: dict = {}
        for heads in layers:
            heads.recorder = maps
        try:
            outputs = self.backbone(
                input_ids=input_ids,
                attention_mask=attention_mask,
                output_hidden_states=output_hidden_states,
                output_attentions=output_attentions,
                **segments,
            )
        finally:
            for heads in layers:
                heads.recorder = None
        per_map = [None, None, None]
        if output_internals:
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

    @can_return_tuple
    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        output_hidden_states: "bool | None" = None,
        output_attentions: "bool | None" = None,
        output_internals: bool = False,
    ) -> ComateformerModelOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): the tokenizer's pair encoding
                of (sentence1, sentence2).
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            token_type_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*): segment ids.
            output_internals (`bool`, defaults to `False`): also return the method's internals, E, N and M of
                every combined head.
        """
        return self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states,
            output_attentions,
            output_internals,
        )


class ComateformerClassificationHead(nn.Module):
    """Head like RoBERTa's on a pooled feature: dropout, Linear(d, d), tanh, dropout, Linear(d, num_labels)."""

    def __init__(self, config: ComateformerConfig) -> None:
        super().__init__()
        backbone = config.backbone_config
        dropout = config.classifier_dropout if config.classifier_dropout is not None else hidden_dropout(backbone)
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

    @can_return_tuple
    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        labels: "torch.Tensor | None" = None,
        output_hidden_states: "bool | None" = None,
        output_attentions: "bool | None" = None,
        output_internals: bool = False,
    ) -> ComateformerSequenceClassifierOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): the tokenizer's pair encoding
                of (sentence1, sentence2).
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            token_type_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*): segment ids.
            labels (`torch.Tensor` of shape `(batch_size,)`, *optional*): scores on the label scale (regression,
                scaled to [0, 1] for the loss) or class indices (classification).
            output_internals (`bool`, defaults to `False`): also return the method's internals, E, N and M of
                every combined head.
        """
        encoded = self._encode(
            input_ids,
            attention_mask,
            token_type_ids,
            output_hidden_states,
            output_attentions,
            output_internals,
        )
        hidden = encoded.last_hidden_state
        mask = attention_mask if attention_mask is not None else hidden.new_ones(hidden.shape[:2])
        features = pool_hidden_states(hidden, mask, self.config.pooling)
        loss, logits, scores = similarity_loss_and_scores(self.config, self.classifier(features), labels)
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

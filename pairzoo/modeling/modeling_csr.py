"""CSR: condition-specified routers for conditioned sentence embeddings (Varying Sentence Representations via
Condition-Specified Routers, EMNLP 2024; reference code bigai-nlco/CSR), with the C-STS tri-/bi-encoder baselines.

Tri-encoder: the shared encoder reads the condition alone; `q_c` is the last layer's query projection of the
condition's first token. It then reads the sentence alone, and in each router layer t the self-attention context
`h'_t` (before the output projection) becomes `(1 + w_t) * h'_t` with `w_t = softmax(q_c . K_t / sqrt(d_k))` over
the sentence's non-padding tokens, `K_t` the layer's own key projection of what its attention reads (its input; in
pre-LN layouts its attention norm of it); the rest of the block runs as usual. The embedding is the mean of the last
hidden states; pairs are scored by cosine similarity. The routers add no parameter and keep the backbone's parameter
names, so pretrained weights load unchanged.

Every encoder architecture of `encoders.py` runs each layer through its own module (`EncoderStack`, with its
relative, bias or rotary position information); the router changes only the context entering the layer's attention
output projection, through a forward pre-hook held for that one call.

`router="reference"` follows the reference code instead (see `CsrConfig`): the sentence pass attends in every layer
to the condition's last-layer hidden states as extra keys/values, its positions continue after the condition, and
`w_t` is the head-averaged attention of the sentence's own first token on the sentence tokens. It is defined by q . k
scores and absolute positions, so only absolute-position backbones build it.

Bi-encoder: one pass over `[CLS] s SEP c SEP`; `w_t` is the layer's head-averaged attention of the condition's first
token on the sentence tokens, renormalised over them; pooling covers the sentence tokens only (`bi_pooling="all"`:
every token, with token type 1 on the condition, the c-sts bi-encoder form).

Because the tri-encoder's sentence pass below the first router layer does not see the condition (except with
`router="reference"`, which cannot be cached), sentences and conditions can be encoded once (`encode_sentences`,
`encode_conditions`) and combined later (`embed`), running only the router layers onward per pair.
"""

import hashlib
import json
import math
from dataclasses import dataclass, field

import torch
from torch import nn
from transformers.activations import ACT2FN
from transformers.utils import ModelOutput, can_return_tuple

from ..configuration.configuration_csr import CsrConfig
from .common import PairzooPreTrainedModel, build_backbone, pool_hidden_states
from .encoders import (
    EncoderStack,
    attention_dropout,
    attention_input,
    attention_probabilities,
    capturing_graph,
    encoder_architecture,
    head_shape,
    hidden_activation,
    hidden_dropout,
    position_ids_after,
    project,
)


@dataclass
class CsrOutput(ModelOutput):
    r"""
    Output of [`CsrModel`].

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `labels` is given):
            MSE between the cosine similarity and the labels scaled to [0, 1].
        logits (`torch.FloatTensor` of shape `(batch_size, 1)`, *optional*, returned when a second sentence is given):
            Cosine similarity of the two conditioned embeddings (the `(batch_size, num_labels)` shape of every pairzoo
            regression model).
        scores (`torch.FloatTensor` of shape `(batch_size,)`, *optional*):
            `label_min + (label_max - label_min) * logits[:, 0]`, the prediction on the label scale.
        embeddings (`torch.FloatTensor` of shape `(batch_size, hidden_size)`):
            Conditioned embedding of the first sentence.
        embeddings_2 (`torch.FloatTensor` of shape `(batch_size, hidden_size)`, *optional*):
            Conditioned embedding of the second sentence.
        router_weights (`tuple(torch.FloatTensor)`, *optional*, with `output_internals=True`):
            One `(batch_size, sequence_length)` tensor per router layer: `w_t` over the first sentence's tokens
            (zero outside `router_mask`; each row sums to 1 over it, to at most 1 with `router="reference"`).
        router_weights_2 (`tuple(torch.FloatTensor)`, *optional*): the same for the second sentence.
        router_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            Tokens the router weights are defined on (tri: the sentence's non-padding tokens; bi: the sentence span).
        router_mask_2 (`torch.LongTensor` of shape `(batch_size, sequence_length_2)`, *optional*): the same for the
            second sentence.
    """

    loss: "torch.FloatTensor | None" = None
    logits: "torch.FloatTensor | None" = None
    scores: "torch.FloatTensor | None" = None
    embeddings: "torch.FloatTensor | None" = None
    embeddings_2: "torch.FloatTensor | None" = None
    router_weights: "tuple[torch.FloatTensor, ...] | None" = None
    router_weights_2: "tuple[torch.FloatTensor, ...] | None" = None
    router_mask: "torch.LongTensor | None" = None
    router_mask_2: "torch.LongTensor | None" = None


@dataclass
class ConditionCache:
    """Encoded conditions for the cached tri-encoder path (plain tensors plus metadata, safetensors-friendly).

    `queries` (num_conditions, num_router_layers, hidden): the router query per router layer (`q_c` for the `key`
    router). `features` (num_conditions, hidden): the pooled condition embedding, used by the `hadamard`/`concat`
    tri-encoder heads (width 0 when the model has none). `metadata` identifies the model that built it.
    """

    queries: torch.Tensor
    features: torch.Tensor
    metadata: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return self.queries.shape[0]

    def tensors(self) -> "dict[str, torch.Tensor]":
        """The tensors to serialise (see `pairzoo.csr_cache.save_cache`)."""
        return {"queries": self.queries, "features": self.features}


@dataclass
class SentenceCache:
    """Encoded sentences for the cached tri-encoder path: the hidden states entering the first router layer.

    `hidden_states` (num_sentences, length, hidden) and `attention_mask` (num_sentences, length); with
    `use_router=False` they are the last layer's hidden states. `metadata` identifies the model that built it.
    """

    hidden_states: torch.Tensor
    attention_mask: torch.Tensor
    metadata: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return self.hidden_states.shape[0]

    def tensors(self) -> "dict[str, torch.Tensor]":
        """The tensors to serialise (see `pairzoo.csr_cache.save_cache`)."""
        return {"hidden_states": self.hidden_states, "attention_mask": self.attention_mask}


def tokenizer_fingerprint(tokenizer) -> str:
    """A sha256 (hex) of what turns a text into token ids, the same in every process and on every machine: the
    tokenizer's class, its vocabulary (token -> id), its special tokens and their ids, whether special tokens in a
    text are split, and, for a tokenizer with a `tokenizers` backend, its whole pipeline (normaliser, pre-tokenizer,
    model, post-processor and added tokens, without the truncation and padding settings a call leaves behind); for
    one without, the lower-casing, accent and prefix-space settings it has and its sentencepiece model. The caches
    record it, so `CsrModel.embed` can refuse a sentence cache and a condition cache tokenised differently."""
    vocab = tokenizer.get_vocab()
    state = {
        "class": type(tokenizer).__name__,
        "vocab": sorted(vocab.items()),
        "special_tokens": sorted(
            (str(role), str(token), vocab.get(str(token))) for role, token in tokenizer.special_tokens_map.items()
        ),
        "split_special_tokens": getattr(tokenizer, "split_special_tokens", None),
    }
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        pipeline = json.loads(backend.to_str())
        pipeline.pop("truncation", None)
        pipeline.pop("padding", None)
        model = pipeline.get("model") or {}
        for name, value in model.items():  # an empty prefix or suffix is written as "" or null alike
            if value == "":
                model[name] = None
        state["pipeline"] = pipeline
    else:
        settings = ("do_lower_case", "strip_accents", "tokenize_chinese_chars", "add_prefix_space", "legacy")
        state["settings"] = {name: getattr(tokenizer, name, tokenizer.init_kwargs.get(name)) for name in settings}
        model = getattr(tokenizer, "sp_model", None)
        if model is not None:
            state["sentencepiece"] = hashlib.sha256(model.serialized_model_proto()).hexdigest()
    return hashlib.sha256(json.dumps(state, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def _tokenizer_name(tokenizer) -> str:
    """The tokenizer's class and, when it has one, the folder or Hub id it was loaded from."""
    source = str(getattr(tokenizer, "name_or_path", "") or "")
    return f"{type(tokenizer).__name__} {source!r}" if source else type(tokenizer).__name__


@dataclass
class _Route:
    """What a router layer needs besides its own input: the condition side, prepared once per forward."""

    mask: torch.Tensor  # (B, L) tokens w is defined on
    queries: "torch.Tensor | None" = None  # tri: (B, T, d), one query per router layer
    condition_index: "torch.Tensor | None" = None  # bi: (B,) position of the condition's first token
    attention_mask: "torch.Tensor | None" = None  # bi: (B, L) all non-padding tokens
    condition_states: "torch.Tensor | None" = None  # tri, reference: (B, Lc, d) the condition's last hidden states
    condition_mask: "torch.Tensor | None" = None  # tri, reference: (B, Lc) the condition's non-padding tokens
    weights: list = field(default_factory=list)


def _masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis restricted to `mask`; zero outside it."""
    scores = scores.masked_fill(mask == 0, torch.finfo(scores.dtype).min)
    return torch.softmax(scores, dim=-1) * mask.to(scores.dtype)


# How each non-absolute position scheme enters the attention scores, for the `router="reference"` refusal.
_POSITION_TERMS = {
    "relative": "DeBERTa's disentangled content-to-position and position-to-content terms",
    "bias": "MPNet's bucketed relative-position bias",
    "rotary": "rotary embeddings that rotate queries and keys by their positions",
}


def _check_reference_positions(config: CsrConfig) -> None:
    """`router="reference"` is defined by q . k scores and absolute positions: a ValueError on other backbones."""
    if not config.use_router or config.router != "reference":
        return
    architecture = encoder_architecture(config.backbone_config)
    if architecture.positions == "absolute":
        return
    raise ValueError(
        f"router='reference' cannot run on a {architecture.name!r} backbone: its attention scores add "
        f"{_POSITION_TERMS[architecture.positions]}, computed between positions of one sequence inside the attention "
        "module, so keys from the separately encoded condition have no defined position there, and the reference "
        "form's only positional device, numbering the sentence's absolute positions after the condition's, does not "
        "exist on it. Use router='key', 'hidden' or 'heavy', or an absolute-position backbone (BERT, RoBERTa, "
        "XLM-RoBERTa, ELECTRA, DistilBERT, ALBERT)."
    )


class CsrModel(PairzooPreTrainedModel):
    """Conditioned sentence embeddings with condition-specified routers (tri- or bi-encoder) and cosine scoring."""

    config_class = CsrConfig

    def __init__(self, config: CsrConfig) -> None:
        super().__init__(config)
        backbone = config.backbone_config
        _check_reference_positions(config)
        self.backbone = build_backbone(backbone)
        hidden = backbone.hidden_size
        n_layers = backbone.num_hidden_layers
        layers = config.router_layers if config.router_layers is not None else [n_layers - 1]
        for t in layers:
            if not 0 <= t < n_layers:
                raise ValueError(f"`router_layers` index {t} is out of range for a backbone with {n_layers} layers.")
        self.routed_layers = list(layers) if config.use_router else []
        if config.use_router and config.router == "heavy":
            self.router_query = nn.ModuleDict({str(t): nn.Linear(hidden, hidden) for t in self.routed_layers})
            self.router_key = nn.ModuleDict({str(t): nn.Linear(hidden, hidden) for t in self.routed_layers})
        dropout = config.classifier_dropout if config.classifier_dropout is not None else hidden_dropout(backbone)
        if config.tri_head == "hadamard":
            self.condition_transform = nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, hidden))
        elif config.tri_head == "concat":
            self.concat_transform = nn.Sequential(
                nn.Dropout(dropout), nn.Linear(2 * hidden, hidden), ACT2FN[hidden_activation(backbone)]
            )
        self.post_init()

    @property
    def input_format(self) -> str:
        """`tri` or `bi`: selects the collator and the pipeline's input encoding."""
        return self.config.architecture

    # ------------------------------------------------------------------------------------------ encoder pieces

    @property
    def _n_layers(self) -> int:
        return self.config.backbone_config.num_hidden_layers

    @property
    def _start_layer(self) -> int:
        """First layer whose output depends on the condition (tri-encoder); the layer count without routers."""
        return self.routed_layers[0] if self.routed_layers else self._n_layers

    def _hidden_before(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: "torch.Tensor | None",
        stop: int,
    ) -> torch.Tensor:
        """Hidden states entering layer `stop` (the backbone's own forward when `stop` is the layer count)."""
        if stop == self._n_layers:
            types = {} if token_type_ids is None else {"token_type_ids": token_type_ids}
            return self.backbone(input_ids=input_ids, attention_mask=attention_mask, **types).last_hidden_state
        stack = EncoderStack(self.backbone, attention_mask)
        return stack.forward(stack.embed(input_ids, token_type_ids), 0, stop)

    def _scale(self) -> float:
        backbone = self.config.backbone_config
        size = head_shape(backbone)[1] if self.config.router_scale == "head" else backbone.hidden_size
        return 1.0 / math.sqrt(size)

    def _condition_attention(self, t: int, hidden: torch.Tensor, route: _Route) -> torch.Tensor:
        """Layer `t`'s head-averaged attention (B, L) of the condition's first token on every token, from the layer's
        input `hidden` (bi-encoder `key` router). Where scores are q . k alone (absolute positions) it is recomputed
        from the layer's own query/key projections, as CSR always has; elsewhere the layer's own module computes it
        with its position terms (`attention_probabilities`: before dropout, in training too)."""
        if encoder_architecture(self.config.backbone_config).positions != "absolute":
            rows = route.condition_index[:, None]
            probs = attention_probabilities(self.backbone, t, hidden, route.attention_mask, rows)
            return probs[:, :, 0].mean(1)
        heads, size = head_shape(self.config.backbone_config)
        batch = hidden.shape[0]
        first = hidden[torch.arange(batch, device=hidden.device), route.condition_index]
        query = project(self.backbone, t, "query", first).view(batch, heads, 1, size)
        keys = project(self.backbone, t, "key", hidden).view(batch, -1, heads, size).transpose(1, 2)
        scores = (query @ keys.transpose(-1, -2)).squeeze(2) / math.sqrt(size)
        return _masked_softmax(scores, route.attention_mask.unsqueeze(1)).mean(1)

    def _router_weights(self, t: int, k: int, hidden: torch.Tensor, route: _Route) -> torch.Tensor:
        """w_t (B, L) of router layer `t` (the `k`-th router layer) from its input `hidden` (B, L, d)."""
        router = self.config.router
        if self.config.architecture == "bi" and router == "key":
            probs = self._condition_attention(t, hidden, route) * route.mask.to(hidden.dtype)
            return probs / probs.sum(-1, keepdim=True).clamp_min(1e-12)
        if self.config.architecture == "bi":
            rows = torch.arange(hidden.shape[0], device=hidden.device)
            query = hidden[rows, route.condition_index]
            if router == "heavy":
                query = self.router_query[str(t)](query)
        else:
            query = route.queries[:, k]
        if router == "key":
            keys = project(self.backbone, t, "key", attention_input(self.backbone, t, hidden))
        elif router == "heavy":
            keys = self.router_key[str(t)](hidden)
        else:
            keys = hidden
        scores = torch.einsum("bd,bld->bl", query, keys) * self._scale()
        return _masked_softmax(scores, route.mask)

    def _reference_attention(
        self, t: int, hidden: torch.Tensor, route: _Route, condition_states: torch.Tensor
    ) -> "tuple[torch.Tensor, torch.Tensor]":
        """Layer `t`'s self-attention over the keys/values `[condition; sentence]` (`router="reference"`), with the
        layer's own query/key/value projections and q . k scores (absolute-position backbones only);
        `condition_states` are the condition's last hidden states (`route.condition_states`, passed as the tensor
        the layer call reads).

        Returns the context (B, L, d) and the head-averaged attention of the sentence's first token on the sentence
        tokens (B, L), both from the probabilities after attention dropout, as the reference code computes them."""
        backbone = self.config.backbone_config
        heads, size = head_shape(backbone)
        batch, length, _ = hidden.shape
        memory = torch.cat([condition_states.to(hidden.dtype), hidden], dim=1)

        def split(x: torch.Tensor) -> torch.Tensor:
            return x.view(batch, x.shape[1], heads, size).transpose(1, 2)

        query = split(project(self.backbone, t, "query", hidden))
        keys, values = (split(project(self.backbone, t, which, memory)) for which in ("key", "value"))
        key_mask = torch.cat([route.condition_mask, route.mask], dim=1)[:, None, None]
        probs = _masked_softmax(query @ keys.transpose(-1, -2) / math.sqrt(size), key_mask)
        probs = nn.functional.dropout(probs, attention_dropout(backbone), self.training)
        context = (probs @ values).transpose(1, 2).reshape(batch, length, heads * size)
        return context, probs[:, :, 0, condition_states.shape[1] :].mean(1)

    def _router_layer(self, stack: EncoderStack, t: int, k: int, hidden: torch.Tensor, route: _Route) -> torch.Tensor:
        """One encoder block with the router: the attention context is re-weighted before the output projection (the
        layer runs through its own module, `EncoderStack.run_with_context`)."""

        def reweight(context: torch.Tensor, hidden: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
            weights = source  # the router weights w_t, or with `router="reference"` the condition's states
            if self.config.router == "reference":
                context, weights = self._reference_attention(t, hidden, route, source)
            if self.config.weighting == "random":
                weights = _masked_softmax(torch.randn_like(weights), route.mask)
            route.weights.append(weights)
            factor = weights if self.config.weighting == "only" else 1.0 + weights
            return context * factor.unsqueeze(-1).to(context.dtype)

        if self.config.router == "reference":
            return stack.run_with_context(t, hidden, reweight, route.condition_states)
        return stack.run_with_context(t, hidden, reweight, self._router_weights(t, k, hidden, route))

    def _reference_layer(self, stack: EncoderStack, t: int, hidden: torch.Tensor, route: _Route) -> torch.Tensor:
        """A layer outside the router layers with `router="reference"`: it attends to `[condition; sentence]`."""

        def attend(context: torch.Tensor, hidden: torch.Tensor, condition_states: torch.Tensor) -> torch.Tensor:
            return self._reference_attention(t, hidden, route, condition_states)[0]

        return stack.run_with_context(t, hidden, attend, route.condition_states)

    def _run_from(
        self,
        hidden: torch.Tensor,
        attention_mask: torch.Tensor,
        start: int,
        route: _Route,
        stack: "EncoderStack | None" = None,
    ) -> torch.Tensor:
        """Run layers `start` onward, routing in the router layers; returns the last hidden states. With
        `router="reference"` every layer also attends to the condition's states (`route.condition_states`)."""
        if start == self._n_layers:
            return hidden
        stack = stack if stack is not None else EncoderStack(self.backbone, attention_mask)
        reference = self.config.router == "reference"
        for t in range(start, self._n_layers):
            if t in self.routed_layers:
                hidden = self._router_layer(stack, t, self.routed_layers.index(t), hidden, route)
            elif reference:
                hidden = self._reference_layer(stack, t, hidden, route)
            else:
                hidden = stack.run(t, hidden)
        return stack.finish(hidden)

    # ------------------------------------------------------------------------------------------ tri-encoder

    def _condition_side(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: "torch.Tensor | None"
    ) -> "tuple[torch.Tensor, torch.Tensor]":
        """Router queries (B, T, d) and pooled condition features (B, d or 0) of a condition batch."""
        last = self._n_layers - 1
        batch = input_ids.shape[0]
        hidden_size = self.config.backbone_config.hidden_size
        needs_features = self.config.tri_head != "none"
        queries = torch.zeros(batch, 0, hidden_size, device=input_ids.device)
        features = torch.zeros(batch, 0, device=input_ids.device)
        if not self.routed_layers and not needs_features:
            return queries, features
        stack = EncoderStack(self.backbone, attention_mask)
        before_last = stack.forward(stack.embed(input_ids, token_type_ids), 0, last)
        first = before_last[:, 0]
        if self.routed_layers:
            if self.config.router == "key":
                query = project(self.backbone, last, "query", attention_input(self.backbone, last, first))
                queries = query.unsqueeze(1).expand(-1, len(self.routed_layers), -1)
            elif self.config.router == "hidden":
                queries = first.unsqueeze(1).expand(-1, len(self.routed_layers), -1)
            else:
                queries = torch.stack([self.router_query[str(t)](first) for t in self.routed_layers], dim=1)
        if needs_features:
            states = stack.finish(stack.run(last, before_last))
            features = pool_hidden_states(states, attention_mask, self.config.pooling)
        return queries, features

    def _reference_condition(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: "torch.Tensor | None"
    ) -> "tuple[torch.Tensor, torch.Tensor]":
        """`router="reference"`: the condition's last hidden states (B, Lc, d), the keys/values every sentence layer
        reads, and its pooled features (B, d or 0) for the tri-encoder heads."""
        states = self._hidden_before(input_ids, attention_mask, token_type_ids, self._n_layers)
        if self.config.tri_head == "none":
            return states, torch.zeros(input_ids.shape[0], 0, device=input_ids.device)
        return states, pool_hidden_states(states, attention_mask, self.config.pooling)

    def _positions_after(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, offset: torch.Tensor
    ) -> torch.Tensor:
        """Position ids (B, L) of sentences that follow `offset` (B,) condition tokens, in the backbone's numbering
        (RoBERTa family: from `padding_idx + 1`, padding at `padding_idx`; the others: from 0, padding at 0)."""
        positions = position_ids_after(self.backbone, input_ids, attention_mask, offset)
        limit = self.config.backbone_config.max_position_embeddings
        if not capturing_graph() and int(positions.max()) >= limit:
            raise ValueError(
                f"router='reference' places each sentence after its condition, and a sentence and its condition "
                f"together need position {int(positions.max())} of a backbone with {limit} position embeddings; "
                "shorten the texts (max_length)."
            )
        return positions

    def _tri_head(self, embeddings: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
        """The C-STS tri-encoder fusion of a sentence embedding with its condition embedding."""
        if self.config.tri_head == "hadamard":
            return embeddings * self.condition_transform(features)
        if self.config.tri_head == "concat":
            return self.concat_transform(torch.cat([embeddings, features], dim=-1))
        return embeddings

    def _tri_sentence(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: "torch.Tensor | None",
        queries: torch.Tensor,
        features: torch.Tensor,
        condition_mask: "torch.Tensor | None" = None,
    ) -> "tuple[torch.Tensor, list[torch.Tensor]]":
        """Embedding of a sentence batch and its router weights. `queries`: the router queries (B, T, d), with
        `router="reference"` the condition's last hidden states (B, Lc, d) whose padding `condition_mask` marks."""
        if self.config.router == "reference":
            stack = EncoderStack(self.backbone, attention_mask)
            positions = self._positions_after(input_ids, attention_mask, condition_mask.sum(1))
            hidden = stack.embed(input_ids, token_type_ids, positions)
            route = _Route(mask=attention_mask, condition_states=queries, condition_mask=condition_mask)
            hidden = self._run_from(hidden, attention_mask, 0, route, stack)
        else:
            start = self._start_layer
            hidden = self._hidden_before(input_ids, attention_mask, token_type_ids, start)
            route = _Route(mask=attention_mask, queries=queries)
            hidden = self._run_from(hidden, attention_mask, start, route)
        embeddings = pool_hidden_states(hidden, attention_mask, self.config.pooling)
        return self._tri_head(embeddings, features), route.weights

    # ------------------------------------------------------------------------------------------ bi-encoder

    def _bi_sentence(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        token_type_ids: "torch.Tensor | None",
        sentence_mask: torch.Tensor,
        condition_mask: torch.Tensor,
    ) -> "tuple[torch.Tensor, list[torch.Tensor]]":
        if sentence_mask is None or condition_mask is None:
            raise ValueError(
                "the bi-encoder needs `sentence_mask` and `condition_mask` (use `encode_bi_inputs`, which builds "
                "`[CLS] s SEP c SEP` with both masks)."
            )
        pool_mask = sentence_mask
        if self.config.bi_pooling == "all":  # the c-sts form: the tokenizer's pair token types, every token pooled
            pool_mask = attention_mask
            if token_type_ids is None and getattr(self.config.backbone_config, "type_vocab_size", 1) > 1:
                token_type_ids = condition_mask.long()
        route = _Route(
            mask=sentence_mask,
            condition_index=condition_mask.long().argmax(1),
            attention_mask=attention_mask,
        )
        if self.routed_layers:
            stack = EncoderStack(self.backbone, attention_mask)
            hidden = self._run_from(stack.embed(input_ids, token_type_ids), attention_mask, 0, route, stack)
        else:
            hidden = self._hidden_before(input_ids, attention_mask, token_type_ids, self._n_layers)
        return pool_hidden_states(hidden, pool_mask, self.config.pooling), route.weights

    # ------------------------------------------------------------------------------------------ forward

    def check_inputs(self, inputs: dict) -> None:
        """The shared value checks (`PairzooPreTrainedModel.check_inputs`), and for the bi-encoder at least one
        condition token in every row of `condition_mask` / `condition_mask_2` (`encode_bi_inputs` always gives one)."""
        super().check_inputs(inputs)
        if self.config.architecture != "bi":
            return
        for name in ("condition_mask", "condition_mask_2"):
            mask = inputs.get(name)
            if isinstance(mask, torch.Tensor) and not bool((mask.sum(1) > 0).all()):
                raise ValueError(f"every bi-encoder row needs at least one condition token in `{name}`.")

    @can_return_tuple
    def forward(
        self,
        input_ids: "torch.LongTensor | None" = None,
        attention_mask: "torch.LongTensor | None" = None,
        token_type_ids: "torch.LongTensor | None" = None,
        input_ids_2: "torch.LongTensor | None" = None,
        attention_mask_2: "torch.LongTensor | None" = None,
        token_type_ids_2: "torch.LongTensor | None" = None,
        input_ids_3: "torch.LongTensor | None" = None,
        attention_mask_3: "torch.LongTensor | None" = None,
        token_type_ids_3: "torch.LongTensor | None" = None,
        sentence_mask: "torch.LongTensor | None" = None,
        condition_mask: "torch.LongTensor | None" = None,
        sentence_mask_2: "torch.LongTensor | None" = None,
        condition_mask_2: "torch.LongTensor | None" = None,
        labels: "torch.Tensor | None" = None,
        output_internals: bool = False,
    ) -> CsrOutput:
        r"""
        Args:
            input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): tri: the first sentence alone;
                bi: `[CLS] s1 SEP c SEP`. Built by `pairzoo.pipelines.encode_tri_inputs` / `encode_bi_inputs`.
            attention_mask (`torch.LongTensor` of shape `(batch_size, sequence_length)`): 1 for tokens, 0 for padding.
            input_ids_2, attention_mask_2 (*optional*): the same for the second sentence; without them only
                `embeddings` is returned.
            input_ids_3, attention_mask_3 (tri): the condition alone.
            sentence_mask, condition_mask, sentence_mask_2, condition_mask_2 (bi): spans of the sentence
                (`[CLS] s SEP`) and of the condition (`c SEP`) in each sequence.
            labels (`torch.Tensor` of shape `(batch_size,)`, *optional*): similarity on the label scale.
            output_internals (`bool`, *optional*, defaults to `False`): also return the method's internals: `w_t` per
                router layer and the tokens it is defined on.
        """
        if input_ids is None:
            raise ValueError("`input_ids` is required.")
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        if input_ids_2 is not None and attention_mask_2 is None:
            attention_mask_2 = torch.ones_like(input_ids_2)
        second = input_ids_2 is not None
        if self.config.architecture == "tri":
            needs_condition = bool(self.routed_layers) or self.config.tri_head != "none"
            if input_ids_3 is None and needs_condition:
                raise ValueError("the tri-encoder needs the condition as `input_ids_3` / `attention_mask_3`.")
            if input_ids_3 is not None:
                if attention_mask_3 is None:
                    attention_mask_3 = torch.ones_like(input_ids_3)
                side = self._reference_condition if self.config.router == "reference" else self._condition_side
                queries, features = side(input_ids_3, attention_mask_3, token_type_ids_3)
            else:
                queries = features = None
            emb1, w1 = self._tri_sentence(
                input_ids, attention_mask, token_type_ids, queries, features, attention_mask_3
            )
            emb2, w2 = (
                self._tri_sentence(
                    input_ids_2, attention_mask_2, token_type_ids_2, queries, features, attention_mask_3
                )
                if second
                else (None, None)
            )
            mask1, mask2 = attention_mask, attention_mask_2
        else:
            emb1, w1 = self._bi_sentence(input_ids, attention_mask, token_type_ids, sentence_mask, condition_mask)
            emb2, w2 = (
                self._bi_sentence(input_ids_2, attention_mask_2, token_type_ids_2, sentence_mask_2, condition_mask_2)
                if second
                else (None, None)
            )
            mask1, mask2 = sentence_mask, sentence_mask_2
        loss = logits = scores = None
        if second:
            similarity = nn.functional.cosine_similarity(emb1, emb2, dim=-1)
            span = self.config.label_max - self.config.label_min
            # float32 at least, as the other families' scores
            scores = self.config.label_min + span * similarity.to(torch.promote_types(similarity.dtype, torch.float32))
            logits = similarity.unsqueeze(-1)
            if labels is not None:
                target = (labels.reshape(similarity.shape).to(similarity.dtype) - self.config.label_min) / span
                loss = nn.functional.mse_loss(similarity, target)
        elif labels is not None:
            raise ValueError("`labels` need a second sentence (`input_ids_2`) to score against.")
        router = bool(output_internals) and bool(self.routed_layers)
        return CsrOutput(
            loss=loss,
            logits=logits,
            scores=scores,
            embeddings=emb1,
            embeddings_2=emb2,
            router_weights=tuple(w1) if router else None,
            router_weights_2=tuple(w2) if router and second else None,
            router_mask=mask1 if router else None,
            router_mask_2=mask2 if router and second else None,
        )

    def embed_plain(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: "torch.Tensor | None" = None
    ) -> torch.Tensor:
        """(B, d) embedding of texts without a condition (the backbone's pooled output; e.g. KG tail entities)."""
        hidden = self._hidden_before(input_ids, attention_mask, token_type_ids, self._n_layers)
        return pool_hidden_states(hidden, attention_mask, self.config.pooling)

    # ------------------------------------------------------------------------------------------ caching

    def _fingerprint(self) -> str:
        """A cheap fingerprint of the model's weights (strided samples of every parameter, the backbone's and the
        routers' alike), to tell models apart."""
        totals = []
        with torch.no_grad():
            for param in self.parameters():
                flat = param.detach().reshape(-1)
                sample = flat[:: max(1, flat.numel() // 512)].double().cpu()
                position = torch.arange(1, sample.numel() + 1, dtype=torch.float64)
                totals += [sample.sum(), (sample * position).sum()]
        values = torch.stack(totals)
        position = torch.arange(1, values.numel() + 1, dtype=torch.float64)
        return f"{values.sum().item():.10e}/{(values * position).sum().item():.10e}"

    def _cache_metadata(self, kind: str, tokenizer=None) -> "dict[str, str]":
        """What identifies the model that builds a `kind` cache and, given the `tokenizer` that read its texts, that
        tokenizer (`tokenizer`: its class and source; `tokenizer_fingerprint`: see `tokenizer_fingerprint`)."""
        metadata = {
            "kind": kind,
            "model_type": self.config.model_type,
            "backbone": str(getattr(self.config.backbone_config, "name_or_path", "") or ""),
            "weights_fingerprint": self._fingerprint(),
            "router_layers": ",".join(str(t) for t in self.routed_layers),
            "router": self.config.router,
            "tri_head": self.config.tri_head,
            "pooling": self.config.pooling,
        }
        if tokenizer is not None:
            metadata["tokenizer"] = _tokenizer_name(tokenizer)
            metadata["tokenizer_fingerprint"] = tokenizer_fingerprint(tokenizer)
        return metadata

    def _check_cache(self, cache, kind: str, cls: type, expected: "dict[str, str]") -> None:
        if not isinstance(cache, cls):
            raise ValueError(f"expected a {cls.__name__}, got {type(cache).__name__}.")
        if len(cache) == 0:
            raise ValueError(f"the {kind} cache is empty.")
        metadata = cache.metadata or {}
        if metadata.get("kind") != kind:
            raise ValueError(f"this is a {metadata.get('kind')!r} cache, not a {kind!r} cache.")
        for key, value in expected.items():
            if key == "kind":
                continue
            if metadata.get(key) != value:
                what = {"weights_fingerprint": "weights"}.get(key, key)
                raise ValueError(
                    f"the {kind} cache was built by a different model: {what} {metadata.get(key)!r} != {value!r} of "
                    "this model; rebuild the cache with this model."
                )
        if not metadata.get("tokenizer_fingerprint"):
            raise ValueError(
                f"the {kind} cache records no tokenizer_fingerprint (it was built before caches recorded their "
                f"tokenizer), so the tokenizer that read its texts cannot be checked; rebuild it with "
                f"`encode_{kind}s`."
            )

    @staticmethod
    def _check_same_tokenizer(sentences: SentenceCache, conditions: ConditionCache) -> None:
        """A sentence cache and a condition cache whose texts different tokenizers read are a ValueError naming both
        tokenizers (their ids would be read as the same vocabulary's: wrong embeddings, no error)."""
        fingerprints = [cache.metadata["tokenizer_fingerprint"] for cache in (sentences, conditions)]
        if fingerprints[0] != fingerprints[1]:
            sources = [
                f"{kind} cache by {cache.metadata.get('tokenizer', 'an unnamed tokenizer')} "
                f"(tokenizer_fingerprint {fingerprint[:12]})"
                for kind, cache, fingerprint in zip(("sentence", "condition"), (sentences, conditions), fingerprints)
            ]
            raise ValueError(
                f"the sentence cache and the condition cache were tokenised by different tokenizers: {sources[0]}, "
                f"{sources[1]}; encode both with the model's own tokenizer."
            )

    def _require_tri(self) -> None:
        if self.config.architecture != "tri":
            raise ValueError("caching needs architecture='tri': the bi-encoder reads sentence and condition together.")
        if self.config.router == "reference":
            raise ValueError(
                "caching is not available with router='reference': every layer of its sentence pass attends to the "
                "condition and its positions follow the condition, so no part of it can be cached."
            )

    @staticmethod
    def _texts(texts, field: str) -> "list[str]":
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise ValueError(f"`{field}` is empty: give at least one text.")
        for i, text in enumerate(texts):
            if not isinstance(text, str) or not text.strip():
                raise ValueError(f"`{field}`[{i}] must be a non-empty string, got {text!r}.")
        return texts

    def _length_sorted_batches(
        self, texts: "list[str]", tokenizer, max_length: "int | None", batch_size: int
    ) -> "tuple[list[int], list[dict]]":
        """Tokenise `texts` in batches of similar length (longest first, as sentence-transformers does, so batches pad
        less) with right padding whatever the tokenizer's `padding_side` (the cache and the router read valid tokens
        as a prefix). `max_length=None` is the limit the forward path uses: the tokenizer's, capped by the position
        embeddings, so cached and uncached embeddings agree for long texts. Returns the order and the batches."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive integer, got {batch_size!r}.")
        limit = self.config.backbone_max_length()
        if max_length is None:
            max_length = (
                int(tokenizer.model_max_length) if limit is None else min(int(tokenizer.model_max_length), limit)
            )
        elif isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise ValueError(f"`max_length` must be a positive integer or None, got {max_length!r}.")
        elif limit is not None and max_length > limit:
            raise ValueError(
                f"`max_length` must be at most {limit} (the backbone's positions) or None, got {max_length}."
            )
        lengths = [len(ids) for ids in tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]]
        order = sorted(range(len(texts)), key=lambda i: -lengths[i])
        batches = [
            tokenizer(
                [texts[i] for i in order[start : start + batch_size]],
                truncation=True,
                max_length=max_length,
                padding=True,
                padding_side="right",
                return_tensors="pt",
            )
            for start in range(0, len(texts), batch_size)
        ]
        return order, batches

    @staticmethod
    def _restore_order(order: "list[int]", values: torch.Tensor) -> torch.Tensor:
        """Rows of `values` (in `order`) back in the callers' order."""
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order)] = torch.arange(len(order))
        return values[inverse.to(values.device)]

    @torch.no_grad()
    def encode_conditions(
        self, texts: "list[str]", tokenizer, max_length: "int | None" = None, batch_size: int = 64
    ) -> ConditionCache:
        """Encode conditions once (tokenised with `tokenizer`, the backbone's); reuse with any sentence cache.
        `max_length=None`: the forward path's limit (see `_length_sorted_batches`)."""
        self._require_tri()
        texts = self._texts(texts, "texts")
        order, batches = self._length_sorted_batches(texts, tokenizer, max_length, batch_size)
        metadata = self._cache_metadata("condition", tokenizer)
        queries, features = [], []
        for batch in batches:
            q, f = self._condition_side(
                batch["input_ids"].to(self.device), batch["attention_mask"].to(self.device), None
            )
            queries.append(q.contiguous())
            features.append(f)
        queries, features = (self._restore_order(order, torch.cat(t)) for t in (queries, features))
        return ConditionCache(queries.contiguous(), features.contiguous(), metadata)

    @torch.no_grad()
    def encode_sentences(
        self, texts: "list[str]", tokenizer, max_length: "int | None" = None, batch_size: int = 64
    ) -> SentenceCache:
        """Encode sentences once up to the first router layer (tokenised with `tokenizer`, the backbone's).
        `max_length=None`: the forward path's limit (see `_length_sorted_batches`)."""
        self._require_tri()
        texts = self._texts(texts, "texts")
        order, batches = self._length_sorted_batches(texts, tokenizer, max_length, batch_size)
        metadata = self._cache_metadata("sentence", tokenizer)
        hidden, masks = [], []
        for batch in batches:
            mask = batch["attention_mask"].to(self.device)
            hidden.append(self._hidden_before(batch["input_ids"].to(self.device), mask, None, self._start_layer))
            masks.append(mask)
        width = max(m.shape[1] for m in masks)
        hidden = torch.cat([nn.functional.pad(h, (0, 0, 0, width - h.shape[1])) for h in hidden])
        masks = torch.cat([nn.functional.pad(m, (0, width - m.shape[1])) for m in masks])
        hidden, masks = self._restore_order(order, hidden), self._restore_order(order, masks)
        return SentenceCache(hidden.contiguous(), masks.contiguous(), metadata)

    @torch.no_grad()
    def embed(self, sentences: SentenceCache, conditions: ConditionCache, batch_size: int = 256) -> torch.Tensor:
        """Conditioned embeddings (num_sentences, num_conditions, hidden) of every (sentence, condition) pair.

        Only the layers from the first router layer onward run, `batch_size` pairs at a time. Caches built by another
        model, read by different tokenizers (their `tokenizer_fingerprint`s differ) or recording no tokenizer (saved
        before caches recorded it) are a ValueError naming what differs or is missing.
        """
        self._require_tri()
        expected = self._cache_metadata("sentence")
        self._check_cache(sentences, "sentence", SentenceCache, expected)
        self._check_cache(conditions, "condition", ConditionCache, {**expected, "kind": "condition"})
        self._check_same_tokenizer(sentences, conditions)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"`batch_size` must be a positive integer, got {batch_size!r}.")
        n_s, n_c = len(sentences), len(conditions)
        hidden_all = sentences.hidden_states.to(self.device, self.dtype)
        mask_all = sentences.attention_mask.to(self.device)
        if bool((mask_all[:, 1:] > mask_all[:, :-1]).any()) or bool((mask_all[:, 0] == 0).any()):
            raise ValueError(
                "the sentence cache's attention_mask is not right-padded (each row must be its valid tokens, then "
                "padding); build it with `encode_sentences`, which pads on the right whatever the tokenizer's side."
            )
        queries_all = conditions.queries.to(self.device, self.dtype)
        features_all = conditions.features.to(self.device, self.dtype)
        out = torch.empty(n_s * n_c, self.config.backbone_config.hidden_size, device=self.device, dtype=self.dtype)
        pairs = torch.arange(n_s * n_c, device=self.device)
        for i in range(0, n_s * n_c, batch_size):
            index = pairs[i : i + batch_size]
            s, c = index // n_c, index % n_c
            mask = mask_all[s]
            width = int(mask.sum(1).max())
            mask = mask[:, :width]
            route = _Route(mask=mask, queries=queries_all[c])
            hidden = self._run_from(hidden_all[s, :width], mask, self._start_layer, route)
            embeddings = pool_hidden_states(hidden, mask, self.config.pooling)
            out[i : i + len(index)] = self._tri_head(embeddings, features_all[c])
        return out.view(n_s, n_c, -1)


__all__ = ["ConditionCache", "CsrModel", "CsrOutput", "SentenceCache", "tokenizer_fingerprint"]

"""The one place that knows each encoder architecture pairzoo methods run on.

Methods never reach into a backbone's modules themselves: they ask `encoder_architecture(config)` for the entry of
its `model_type` and go through `EncoderStack`, which embeds, runs a layer with that architecture's own position
information (absolute embeddings, DeBERTa's relative embeddings, MPNet's position bias, ModernBERT's rotary
embeddings and sliding-window masks) and exposes each layer's attention projections and attention-output
projection. A new architecture is one `EncoderArchitecture` entry below plus its row in the test matrix.

Hub exports inline this module into each exported modeling file, so it imports torch and transformers only.
"""

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn
from transformers import PreTrainedConfig, PreTrainedModel
from transformers.masking_utils import create_bidirectional_mask, create_bidirectional_sliding_window_mask

# How position information enters attention scores: `absolute` (added to the embeddings, so the scores are q . k
# alone), `relative` (DeBERTa's disentangled terms), `bias` (MPNet's bucketed bias), `rotary` (ModernBERT).
POSITION_KINDS = ("absolute", "relative", "bias", "rotary")


@dataclass(frozen=True)
class EncoderArchitecture:
    """What pairzoo needs to know about one encoder architecture (paths are attribute paths, dots between names).

    Args:
        model_types: the `config.model_type` values this entry covers.
        layers: path from the backbone to its list of layers (ALBERT's shared layers are expanded by `layer_list`).
        attention: path from a layer to its self-attention module (the one holding the query/key/value projections).
        projections: names of the query, key and value projections on that module; one name for a fused projection.
        output_projection: path from a layer to the linear map applied to the attention context (heads concatenated).
        positions: one of `POSITION_KINDS`.
        dropout: config fields for the hidden dropout, the first present is used.
        activation: config fields for the hidden activation, the first present is used.
        post_norm: whether a layer ends in LayerNorm(attention output + input) before its feed-forward block (BERT's
            post-LN layout) rather than normalising before attention (pre-LN, ModernBERT).
    """

    model_types: "tuple[str, ...]"
    layers: str
    attention: str
    projections: "tuple[str, ...]"
    output_projection: str
    positions: str = "absolute"
    dropout: "tuple[str, ...]" = ("hidden_dropout_prob",)
    activation: "tuple[str, ...]" = ("hidden_act",)
    post_norm: bool = True

    @property
    def name(self) -> str:
        return self.model_types[0]


_BERT_LIKE = dict(
    layers="encoder.layer",
    attention="attention.self",
    projections=("query", "key", "value"),
    output_projection="attention.output.dense",
)
ENCODER_ARCHITECTURES: "tuple[EncoderArchitecture, ...]" = (
    EncoderArchitecture(("bert",), **_BERT_LIKE),
    EncoderArchitecture(("roberta", "xlm-roberta", "camembert"), **_BERT_LIKE),
    EncoderArchitecture(("electra",), **_BERT_LIKE),
    EncoderArchitecture(
        ("deberta-v2",),
        layers="encoder.layer",
        attention="attention.self",
        projections=("query_proj", "key_proj", "value_proj"),
        output_projection="attention.output.dense",
        positions="relative",
    ),
    EncoderArchitecture(
        ("mpnet",),
        layers="encoder.layer",
        attention="attention.attn",
        projections=("q", "k", "v"),
        output_projection="attention.attn.o",
        positions="bias",
    ),
    EncoderArchitecture(
        ("distilbert",),
        layers="transformer.layer",
        attention="attention",
        projections=("q_lin", "k_lin", "v_lin"),
        output_projection="attention.out_lin",
        dropout=("dropout",),
        activation=("activation",),
    ),
    EncoderArchitecture(
        ("modernbert",),
        layers="layers",
        attention="attn",
        projections=("Wqkv",),
        output_projection="attn.Wo",
        positions="rotary",
        dropout=("mlp_dropout",),
        activation=("hidden_activation",),
        post_norm=False,
    ),
    EncoderArchitecture(
        ("albert",),
        layers="encoder.albert_layer_groups",
        attention="attention",
        projections=("query", "key", "value"),
        output_projection="attention.dense",
    ),
)


def capturing_graph() -> bool:
    """Whether the forward is being captured into a graph (`torch.export`, which torch's default ONNX exporter uses,
    or `torch.compile`): checks and shortcuts that read tensor values are skipped there, as a graph cannot branch on
    them; the same checks still run where inputs enter (collators, pipelines, `check_inputs`)."""
    return torch.compiler.is_compiling()


def encoder_architecture(config: PreTrainedConfig) -> EncoderArchitecture:
    """The entry of a backbone config's `model_type`; an architecture without one is a ValueError naming it."""
    model_type = getattr(config, "model_type", None)
    for architecture in ENCODER_ARCHITECTURES:
        if model_type in architecture.model_types:
            return architecture
    known = sorted(t for a in ENCODER_ARCHITECTURES for t in a.model_types)
    raise ValueError(
        f"backbone architecture {model_type!r} is not supported by pairzoo methods (they run inside the encoder's "
        f"layers, which pairzoo knows for {known})."
    )


def _config_value(config: PreTrainedConfig, names: "tuple[str, ...]", what: str):
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    raise ValueError(f"backbone config ({config.model_type!r}) has no {what} field ({', '.join(names)}).")


def hidden_dropout(config: PreTrainedConfig) -> float:
    """The backbone's hidden-state dropout probability (BERT's `hidden_dropout_prob` or its architecture's name)."""
    return float(_config_value(config, encoder_architecture(config).dropout, "hidden dropout"))


def hidden_activation(config: PreTrainedConfig) -> str:
    """The backbone's hidden activation name (BERT's `hidden_act` or its architecture's name)."""
    return _config_value(config, encoder_architecture(config).activation, "activation")


def _path(module: nn.Module, path: str) -> nn.Module:
    for name in path.split("."):
        module = getattr(module, name)
    return module


def layer_list(backbone: PreTrainedModel) -> "list[nn.Module]":
    """The backbone's layers in the order they run, one per depth (ALBERT's shared layers repeated)."""
    config = backbone.config
    if config.model_type == "albert":
        groups = _path(backbone, "encoder.albert_layer_groups")
        per_group = config.num_hidden_layers / config.num_hidden_groups
        return [
            inner
            for depth in range(config.num_hidden_layers)
            for inner in groups[int(depth / per_group)].albert_layers
        ]
    return list(_path(backbone, encoder_architecture(config).layers))


def attention_module(backbone: PreTrainedModel, index: int) -> nn.Module:
    """Self-attention module of layer `index` (the one holding its query/key/value projections)."""
    return _path(layer_list(backbone)[index], encoder_architecture(backbone.config).attention)


def output_projection(backbone: PreTrainedModel, index: int) -> nn.Linear:
    """The linear map layer `index` applies to its attention context (B, L, heads x head size): hook its input to
    change the context while the layer itself does everything else (residual, norms, feed-forward)."""
    return _path(layer_list(backbone)[index], encoder_architecture(backbone.config).output_projection)


def head_shape(config: PreTrainedConfig) -> "tuple[int, int]":
    """(number of heads, head size) of the backbone's attention."""
    heads = config.num_attention_heads
    return heads, config.hidden_size // heads


def project(backbone: PreTrainedModel, index: int, which: str, hidden: torch.Tensor) -> torch.Tensor:
    """Layer `index`'s `which` ("query", "key" or "value") projection of `hidden` (..., d) -> (..., heads x size),
    before any position term (rotary or relative) the architecture adds inside its attention."""
    architecture = encoder_architecture(backbone.config)
    attention = attention_module(backbone, index)
    position = ("query", "key", "value").index(which)
    if len(architecture.projections) == 1:  # fused query/key/value (ModernBERT)
        fused = getattr(attention, architecture.projections[0])(hidden)
        return fused.unflatten(-1, (3, -1)).select(-2, position)
    return getattr(attention, architecture.projections[position])(hidden)


def projection_modules(backbone: PreTrainedModel, index: int) -> "tuple[nn.Linear, ...]":
    """The projection modules of layer `index` (three, or one fused), for copying their weights."""
    attention = attention_module(backbone, index)
    return tuple(getattr(attention, name) for name in encoder_architecture(backbone.config).projections)


def word_embeddings(backbone: PreTrainedModel) -> nn.Embedding:
    """The token-embedding matrix (transformers' `get_input_embeddings`)."""
    return backbone.get_input_embeddings()


@contextmanager
def eager_attention(backbone: PreTrainedModel):
    """Run the backbone's attention with the eager implementation inside the block, so attention modules return
    their probabilities; the configured implementation is restored afterwards."""
    config = backbone.config
    saved = config._attn_implementation
    config._attn_implementation = "eager"
    try:
        yield
    finally:
        config._attn_implementation = saved


class EncoderStack:
    """Runs a backbone's layers one at a time, each with its architecture's position information.

    Built once per forward for one batch: `embed` gives the hidden states entering layer 0, `run(index, hidden)`
    applies layer `index` (through the architecture's own module), `finish(hidden)` applies what follows the last
    layer (ModernBERT's final norm), so `finish(run(n-1, ... run(0, embed(ids))))` equals the backbone's
    `last_hidden_state`.
    """

    def __init__(
        self,
        backbone: PreTrainedModel,
        attention_mask: torch.Tensor,
        position_ids: "torch.LongTensor | None" = None,
    ) -> None:
        self.backbone = backbone
        self.config = backbone.config
        self.architecture = encoder_architecture(self.config)
        self.layers = layer_list(backbone)
        self.attention_mask = attention_mask
        self.position_ids = position_ids
        self._prepared: dict | None = None

    def __len__(self) -> int:
        return len(self.layers)

    def embed(
        self,
        input_ids: torch.LongTensor,
        token_type_ids: "torch.LongTensor | None" = None,
        position_ids: "torch.LongTensor | None" = None,
    ) -> torch.Tensor:
        """Hidden states entering layer 0, with the architecture's embedding projection (ELECTRA-small, ALBERT)."""
        backbone, model_type = self.backbone, self.config.model_type
        embeddings = backbone.embeddings
        if position_ids is not None:
            self.position_ids = position_ids
        if model_type == "distilbert":
            return embeddings(input_ids, None, position_ids)
        if model_type == "mpnet":
            return embeddings(input_ids=input_ids, position_ids=position_ids)
        if model_type == "modernbert":
            return embeddings(input_ids=input_ids)
        kwargs = dict(input_ids=input_ids, token_type_ids=token_type_ids, position_ids=position_ids)
        if model_type == "deberta-v2":
            kwargs["mask"] = self.attention_mask
        hidden = embeddings(**kwargs)
        if model_type == "albert":
            return backbone.encoder.embedding_hidden_mapping_in(hidden)
        project_in = getattr(backbone, "embeddings_project", None)  # ELECTRA with embedding_size != hidden_size
        return project_in(hidden) if project_in is not None else hidden

    def _layer_kwargs(self, index: int, hidden: torch.Tensor) -> dict:
        """Keyword arguments (mask, position information) of layer `index`, prepared once from `hidden`."""
        if self._prepared is None:
            self._prepared = self._prepare(hidden)
        prepared = self._prepared
        if self.architecture.positions == "rotary":
            kind = self.layers[index].attention_type
            return {"attention_mask": prepared["masks"][kind], "position_embeddings": prepared["rotary"][kind]}
        return prepared

    def _prepare(self, hidden: torch.Tensor) -> dict:
        backbone, config, mask = self.backbone, self.config, self.attention_mask
        positions = self.architecture.positions
        if positions == "relative":
            encoder = backbone.encoder
            return {
                "attention_mask": encoder.get_attention_mask(mask),
                "relative_pos": encoder.get_rel_pos(hidden),
                "rel_embeddings": encoder.get_rel_embedding(),
            }
        full = create_bidirectional_mask(config=config, inputs_embeds=hidden, attention_mask=mask)
        if positions == "bias":
            return {"attention_mask": full, "position_bias": backbone.encoder.compute_position_bias(hidden)}
        if positions == "rotary":
            position_ids = self.position_ids
            if position_ids is None:
                position_ids = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
            sliding = create_bidirectional_sliding_window_mask(
                config=config, inputs_embeds=hidden, attention_mask=mask
            )
            kinds = set(config.layer_types)
            return {
                "masks": {"full_attention": full, "sliding_attention": sliding},
                "rotary": {kind: backbone.rotary_emb(hidden, position_ids, kind) for kind in kinds},
            }
        return {"attention_mask": full}

    def run(self, index: int, hidden: torch.Tensor) -> torch.Tensor:
        """Layer `index` on `hidden` (B, L, d) -> (B, L, d) (after layer 0, DeBERTa-v2's convolution where the
        checkpoint has one, as its encoder applies it)."""
        out = self.layers[index](hidden, **self._layer_kwargs(index, hidden))
        out = out[0] if isinstance(out, tuple) else out
        convolution = getattr(getattr(self.backbone, "encoder", None), "conv", None)
        if index == 0 and convolution is not None:
            out = convolution(hidden, out, self.attention_mask)
        return out

    def run_with_context(
        self, index: int, hidden: torch.Tensor, change_context: "Callable[..., torch.Tensor]", *tensors: torch.Tensor
    ) -> torch.Tensor:
        """`run(index, hidden)` with the layer's attention context, the input of its output projection
        (`output_projection`), replaced by `change_context(context, hidden, *tensors)`, through a forward pre-hook
        held for this call only (ALBERT shares one layer across depths). `tensors` are the tensors it reads besides
        the context and the layer input.

        Under the layer's gradient checkpointing (`gradient_checkpointing_enable()`, in training with gradients on),
        the hooked layer is checkpointed as one call of the layer's checkpoint function, its own checkpointing off
        inside, so the recomputation in the backward pass runs the hook too (the layer's own checkpoint would
        recompute it without the hook); `hidden` and `tensors` are that call's inputs, so reentrant checkpointing
        differentiates them as well."""
        layer = self.layers[index]
        projection = output_projection(self.backbone, index)
        self._layer_kwargs(index, hidden)  # prepared outside the checkpoint: later layers reuse what it computes
        checkpointed = getattr(layer, "gradient_checkpointing", False) and layer.training and torch.is_grad_enabled()

        def hooked(hidden: torch.Tensor, *tensors: torch.Tensor) -> torch.Tensor:
            def hook(module: nn.Module, args: tuple) -> tuple:
                return (change_context(args[0], hidden, *tensors), *args[1:])

            handle = projection.register_forward_pre_hook(hook)
            if checkpointed:
                layer.gradient_checkpointing = False
            try:
                return self.run(index, hidden)
            finally:
                if checkpointed:
                    layer.gradient_checkpointing = True
                handle.remove()

        if checkpointed:
            return layer._gradient_checkpointing_func(hooked, hidden, *tensors)
        return hooked(hidden, *tensors)

    def finish(self, hidden: torch.Tensor) -> torch.Tensor:
        """What follows the last layer: ModernBERT's final norm; nothing elsewhere."""
        final_norm = getattr(self.backbone, "final_norm", None)
        return final_norm(hidden) if final_norm is not None else hidden

    def forward(self, hidden: torch.Tensor, start: int = 0, stop: "int | None" = None) -> torch.Tensor:
        """Run layers `start` to `stop` (default: the last, then `finish`)."""
        end = len(self.layers) if stop is None else stop
        for index in range(start, end):
            hidden = self.run(index, hidden)
        return self.finish(hidden) if stop is None else hidden


@contextmanager
def _evaluation_mode(module: nn.Module):
    """`module` in evaluation mode inside the block (no dropout), each submodule's mode restored afterwards."""
    modes = [(child, child.training) for child in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for child, training in modes:
            child.training = training


def attention_probabilities(
    backbone: PreTrainedModel,
    index: int,
    layer_input: torch.Tensor,
    attention_mask: torch.Tensor,
    query_positions: "torch.LongTensor | None" = None,
) -> torch.Tensor:
    """Post-softmax, pre-dropout attention probabilities (B, H, L, L) of layer `index`, under any attention
    implementation and in training mode too; with `query_positions` (B, R) only those rows: (B, H, R, L). The rows
    of non-padding queries give padding keys zero probability.

    Where scores are q . k alone (absolute positions) they are recomputed from `layer_input` (the hidden states
    entering the layer) with the layer's own query/key projections, computing only the rows asked for. Elsewhere
    (relative, bias and rotary positions) the layer runs once through its own module, with eager attention (masks
    included) and without dropout, and its attention module's probabilities are read.
    """
    config = backbone.config
    if encoder_architecture(config).positions != "absolute":
        layer = layer_list(backbone)[index]
        captured: list = []
        attention = _path(layer, encoder_architecture(config).attention)
        handle = attention.register_forward_hook(lambda module, args, out: captured.append(out[1]))
        try:
            with eager_attention(backbone), _evaluation_mode(layer):
                stack = EncoderStack(backbone, attention_mask)
                layer(layer_input, output_attentions=True, **stack._layer_kwargs(index, layer_input))
        finally:
            handle.remove()
        probabilities = captured[-1]
        if query_positions is None:
            return probabilities
        rows = query_positions[:, None, :, None].expand(-1, probabilities.shape[1], -1, probabilities.shape[-1])
        return probabilities.gather(2, rows)
    heads, size = head_shape(config)
    queries = layer_input
    if query_positions is not None:
        queries = layer_input.gather(1, query_positions[:, :, None].expand(-1, -1, layer_input.shape[-1]))
    query = project(backbone, index, "query", queries).view(*queries.shape[:2], heads, size).transpose(1, 2)
    key = project(backbone, index, "key", layer_input).view(*layer_input.shape[:2], heads, size).transpose(1, 2)
    scores = torch.matmul(query, key.transpose(2, 3)) * size**-0.5
    keep = attention_mask[:, None, None, :].bool()
    return scores.masked_fill(~keep, torch.finfo(scores.dtype).min).softmax(-1)


def attention_dropout(config: PreTrainedConfig) -> float:
    """The backbone's dropout on attention probabilities (BERT's `attention_probs_dropout_prob`, DistilBERT's and
    ModernBERT's `attention_dropout`)."""
    return float(_config_value(config, ("attention_probs_dropout_prob", "attention_dropout"), "attention dropout"))


def attention_input(backbone: PreTrainedModel, index: int, hidden: torch.Tensor) -> torch.Tensor:
    """What layer `index`'s query/key/value projections read when the layer runs on `hidden` (..., d): `hidden` itself
    in post-LN layouts, its attention norm in pre-LN ones (ModernBERT's `attn_norm`, the identity in layer 0)."""
    if encoder_architecture(backbone.config).post_norm:
        return hidden
    return layer_list(backbone)[index].attn_norm(hidden)


def position_ids_after(
    backbone: PreTrainedModel, input_ids: torch.LongTensor, attention_mask: torch.Tensor, offset: torch.Tensor
) -> torch.LongTensor:
    """Position ids (B, L) of an absolute-position backbone for `input_ids` whose tokens follow `offset` (B,) tokens
    of another text: RoBERTa's family numbers non-padding tokens from `padding_idx + 1` and gives padding
    `padding_idx`, the others number from 0 (padding gets 0). A ValueError on relative, bias or rotary positions."""
    architecture = encoder_architecture(backbone.config)
    if architecture.positions != "absolute":
        raise ValueError(
            f"{architecture.name!r} backbones have {architecture.positions} positions, not absolute position ids."
        )
    padding_idx = getattr(backbone.embeddings, "padding_idx", None)
    if padding_idx is not None:
        valid = input_ids.ne(padding_idx).long()
        return (valid.cumsum(1) + offset[:, None]) * valid + padding_idx
    return (torch.arange(input_ids.shape[1], device=input_ids.device) + offset[:, None]) * attention_mask


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def attention_scores(
    backbone: PreTrainedModel, index: int, query: torch.Tensor, key: torch.Tensor, inputs: dict
) -> torch.Tensor:
    """Layer `index`'s attention scores before mask and softmax (B, H, Lq, Lk), with its position terms, from per-head
    queries and keys (B, H, L, head size) as `project` gives them and `inputs`, the arguments its attention module's
    forward received, by name (the position information the encoder hands it).

    Absolute positions: q . k / sqrt(size). MPNet ("bias"): plus the call's `position_bias`. DeBERTa ("relative"):
    (q . k + c2p + p2c) / sqrt(size * (1 + number of terms)), the disentangled terms from the module's own
    `disentangled_attention_bias` on `rel_embeddings` after its position dropout, as its forward does. ModernBERT
    ("rotary"): q and k rotated by the call's `position_embeddings` (cos, sin) first, in float32 as its forward does.
    """
    positions = encoder_architecture(backbone.config).positions
    size = query.shape[-1]
    if positions == "rotary":
        cos, sin = (t.unsqueeze(1) for t in inputs["position_embeddings"])
        query, key = ((x.float() * cos + _rotate_half(x.float()) * sin).to(x.dtype) for x in (query, key))
    if positions != "relative":
        scores = torch.matmul(query, key.transpose(-1, -2)) * size**-0.5
        return scores + inputs["position_bias"] if positions == "bias" else scores
    attention = attention_module(backbone, index)
    factor = 1 + sum(term in attention.pos_att_type for term in ("c2p", "p2c"))
    scores = torch.matmul(query, key.transpose(-1, -2) / (size * factor) ** 0.5)
    if attention.relative_attention:
        flat_query, flat_key = (x.reshape(-1, *x.shape[-2:]) for x in (query, key))  # (B * H, L, size)
        embeddings = attention.pos_dropout(inputs["rel_embeddings"])
        relative_pos = inputs.get("relative_pos")
        bias = attention.disentangled_attention_bias(flat_query, flat_key, relative_pos, embeddings, factor)
        scores = scores + bias.view_as(scores)
    return scores


# Post-LN layouts: path from a layer to the LayerNorm it applies to (attention output + layer input).
_ATTENTION_OUTPUT_NORMS = {
    "bert": "attention.output.LayerNorm",
    "roberta": "attention.output.LayerNorm",
    "electra": "attention.output.LayerNorm",
    "deberta-v2": "attention.output.LayerNorm",
    "mpnet": "attention.LayerNorm",
    "distilbert": "sa_layer_norm",
    "albert": "attention.LayerNorm",
}


def attention_output_norm(backbone: PreTrainedModel, index: int) -> "nn.Module | None":
    """The LayerNorm layer `index` applies to its attention output plus its input in post-LN layouts (BERT's
    `attention.output.LayerNorm`); None in pre-LN layouts (ModernBERT adds the attention output to the input without
    a norm and normalises before the attention, `attention_input`)."""
    architecture = encoder_architecture(backbone.config)
    if not architecture.post_norm:
        return None
    return _path(layer_list(backbone)[index], _ATTENTION_OUTPUT_NORMS[architecture.name])


def layer_norm_eps(config: PreTrainedConfig) -> float:
    """The backbone's LayerNorm epsilon (BERT's `layer_norm_eps`, ModernBERT's `norm_eps`, DistilBERT's fixed
    1e-12)."""
    if encoder_architecture(config).name == "distilbert":
        return 1e-12
    return float(_config_value(config, ("layer_norm_eps", "norm_eps"), "LayerNorm epsilon"))


def embedding_projection(backbone: PreTrainedModel) -> "nn.Linear | None":
    """The linear map from the embedding size to the hidden size that follows the embedding layer (ELECTRA's
    `embeddings_project` when `embedding_size` differs from `hidden_size`, ALBERT's `embedding_hidden_mapping_in`);
    None where the embeddings already have the hidden size."""
    if encoder_architecture(backbone.config).name == "albert":
        return backbone.encoder.embedding_hidden_mapping_in
    return getattr(backbone, "embeddings_project", None)


def default_position_ids(backbone: PreTrainedModel, input_ids: torch.LongTensor) -> torch.LongTensor:
    """The position ids (B, L) the embedding layer gives `input_ids` when it is passed none: RoBERTa's family and
    MPNet count non-padding tokens from `padding_idx + 1` and give padding `padding_idx`, the others number 0..L-1
    (ModernBERT's embedding layer adds no position and ignores them)."""
    padding_idx = getattr(backbone.embeddings, "padding_idx", None)
    if padding_idx is not None:
        valid = input_ids.ne(padding_idx).long()
        return valid.cumsum(1) * valid + padding_idx
    return torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(input_ids)


def embedding_output(
    backbone: PreTrainedModel,
    input_ids: torch.LongTensor,
    token_type_ids: "torch.LongTensor | None" = None,
    attention_mask: "torch.Tensor | None" = None,
    position_ids: "torch.LongTensor | None" = None,
) -> torch.Tensor:
    """The hidden states entering layer 0 for `input_ids` (B, L), as `EncoderStack.embed` computes them
    (ELECTRA-small's and ALBERT's projection included) but without dropout: the embedding layer runs in evaluation
    mode for the call and gets its modes back afterwards. `attention_mask` (B, L; default all ones) is the mask
    DeBERTa multiplies its embeddings by; `position_ids` default to the embedding layer's own
    (`default_position_ids`)."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    modes = [(module, module.training) for module in backbone.embeddings.modules()]
    backbone.embeddings.eval()
    try:
        return EncoderStack(backbone, attention_mask).embed(input_ids, token_type_ids, position_ids)
    finally:
        for module, mode in modes:
            module.training = mode

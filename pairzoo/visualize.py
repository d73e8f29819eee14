"""Figures of the pairzoo methods, one public function per figure, drawn with matplotlib.

matplotlib is imported inside the drawing helper only, so `import pairzoo` (and this module) works without it. Figures
are drawn on a standalone `matplotlib.figure.Figure` (no pyplot state, no GUI backend) and written to a file.

- `seaver_attention_maps` / `plot_seaver_reweighting`: SEAVER's sentence-part reweighting W_S next to the
  head-averaged last-layer attention it replaces (paper Figures 4 and 6).
- `router_weights_for` / `plot_router_weights`: CSR's router weights over the tokens of one sentence under several
  conditions (paper Fig. 7).
- `plot_combined_attention`: Comateformer's affinity E, difference N and combined M of one head (paper Fig. 6).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from .modeling.encoders import attention_probabilities, layer_list
from .modeling.modeling_comateformer import combined_heads_per_layer
from .pipelines.pipeline_conditional_similarity import encode_bi_inputs, encode_conditional_inputs, encode_tri_inputs


@dataclass
class Panel:
    """One heatmap: a (len(rows), len(columns)) matrix; `diverging` centres a red-blue map on zero; `gamma` maps
    non-negative values through a power-law colour scale (0.5: square root), so small weights next to one dominant
    token stay visible."""

    title: str
    matrix: torch.Tensor
    rows: "list[str]"
    columns: "list[str]"
    cmap: str = "viridis"
    diverging: bool = False
    gamma: "float | None" = None


def _tick(label: str, limit: int = 40) -> str:
    """A tick label matplotlib prints literally ($ would start mathtext), cut to `limit` characters."""
    label = label if len(label) <= limit else label[: limit - 1] + "…"
    return label.replace("$", r"\$")


def heatmap_figure(panels: "Sequence[Panel]", title: "str | None" = None, stacked: bool = False):
    """A `matplotlib.figure.Figure` with `panels` side by side (or one above the other with `stacked`), each with
    its own colour bar; shared by the figure files below and the web demo's images."""
    try:
        from matplotlib.colors import PowerNorm
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError("pairzoo.visualize needs matplotlib (pip install 'pairzoo[train]').") from err
    sizes = []
    for panel in panels:
        if tuple(panel.matrix.shape) != (len(panel.rows), len(panel.columns)):
            raise ValueError(
                f"panel {panel.title!r} has shape {tuple(panel.matrix.shape)} but {len(panel.rows)} row and "
                f"{len(panel.columns)} column labels."
            )
        width = min(11.0, max(6.0, 0.22 * len(panel.columns) + 2.4))
        height = min(11.0, max(2.4, 0.22 * len(panel.rows) + 1.8))
        sizes.append((width, height))
    if stacked:
        figsize = (max(w for w, _ in sizes), sum(h for _, h in sizes) + 0.5)
    else:
        figsize = (sum(w for w, _ in sizes), max(h for _, h in sizes) + 0.5)
    figure = Figure(figsize=figsize, dpi=100, layout="constrained")
    shape = (len(panels), 1) if stacked else (1, len(panels))
    for axes, panel in zip(figure.subplots(*shape, squeeze=False).ravel(), panels):
        values = panel.matrix.detach().float().cpu().numpy()
        if panel.diverging:
            bound = max(float(abs(values).max()), 1e-12)
            image = axes.imshow(values, cmap="RdBu_r", vmin=-bound, vmax=bound, aspect="auto")
        elif panel.gamma is not None:
            norm = PowerNorm(panel.gamma, vmin=0.0, vmax=max(float(values.max()), 1e-12))
            image = axes.imshow(values, cmap=panel.cmap, norm=norm, aspect="auto")
        else:
            image = axes.imshow(values, cmap=panel.cmap, aspect="auto")
        fontsize = 7 if max(len(panel.rows), len(panel.columns)) <= 40 else 5
        axes.set_title(_tick(panel.title, 80), fontsize=9)
        axes.set_xticks(range(len(panel.columns)), [_tick(t) for t in panel.columns], rotation=90, fontsize=fontsize)
        axes.set_yticks(range(len(panel.rows)), [_tick(t) for t in panel.rows], fontsize=fontsize)
        figure.colorbar(image, ax=axes, shrink=0.8)
    if title:
        figure.suptitle(_tick(title, 120), fontsize=10)
    return figure


def save_heatmaps(panels: "Sequence[Panel]", path: "str | Path", title: "str | None" = None) -> Path:
    """`heatmap_figure(panels, title)` written to `path` (PNG, 150 dpi); creates the parent folder."""
    figure = heatmap_figure(panels, title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=150)
    return path


@dataclass
class SeaverAttentionMaps:
    """What `plot_seaver_reweighting` draws, for one example.

    Attributes:
        tokens: the sentence-part tokens (first token through the separator after the last sentence).
        attention: (l_s, l_s) head-averaged last-layer attention probabilities on the sentence part (of the baseline
            model when one is given, otherwise of the SEAVER model's own encoder).
        reweighting: (l_s, l_s) SEAVER's W_S averaged over the reweighting heads.
    """

    tokens: "list[str]"
    attention: torch.Tensor
    reweighting: torch.Tensor


@torch.no_grad()
def head_mean_last_layer_attention(model, inputs: "dict[str, torch.Tensor]", length: int) -> torch.Tensor:
    """(length, length): the last-layer attention probabilities of `model.backbone` on `inputs` (row 0) among its first
    `length` tokens, averaged over heads: the attention panel SEAVER's reweighting is compared with."""
    backbone = model.backbone
    hidden = backbone(**inputs, output_hidden_states=True).hidden_states[-2]
    attention = attention_probabilities(backbone, len(layer_list(backbone)) - 1, hidden, inputs["attention_mask"])
    return attention[0, :, :length, :length].mean(0)


@torch.no_grad()
def seaver_attention_maps(
    model,
    tokenizer,
    sentence1: str,
    sentence2: "str | None",
    condition: str,
    baseline_model=None,
    max_length: "int | None" = None,
) -> SeaverAttentionMaps:
    """Run a SEAVER model (pairzoo or exported remote code) on one example and collect the maps of its figure.

    `baseline_model` (e.g. a trained cross-encoder on the same tokenizer) supplies the attention panel; without it
    the panel shows the SEAVER encoder's own last-layer attention, the matrix whose blocks SEAVER reweights.
    """
    batch = encode_conditional_inputs(tokenizer, sentence1, sentence2, condition, max_length=max_length)
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items()}
    out = model.eval()(**batch, output_internals=True)
    if out.reweighting_sentence is None:
        raise ValueError("the model returned no reweighting: is it a SEAVER model with `use_reweighting=True`?")
    length = int(out.sentence_mask[0].sum())
    if baseline_model is None:
        attention = out.last_layer_attentions[0, :, :length, :length].mean(0)
    else:
        attention = head_mean_last_layer_attention(baseline_model.eval(), batch, length)
    tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0, :length].tolist())
    return SeaverAttentionMaps(
        tokens=tokens,
        attention=attention.cpu(),
        reweighting=out.reweighting_sentence[0, :, :length, :length].mean(0).cpu(),
    )


def plot_seaver_reweighting(maps: SeaverAttentionMaps, path: "str | Path", title: "str | None" = None) -> Path:
    """Paper Figures 4/6: head-averaged last-layer attention next to SEAVER's W_S, tokens on both axes, as a PNG."""
    panels = [
        Panel("last-layer attention (head mean)", maps.attention, maps.tokens, maps.tokens),
        Panel("SEAVER W_S (head mean)", maps.reweighting, maps.tokens, maps.tokens),
    ]
    return save_heatmaps(panels, path, title=title)


@torch.no_grad()
def router_weights_for(model, tokenizer, sentence: str, conditions: "list[str]", layer: int = -1) -> tuple:
    """Tokens of `sentence` and a (num_conditions, num_tokens) tensor of CSR router weights `w` of router layer
    `layer` (an index into the model's router layers) for each condition."""
    if not conditions:
        raise ValueError("`conditions` is empty: give at least one condition.")
    if not getattr(model, "routed_layers", None):
        raise ValueError("the model has no router layers (use_router=False): nothing to plot.")
    model.eval()
    sentences = [sentence] * len(conditions)
    encode = encode_tri_inputs if model.input_format == "tri" else encode_bi_inputs
    inputs = encode(tokenizer, sentences, None, conditions)
    out = model(**inputs, output_internals=True)
    keep = out.router_mask[0].bool()
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0][keep].tolist())
    return tokens, out.router_weights[layer][:, keep].cpu()


def plot_router_weights(
    model, tokenizer, sentence: str, conditions: "list[str]", path: "str | Path", layer: int = -1
) -> Path:
    """CSR paper Fig. 7: router weights over the tokens of `sentence` (columns) under each condition (rows), as PNG."""
    tokens, weights = router_weights_for(model, tokenizer, sentence, conditions, layer)
    title = f"CSR router weights (router layer {model.routed_layers[layer]})"
    return save_heatmaps([Panel("router weight w", weights, conditions, tokens, "Reds")], path, title=title)


def plot_combined_attention(
    model, tokenizer, sentence1: str, sentence2: str, path: "str | Path", layer: "int | None" = None, head: int = 0
) -> Path:
    """Comateformer paper Fig. 6: E, N and M of combined head `head` of encoder `layer` (default: the first layer
    with combined heads) for the pair (`sentence1`, `sentence2`), query tokens as rows and key tokens as columns.

    E.g. `plot_combined_attention(model, tok, "hardware engineer", "software engineer", "fig6.png")`.
    """
    heads = combined_heads_per_layer(model.config)
    if not heads:
        raise ValueError("the model has no combined heads (`combined_layers` / `combined_head_fraction`).")
    layer = next(iter(heads)) if layer is None else layer
    if layer not in heads:
        raise ValueError(f"`layer` must be one of the layers with combined heads {list(heads)}, got {layer!r}.")
    if isinstance(head, bool) or not isinstance(head, int) or not 0 <= head < heads[layer]:
        raise ValueError(f"`head` must be in [0, {heads[layer]}) for layer {layer}, got {head!r}.")
    batch = tokenizer(sentence1, sentence2, return_tensors="pt")
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model(**batch, output_internals=True)
    model.train(was_training)
    index = list(heads).index(layer)
    tokens = tokenizer.convert_ids_to_tokens(batch["input_ids"][0])
    panels = [
        Panel("E (affinity)", out.affinity[index][0, head], tokens, tokens, diverging=True),
        Panel("N (difference)", out.difference[index][0, head], tokens, tokens),
        Panel("M (combined)", out.combined_attention[index][0, head], tokens, tokens, diverging=True),
    ]
    title = f"Comateformer layer {layer}, head {head} (rows: queries, columns: keys)"
    return save_heatmaps(panels, path, title=title)


__all__ = [
    "Panel",
    "SeaverAttentionMaps",
    "heatmap_figure",
    "head_mean_last_layer_attention",
    "plot_combined_attention",
    "plot_router_weights",
    "plot_seaver_reweighting",
    "router_weights_for",
    "save_heatmaps",
    "seaver_attention_maps",
]

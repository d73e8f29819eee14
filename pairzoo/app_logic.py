"""The logic behind the web demo (`app.py` at the repository root), kept free of Gradio so it is testable without a
browser.

- `bundled_sources` / `export_sources`: what the demo loads: each method built on the bundled MiniLM with an
  untrained head, or pairzoo export folders (`pairzoo.hub_cards.load_export`, safetensors only, no remote code run).
- `ModelStore`: loads the sources one after another (`load()`, meant for a background thread) and says how far it
  got (`status_markdown()`), so the page is served before the models are ready.
- `conditional_similarity`, `sentence_pair`, `compare`: what the three tabs show; bad input raises `DemoError`, whose
  message the page prints as it is.
- `render_heatmaps`: labelled heatmaps as one RGB image (matplotlib's Agg canvas, nothing written to disk).
"""

import functools
import logging
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .backbones import DEFAULT_BACKBONE, load_tokenizer
from .hub_cards import load_export
from .modeling.modeling_comateformer import combined_heads_per_layer
from .pipelines.pipeline_conditional_similarity import encode_conditional_inputs
from .registry import create_model, get_model_spec
from .training.collators import make_collator
from .visualize import (
    Panel,
    head_mean_last_layer_attention,
    heatmap_figure,
    router_weights_for,
    seaver_attention_maps,
)
from .zoo import MODEL_SPECS

logger = logging.getLogger(__name__)

MAX_CHARS = 200  # per text field: keeps every heatmap readable (about 50 tokens a sentence)
MAX_LENGTH = 256  # token budget of one model input; MAX_CHARS keeps inputs well below it
LATENCY_REPEATS = 3  # timed runs per model in the compare tab, after one untimed warm-up run

# The methods the demo builds on the bundled backbone, with the config overrides they need for the page: each
# method's `demo_overrides`, in its module of `pairzoo.zoo`.
BUNDLED_MODELS: dict[str, dict] = {
    spec.name: spec.demo_overrides for spec in MODEL_SPECS if spec.demo_overrides is not None
}

UNTRAINED_NOTE = (
    "The bundled models are the pretrained encoder with **untrained heads** (nothing fine-tuned): their scores and "
    "maps show what each method computes, not trained predictions. For trained models start the demo with export "
    "folders: `python app.py --models DIR [DIR ...]`."
)


class DemoError(ValueError):
    """A problem the page reports in words (empty or overlong input, a model that is not loaded)."""


# --------------------------------------------------------------------------------------------------- loading


@dataclass(frozen=True)
class ModelSource:
    """One model to load: `load()` returns `(model, tokenizer)`. `name` names it on the page until it is loaded
    (a registry name, or an export folder), `origin` says where it comes from."""

    name: str
    origin: str
    load: Callable[[], tuple]
    trained: bool


@dataclass
class LoadedModel:
    """A loaded model (eval mode) with its tokenizer; `kind` is its registry name (= config `model_type`)."""

    name: str
    kind: str
    model: torch.nn.Module
    tokenizer: object
    source: str
    trained: bool
    seconds: float

    @property
    def conditional(self) -> bool:
        """Whether the model reads a condition (the conditional-similarity models) or a plain sentence pair."""
        return get_model_spec(self.kind).task == "conditional-similarity"


def bundled_sources(
    names: Sequence[str] = tuple(BUNDLED_MODELS),
    backbone: str = DEFAULT_BACKBONE,
    overrides: "dict[str, dict] | None" = None,
) -> list:
    """Sources building each method in `names` on `backbone` with a freshly initialised (seed 0) head;
    `overrides[name]` adds config overrides (e.g. fewer Comateformer layers on a 2-layer test backbone)."""
    unknown = [name for name in [*names, *(overrides or {})] if name not in BUNDLED_MODELS]
    if unknown:
        raise ValueError(f"no bundled demo model {unknown}; choose from {list(BUNDLED_MODELS)}.")
    tokenizer = functools.cache(functools.partial(load_tokenizer, backbone))

    def loader(name: str) -> Callable[[], tuple]:
        kwargs = {**BUNDLED_MODELS[name], **(overrides or {}).get(name, {})}

        def load() -> tuple:
            torch.manual_seed(0)  # the same untrained head on every start
            return create_model(name, backbone=backbone, **kwargs), tokenizer()

        return load

    origin = f"bundled {'MiniLM' if backbone == DEFAULT_BACKBONE else backbone}, untrained head"
    return [ModelSource(name=name, origin=origin, load=loader(name), trained=False) for name in names]


def export_sources(folders: Sequence["str | Path"]) -> list:
    """Sources loading pairzoo export folders (`pairzoo.hub_cards.load_export`)."""
    return [
        ModelSource(name=str(folder), origin=str(folder), load=functools.partial(load_export, folder), trained=True)
        for folder in folders
    ]


class ModelStore:
    """The demo's models, loaded one by one by `load()` (run it in a background thread; the page reads
    `status_markdown()` meanwhile). `lock` serialises inference: the machine's cores are better spent on one
    request at a time."""

    def __init__(self, sources: Sequence[ModelSource]) -> None:
        self.sources = list(sources)
        self.models: list[LoadedModel] = []
        self.failures: dict[str, str] = {}
        self.current: str | None = None
        self.started: float | None = None
        self.seconds: float | None = None
        self.finished = threading.Event()
        self.lock = threading.Lock()

    def load(self) -> None:
        """Load every source in order; a source that fails is recorded in `failures` and the others still load."""
        self.started = time.perf_counter()
        for source in self.sources:
            self.current = source.name
            start = time.perf_counter()
            try:
                model, tokenizer = source.load()
                kind = model.config.model_type
                get_model_spec(kind)
            except Exception as err:  # one bad folder must not stop the others; the page names it
                logger.exception("could not load %s", source.name)
                self.failures[source.name] = _short(f"{type(err).__name__}: {err}")
                continue
            name = f"{kind} ({_folder_label(source.name)})" if source.trained else source.name
            self.models.append(
                LoadedModel(
                    name=self._unique(name),
                    kind=kind,
                    model=model.eval(),
                    tokenizer=tokenizer,
                    source=source.origin,
                    trained=source.trained,
                    seconds=time.perf_counter() - start,
                )
            )
        self.current = None
        self.seconds = time.perf_counter() - self.started
        self.finished.set()

    def _unique(self, name: str) -> str:
        """`name`, or `name #2`, `name #3`, ... when a loaded model already has it (two exports of one kind)."""
        taken, candidate, number = {m.name for m in self.models}, name, 2
        while candidate in taken:
            candidate, number = f"{name} #{number}", number + 1
        return candidate

    def get(self, kind: str) -> "LoadedModel | None":
        """The first loaded model of registry name `kind`, or None."""
        return next((m for m in self.models if m.kind == kind), None)

    def status_markdown(self) -> str:
        """One status paragraph: what is loading, what is ready, what failed, and whether heads are untrained."""
        total = len(self.sources)
        if not self.finished.is_set():
            elapsed = time.perf_counter() - self.started if self.started is not None else 0.0
            now = f", now **{self.current}**" if self.current else ""
            done = ", ".join(m.name for m in self.models) or "none yet"
            return (
                f"**Loading models** in the background: {len(self.models)}/{total} loaded{now} ({elapsed:.0f} s); "
                f"loaded so far: {done}. Buttons wait for the loading to finish."
            )
        lines = []
        if self.models:
            names = ", ".join(f"{m.name} ({m.seconds:.1f} s)" for m in self.models)
            lines.append(f"**Models ready**: {len(self.models)}/{total} loaded in {self.seconds:.0f} s: {names}.")
        else:
            lines.append(f"**No model could be loaded** ({total} tried).")
        lines += [f"Could not load `{name}`: {message}" for name, message in self.failures.items()]
        if any(not m.trained for m in self.models):
            lines.append(UNTRAINED_NOTE)
        return "\n\n".join(lines)

    def head_choices(self) -> "list[tuple[str, str]]":
        """`(label, value)` of every combined head of the loaded Comateformer (empty when there is none)."""
        comateformer = self.get("comateformer")
        return combined_head_choices(comateformer.model.config) if comateformer else []


def _folder_label(folder: str) -> str:
    """The folder's name, with its parent's when it is the training CLI's `<output_dir>/export`."""
    path = Path(folder)
    return f"{path.parent.name}/{path.name}" if path.name == "export" and path.parent.name else path.name


def _short(message: str, limit: int = 300) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."


# ---------------------------------------------------------------------------------------------------- inputs


def check_text(label: str, text: "str | None", required: bool = True) -> "str | None":
    """`text` stripped; empty is a `DemoError` when `required` (else None), as is more than `MAX_CHARS` characters."""
    if text is None or not text.strip():
        if required:
            raise DemoError(f"{label} is empty: type some text.")
        return None
    text = text.strip()
    if len(text) > MAX_CHARS:
        raise DemoError(f"{label} is too long: {len(text)} characters, this demo takes at most {MAX_CHARS}.")
    return text


# -------------------------------------------------------------------------------------------------- predictions


@dataclass
class Prediction:
    """A score on the model's label scale (regression) or class probabilities (classification)."""

    score: "float | None" = None
    probabilities: "dict[str, float] | None" = None

    def text(self) -> str:
        """`3.142`, or the classes from most to least probable: `entailment 0.412, neutral 0.333, ...`."""
        if self.score is not None:
            return f"{self.score:.3f}"
        ranked = sorted(self.probabilities.items(), key=lambda item: -item[1])
        return ", ".join(f"{label} {p:.3f}" for label, p in ranked)


def prediction_from_output(model: torch.nn.Module, output) -> Prediction:
    """The first example's prediction: `scores` when the output has them, else the logits (one logit: a regression
    on the label scale; several: softmax probabilities named by `config.id2label`)."""
    scores = getattr(output, "scores", None)
    if scores is not None:
        return Prediction(score=float(scores.reshape(-1)[0]))
    logits = output.logits.float()
    if logits.dim() == 1 or logits.shape[-1] == 1:
        return Prediction(score=float(logits.reshape(-1)[0]))
    probabilities = logits[0].softmax(-1).tolist()
    id2label = model.config.id2label
    return Prediction(probabilities={id2label.get(i, str(i)): p for i, p in enumerate(probabilities)})


def predict(loaded: LoadedModel, sentence1: str, sentence2: str, condition: "str | None") -> Prediction:
    """One example through the model's own training encoding (`make_collator`); pair models ignore `condition`."""
    row = {"sentence1": sentence1, "sentence2": sentence2}
    if loaded.conditional:
        row["condition"] = condition
    batch = make_collator(loaded.model, loaded.tokenizer, MAX_LENGTH).encode([row])
    with torch.inference_mode():
        return prediction_from_output(loaded.model, loaded.model(**batch))


# ---------------------------------------------------------------------------------------------------- heatmaps


def render_heatmaps(panels: Sequence[Panel], title: "str | None" = None, stacked: bool = False):
    """`visualize.heatmap_figure(panels, title, stacked)` as an RGB `PIL.Image` (Agg canvas, nothing on disk)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    canvas = FigureCanvasAgg(heatmap_figure(panels, title, stacked))
    canvas.draw()
    return Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB")


# -------------------------------------------------------------------------------------------------------- tabs


@dataclass
class ConditionalResult:
    """What the conditional-similarity tab shows; a part whose model is not loaded stays None and gets a note."""

    baseline_score: "str | None" = None
    seaver_score: "str | None" = None
    csr_score: "str | None" = None
    baseline_attention: "object | None" = None
    seaver_reweighting: "object | None" = None
    router_weights: "object | None" = None
    notes: "list[str]" = field(default_factory=list)


@torch.no_grad()
def baseline_attention(loaded: LoadedModel, sentence1: str, sentence2: str, condition: str) -> tuple:
    """Tokens of the sentence part (first token through the separator after sentence 2) and the cross-encoder's
    head-averaged last-layer attention among them, the matrix SEAVER's W_S is compared with (paper Figures 4/6)."""
    batch = encode_conditional_inputs(
        loaded.tokenizer, sentence1, sentence2, condition, max_length=MAX_LENGTH, return_span_masks=True
    )
    length = int(batch["sentence_mask"][0].sum())
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    tokens = loaded.tokenizer.convert_ids_to_tokens(batch["input_ids"][0, :length].tolist())
    return tokens, head_mean_last_layer_attention(loaded.model, inputs, length)


def conditional_similarity(
    store: ModelStore, sentence1: str, sentence2: str, condition: str, more_conditions: Sequence["str | None"]
) -> ConditionalResult:
    """Baseline and SEAVER scores with the baseline's attention and SEAVER's W_S, and CSR's score with its router
    weights over each sentence under `condition` and the non-empty `more_conditions`."""
    sentence1 = check_text("Sentence 1", sentence1)
    sentence2 = check_text("Sentence 2", sentence2)
    condition = check_text("Condition", condition)
    extra = [check_text(f"Condition {i}", text, required=False) for i, text in enumerate(more_conditions, start=2)]
    conditions = list(dict.fromkeys([condition, *(text for text in extra if text)]))
    baseline, seaver, csr = store.get("cross-encoder"), store.get("seaver"), store.get("csr")
    if not (baseline or seaver or csr):
        raise DemoError("No conditional-similarity model (cross-encoder, SEAVER or CSR) is loaded.")
    result = ConditionalResult()
    title = f"condition: {condition}"
    with store.lock, torch.inference_mode():
        if baseline is None:
            result.notes.append("No cross-encoder (the baseline) is loaded.")
        else:
            result.baseline_score = predict(baseline, sentence1, sentence2, condition).text()
            tokens, attention = baseline_attention(baseline, sentence1, sentence2, condition)
            panel = Panel("cross-encoder: last-layer attention (head mean)", attention, tokens, tokens)
            result.baseline_attention = render_heatmaps([panel], title=title)
        if seaver is None:
            result.notes.append("No SEAVER model is loaded.")
        else:
            result.seaver_score = predict(seaver, sentence1, sentence2, condition).text()
            if seaver.model.config.use_reweighting:
                maps = seaver_attention_maps(
                    seaver.model, seaver.tokenizer, sentence1, sentence2, condition, max_length=MAX_LENGTH
                )
                panel = Panel("SEAVER: reweighting W_S (head mean)", maps.reweighting, maps.tokens, maps.tokens)
                result.seaver_reweighting = render_heatmaps([panel], title=title)
            else:
                result.notes.append("The SEAVER model has `use_reweighting=False`: it has no reweighting to show.")
        if csr is None:
            result.notes.append("No CSR model is loaded.")
        else:
            result.csr_score = predict(csr, sentence1, sentence2, condition).text()
            if csr.model.routed_layers:
                result.router_weights = _router_figure(csr, sentence1, sentence2, conditions)
            else:
                result.notes.append("The CSR model has no routers (`use_router=False`): no router weights to show.")
    return result


def _router_figure(csr: LoadedModel, sentence1: str, sentence2: str, conditions: "list[str]"):
    panels = []
    for label, sentence in (("sentence 1", sentence1), ("sentence 2", sentence2)):
        tokens, weights = router_weights_for(csr.model, csr.tokenizer, sentence, conditions)
        panels.append(
            Panel(f"w over {label} (square-root colour scale)", weights, conditions, tokens, "Reds", gamma=0.5)
        )
    title = f"CSR router weights of layer {csr.model.routed_layers[-1]}, one row per condition"
    return render_heatmaps(panels, title=title, stacked=True)


def combined_head_choices(config) -> "list[tuple[str, str]]":
    """`(label, "layer:head")` for every combined head of a Comateformer config, layer by layer."""
    return [
        (f"layer {layer}, head {head}", f"{layer}:{head}")
        for layer, count in combined_heads_per_layer(config).items()
        for head in range(count)
    ]


@dataclass
class PairResult:
    """What the sentence-pair tab shows: the prediction and E, N, M of the chosen head as one image."""

    prediction: Prediction
    maps: object
    layer: int
    head: int


def sentence_pair(store: ModelStore, sentence1: str, sentence2: str, head_choice: "str | None") -> PairResult:
    """Comateformer on a sentence pair: its prediction and the affinity E, difference N and combined M of the
    combined head `head_choice` (`"layer:head"`; None or empty: the first one)."""
    sentence1 = check_text("Sentence 1", sentence1)
    sentence2 = check_text("Sentence 2", sentence2)
    loaded = store.get("comateformer")
    if loaded is None:
        raise DemoError("No Comateformer model is loaded.")
    choices = [value for _, value in combined_head_choices(loaded.model.config)]
    if not choices:
        raise DemoError("The Comateformer model has no combined heads: there are no E, N, M maps to show.")
    head_choice = head_choice or choices[0]
    if head_choice not in choices:
        raise DemoError(f"Combined head {head_choice!r} does not exist; choose one of {choices}.")
    layer, head = (int(part) for part in head_choice.split(":"))
    batch = loaded.tokenizer(sentence1, sentence2, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
    with store.lock, torch.inference_mode():
        output = loaded.model(**batch, output_internals=True)
    index = list(combined_heads_per_layer(loaded.model.config)).index(layer)
    tokens = loaded.tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist())
    panels = [
        Panel("E (affinity)", output.affinity[index][0, head], tokens, tokens, diverging=True),
        Panel("N (difference)", output.difference[index][0, head], tokens, tokens),
        Panel("M (combined)", output.combined_attention[index][0, head], tokens, tokens, diverging=True),
    ]
    title = f"Comateformer layer {layer}, head {head} (rows: queries, columns: keys)"
    return PairResult(prediction_from_output(loaded.model, output), render_heatmaps(panels, title=title), layer, head)


COMPARE_HEADERS = ["model", "source", "inputs used", "prediction", "latency (ms)"]


def compare(store: ModelStore, sentence1: str, sentence2: str, condition: "str | None") -> "list[list]":
    """One row per loaded model (`COMPARE_HEADERS`): its prediction on the same input and its median latency over
    `LATENCY_REPEATS` runs (tokenisation + forward, batch 1, after one warm-up run). The condition is required when
    a loaded model reads one; a model that fails gets its error in its row."""
    if not store.models:
        raise DemoError("No model is loaded.")
    sentence1 = check_text("Sentence 1", sentence1)
    sentence2 = check_text("Sentence 2", sentence2)
    needs_condition = any(m.conditional for m in store.models)
    condition = check_text("Condition", condition, required=needs_condition)
    rows = []
    with store.lock:
        for loaded in store.models:
            inputs = "sentences + condition" if loaded.conditional else "sentences (no condition)"
            try:
                prediction = predict(loaded, sentence1, sentence2, condition)
                times = []
                for _ in range(LATENCY_REPEATS):
                    start = time.perf_counter()
                    predict(loaded, sentence1, sentence2, condition)
                    times.append(1000 * (time.perf_counter() - start))
            except Exception as err:  # one failing model must not hide the others' rows
                logger.exception("%s failed in the compare tab", loaded.name)
                rows.append([loaded.name, loaded.source, inputs, _short(f"error: {type(err).__name__}: {err}"), None])
                continue
            rows.append([loaded.name, loaded.source, inputs, prediction.text(), round(statistics.median(times), 1)])
    return rows


__all__ = [
    "BUNDLED_MODELS",
    "COMPARE_HEADERS",
    "MAX_CHARS",
    "ConditionalResult",
    "DemoError",
    "LoadedModel",
    "ModelSource",
    "ModelStore",
    "PairResult",
    "Panel",
    "Prediction",
    "bundled_sources",
    "check_text",
    "combined_head_choices",
    "compare",
    "conditional_similarity",
    "export_sources",
    "predict",
    "prediction_from_output",
    "render_heatmaps",
    "sentence_pair",
]

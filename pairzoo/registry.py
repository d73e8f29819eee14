"""The one registry of pairzoo models: `list_models()` and `create_model(name, backbone=..., **config_overrides)`."""

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field

from transformers import PretrainedConfig, PreTrainedModel

from .backbones import (
    DEFAULT_BACKBONE,
    TINY_BACKBONES,
    backbone_config,
    check_backbone_weights,
    resolve_backbone,
    tiny_backbone_config,
)
from .pipelines import PIPELINES, ConditionalSimilarityPipeline, PairSimilarityPipeline


@dataclass(frozen=True)
class ModelSpec:
    """What the registry knows of a model name: its classes, task and card metadata, and what the zoo knows of its
    method beyond that (`pairzoo.zoo`: one module per method fills in every field)."""

    name: str
    config_class: type[PretrainedConfig]
    model_class: type[PreTrainedModel]
    auto_class: str
    task: str
    summary: str
    paper: str
    citation: str = ""  # BibTeX of the method's paper, printed in the model card
    defaults: dict = field(default_factory=dict)
    trains_on: tuple = ()  # task kinds `pairzoo.train` may train it on (pairzoo.training.data); empty: its `task`
    encoder_class: "type[PreTrainedModel] | None" = None  # the encoder without a head, reachable as `AutoModel`
    card_title: str = ""  # the model card's short title (empty: the name)
    limitation: str = ""  # the card's sentence on what it cannot do, from how it is built
    host_option: str = ""  # the config field naming a host network whose paper the card also cites
    host_citations: dict = field(default_factory=dict)  # value of `host_option` -> BibTeX of that host's paper
    embeds_sentences: bool = False  # exports load as sentence-transformers `SentenceTransformer`, not `CrossEncoder`
    # (summarise's rows of the card's profile, results folder, backbone) -> sentences the card adds to its comparison
    findings: "Callable[..., list[str]] | None" = None
    comparisons: tuple = ()  # the quality benchmark's comparisons of it (`pairzoo.zoo.Comparison`)
    zoo_entries: tuple = ()  # what `make zoo` trains of it (`pairzoo.zoo.ZooEntry`)
    demo_overrides: "dict | None" = None  # config overrides of the web demo's bundled model; None: not in the demo
    paper_numbers: tuple = ()  # (label, numbers, set-up) the paper reports: context in the benchmark report
    speed_targets: tuple = ()  # what benchmarks/speed.py checks of it (`pairzoo.zoo.SpeedTarget`)

    def __post_init__(self) -> None:
        if self.encoder_class is not None and self.auto_class == "AutoModel":
            raise ValueError(f"{self.name}: `encoder_class` needs `AutoModel` free, but `auto_class` is AutoModel.")

    @property
    def training_tasks(self) -> tuple:
        """The task kinds this model trains on: `trains_on`, or its own `task`."""
        return self.trains_on or (self.task,)

    @property
    def pipeline_tasks(self) -> tuple:
        """The pipeline tasks of this model's exports, one per kind of task it trains on (`pipeline_task_for`)."""
        return tuple(dict.fromkeys(pipeline_task_for(task) for task in self.training_tasks))

    @property
    def auto_classes(self) -> "dict[str, type[PreTrainedModel]]":
        """Auto class name -> class, for `auto_map` and registration: `auto_class`, the Auto class of each pipeline
        in `pipeline_tasks` (`AutoModelForSequenceClassification` for pair tasks, which sentence-transformers'
        `CrossEncoder` loads) and `AutoModel` for `encoder_class`."""
        classes = {self.auto_class: self.model_class}
        for task in self.pipeline_tasks:
            classes.setdefault(PIPELINES[task][1], self.model_class)
        if self.encoder_class is not None:
            classes["AutoModel"] = self.encoder_class
        return classes

    def entry_points(self, task: "str | None" = None) -> "tuple[str, str]":
        """`(auto class, pipeline task)` a user loads and scores an export with when the model was trained on task
        kind `task` (default: the model's `task`); the model card names these. A task the model does not train on
        is a ValueError naming `task`."""
        task = self.task if task is None else task
        if task not in self.training_tasks:
            raise ValueError(f"`task` {task!r} is not one {self.name} trains on; known: {list(self.training_tasks)}.")
        pipeline_task = pipeline_task_for(task)
        auto_class = self.auto_class if pipeline_task == pipeline_task_for(self.task) else PIPELINES[pipeline_task][1]
        return auto_class, pipeline_task


def pipeline_task_for(task: str) -> str:
    """The pipeline task that scores a model trained on task kind `task` (pairzoo.training.data): conditional kinds
    take a condition (`conditional-similarity`), pair kinds a plain sentence pair (`pair-similarity`)."""
    if task.startswith("conditional"):
        return ConditionalSimilarityPipeline.task_name
    return PairSimilarityPipeline.task_name


_MODELS: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> None:
    """Add a model name to the registry (names are unique)."""
    if spec.name in _MODELS and _MODELS[spec.name] != spec:
        raise ValueError(f"model name {spec.name!r} is already registered.")
    _MODELS[spec.name] = spec


def list_models(pattern: "str | None" = "*") -> list[str]:
    """Registered model names matching a shell-style `pattern` (`None` matches every name, as `"*"` does), sorted."""
    if pattern is None:
        pattern = "*"
    if not isinstance(pattern, str):
        raise ValueError(f"`pattern` must be a shell-style pattern string or None, got {pattern!r}.")
    return sorted(name for name in _MODELS if fnmatch.fnmatch(name, pattern))


def get_model_spec(name: str) -> ModelSpec:
    """The registry entry of `name`; unknown names are a ValueError listing the known ones."""
    if name not in _MODELS:
        raise ValueError(f"Unknown model {name!r}; registered models: {list_models()}.")
    return _MODELS[name]


def spec_for_model(model: PreTrainedModel) -> ModelSpec:
    """The registry entry whose model class built `model`."""
    for spec in _MODELS.values():
        if isinstance(model, spec.model_class):
            return spec
    raise ValueError(f"{type(model).__name__} is not a registered pairzoo model.")


def create_model(
    name: str,
    backbone: str = DEFAULT_BACKBONE,
    pretrained: bool = True,
    attn_implementation: "str | dict | None" = None,
    **config_overrides,
) -> PreTrainedModel:
    """Build model `name` on `backbone` (a backbone name, local folder or Hub id).

    With `pretrained=True` the encoder gets the backbone's pretrained weights (tiny test backbones have none and are
    always random); method parameters are initialised by the model. `config_overrides` are fields of the method's
    config (unknown or mistyped ones are a ValueError); the backbone's own config comes from `backbone` alone. A
    backbone that is no encoder, whose config does not load or (with `pretrained=True`) whose folder has no weights is
    a ValueError naming `backbone` (`pairzoo.backbones`).

    `attn_implementation` is transformers' attention implementation (`"eager"`, `"sdpa"`, `"flex_attention"`, ...,
    or a dict per sub-config, as in `from_pretrained`) of the model and of its encoder (`backbone_config` is a
    sub-config, so the choice reaches it); None keeps transformers' default (`sdpa` where available). `eager` is the
    one that returns attention probabilities (`output_attentions=True`). An unknown or unsupported one is
    transformers' ValueError naming `attn_implementation`.
    """
    spec = get_model_spec(name)
    if "backbone_config" in config_overrides:
        raise ValueError("`backbone_config` cannot be overridden: choose the encoder with `backbone=`.")
    if attn_implementation is not None and not isinstance(attn_implementation, (str, dict)):
        raise ValueError(
            f"`attn_implementation` must be a string such as 'eager' or 'sdpa' (or a dict per sub-config), got "
            f"{attn_implementation!r}."
        )
    kwargs = {**spec.defaults, **config_overrides}
    attention = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
    if backbone in TINY_BACKBONES:
        config = spec.config_class(backbone_config=tiny_backbone_config(backbone), **kwargs, **attention)
        return spec.model_class(config)
    path = resolve_backbone(backbone)
    # Checks the backbone and the overrides against its depth and sizes before any pretrained weight is read.
    config = spec.config_class(backbone_config=backbone_config(backbone), **kwargs, **attention)
    if pretrained:
        check_backbone_weights(path, backbone)
        return spec.model_class.from_backbone(path, **kwargs, **attention)
    return spec.model_class(config)

"""The one registry of pairzoo models: `list_models()` and `create_model(name, backbone=..., **config_overrides)`."""

import fnmatch
from dataclasses import dataclass, field

from transformers import AutoConfig, PretrainedConfig, PreTrainedModel

from .backbones import DEFAULT_BACKBONE, TINY_BACKBONES, resolve_backbone, tiny_backbone_config


@dataclass(frozen=True)
class ModelSpec:
    """What the registry knows of a model name: its classes, task and card metadata."""

    name: str
    config_class: type[PretrainedConfig]
    model_class: type[PreTrainedModel]
    auto_class: str
    pipeline_tag: str
    task: str
    summary: str
    paper: str
    defaults: dict = field(default_factory=dict)
    trains_on: tuple = ()  # task kinds `pairzoo.train` may train it on (pairzoo.training.data); empty: its `task`

    @property
    def training_tasks(self) -> tuple:
        """The task kinds this model trains on: `trains_on`, or its own `task`."""
        return self.trains_on or (self.task,)


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
    name: str, backbone: str = DEFAULT_BACKBONE, pretrained: bool = True, **config_overrides
) -> PreTrainedModel:
    """Build model `name` on `backbone` (a backbone name, local folder or Hub id).

    With `pretrained=True` the encoder gets the backbone's pretrained weights (tiny test backbones have none and are
    always random); method parameters are initialised by the model. `config_overrides` are fields of the method's
    config (unknown or mistyped ones are a ValueError); the backbone's own config comes from `backbone` alone.
    """
    spec = get_model_spec(name)
    if "backbone_config" in config_overrides:
        raise ValueError("`backbone_config` cannot be overridden: choose the encoder with `backbone=`.")
    kwargs = {**spec.defaults, **config_overrides}
    if backbone in TINY_BACKBONES:
        return spec.model_class(spec.config_class(backbone_config=tiny_backbone_config(backbone), **kwargs))
    path = resolve_backbone(backbone)
    # Checks the overrides against the backbone's depth and sizes before any pretrained weight is read.
    config = spec.config_class(backbone_config=AutoConfig.from_pretrained(path), **kwargs)
    if pretrained:
        return spec.model_class.from_backbone(path, **kwargs)
    return spec.model_class(config)

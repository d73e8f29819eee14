"""Validation helpers shared by every pairzoo configuration.

Hub exports inline this module into each exported configuration file, so it imports transformers, math and typing
only (exported code imports torch, transformers, math, typing and dataclasses only).

How a configuration declares its fields: every method config derives from `PairzooConfig` (directly or through
`LabelScaleConfig` / `LabelledConfig`) and lists its hyper-parameters as keyword parameters of its own `__init__`,
each annotated with its type (a type, or a string such as `"float | None"` or `"list[int] | None"`), followed by
`**kwargs` for transformers' generic keys (a config extending another one adds its own parameters and passes the
others on through `**kwargs`). Before that `__init__` runs (in `PairzooConfig.__new__`), every instantiation is
checked:

- a keyword that is neither a parameter of the `__init__` nor one of transformers' generic config keys
  (`TRANSFORMERS_CONFIG_KEYS`) is a ValueError naming it and its closest field (`closest_name`);
- the value of every annotated parameter must have its annotated type (`check_type`): `bool` only True/False, `int`
  an int but not a bool, `float` a finite int or float, `str` a string, `None` only where the annotation allows it,
  `list[X]` a list (or tuple) of X. Choices, ranges and checks across fields stay in the `__init__` itself.

A value set on a config after its construction (`config.alpha = float("nan")`) is checked when a model is built from
it: `PairzooPreTrainedModel.__init__` calls `PairzooConfig.revalidate`, which runs the constructor's checks again.

A new field therefore only needs its annotated parameter; unannotated parameters (`backbone_config`, turned into a
config by `coerce_backbone_config`) are checked by the `__init__` alone.

A saved config.json read by `from_pretrained` must be a save of the class reading it (`PairzooConfig.get_config_dict`:
its `model_type`), and a regression config must state its label scale (`LabelScaleConfig`).
"""

import math
import typing
from typing import Any

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec

# The backbone's own config lives inside the method's config, so `from_pretrained(dir)` rebuilds everything offline.
BACKBONE_SUB_CONFIG = {"backbone_config": SubConfigSpec(config_class=AutoConfig, model_type="bert", optional=True)}

# Generic keys transformers reads from the keyword arguments of any config, or writes onto any config.json, beyond the
# parameters of `PretrainedConfig.__init__` and the keys of `PretrainedConfig().to_dict()` (both added below, so the
# set follows the installed transformers): keys popped by `PretrainedConfig` itself (older 5.x versions also take
# `num_labels` as a parameter), `auto_map` and `custom_pipelines` (remote-code exports), `use_cache` and the special
# token ids (set by the Trainer), `tie_word_embeddings` (read by `PreTrainedModel`) and `quantization_config`.
_EXTRA_TRANSFORMERS_KEYS = (
    "num_labels",
    "torch_dtype",
    "name_or_path",
    "_commit_hash",
    "attn_implementation",
    "experts_implementation",
    "_attn_implementation_internal",
    "_experts_implementation_internal",
    "per_layer_config",
    "auto_map",
    "custom_pipelines",
    "sentence_transformers",  # sentence-transformers' settings (its CrossEncoder reads `activation_fn` here)
    "use_cache",
    "pad_token_id",
    "bos_token_id",
    "eos_token_id",
    "tie_word_embeddings",
    "quantization_config",
)


def init_parameters(init: Any) -> "tuple[str, ...]":
    """Names of the keyword-capable parameters of an `__init__` after `self` (read from its code object: exported
    code imports math, typing and dataclasses only, not inspect)."""
    code = init.__code__
    return code.co_varnames[1 : code.co_argcount + code.co_kwonlyargcount]


def _transformers_config_keys() -> frozenset:
    init = PretrainedConfig.__init__
    while hasattr(init, "__wrapped__"):  # transformers >= 5.x wraps its dataclass `__init__` to accept any keyword
        init = init.__wrapped__
    keys = set(init_parameters(init)) | set(PretrainedConfig().to_dict()) | set(_EXTRA_TRANSFORMERS_KEYS)
    return frozenset(keys)


TRANSFORMERS_CONFIG_KEYS = _transformers_config_keys()


def coerce_backbone_config(backbone_config: "PretrainedConfig | dict | None") -> "PretrainedConfig | None":
    """Turn a serialised backbone config (a dict with `model_type`) back into its config class."""
    if backbone_config is None or isinstance(backbone_config, PretrainedConfig):
        return backbone_config
    if isinstance(backbone_config, dict):
        if "model_type" not in backbone_config:
            raise ValueError("`backbone_config` must contain a `model_type` (e.g. 'bert' or 'roberta').")
        values = dict(backbone_config)
        return AutoConfig.for_model(values.pop("model_type"), **values)
    raise ValueError(f"`backbone_config` must be a PretrainedConfig, a dict or None, got {type(backbone_config)!r}.")


# Learned-position encoders whose position ids start after the padding index (`padding_idx + 1`), so
# `max_position_embeddings` counts `pad_token_id + 1` positions no token can use.
_OFFSET_POSITION_TYPES = (
    "roberta",
    "xlm-roberta",
    "camembert",
    "data2vec-text",
    "xmod",
    "roberta-prelayernorm",
    "mpnet",
)


def max_sequence_length(backbone_config: "PretrainedConfig | None") -> "int | None":
    """The most tokens one input of `backbone_config`'s encoder can hold (its learned positions), None where the
    config states no limit."""
    positions = getattr(backbone_config, "max_position_embeddings", None)
    if not isinstance(positions, int) or isinstance(positions, bool):
        return None
    if getattr(backbone_config, "model_type", None) in _OFFSET_POSITION_TYPES:
        positions -= (getattr(backbone_config, "pad_token_id", None) or 0) + 1
    return positions


def check_max_length(max_length: int, backbone_config: "PretrainedConfig | None", name: str = "max_length") -> None:
    """A ValueError naming `name` when `max_length` tokens exceed what the backbone's positions can hold."""
    limit = max_sequence_length(backbone_config)
    if limit is not None and max_length > limit:
        kind = getattr(backbone_config, "model_type", "backbone")
        raise ValueError(
            f"`{name}` is {max_length}, above the backbone's limit of {limit} tokens (its {kind} config's "
            f"`max_position_embeddings`); use a value <= {limit}."
        )


def check_choice(field: str, value: Any, choices: "tuple | list") -> None:
    """Raise a ValueError naming `field` unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(f"`{field}` must be one of {list(choices)}, got {value!r}.")


def check_range(field: str, value: Any, low: "float | None" = None, high: "float | None" = None) -> None:
    """Raise a ValueError naming `field` unless `low <= value <= high` (either bound may be None)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{field}` must be a number, got {value!r}.")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"`{field}` must be in [{low}, {high}], got {value!r}.")


def check_label_scale(label_min: float, label_max: float) -> None:
    """Raise a ValueError naming the field unless `label_min < label_max` are numbers (the regression label scale)."""
    check_range("label_min", label_min)
    check_range("label_max", label_max)
    if label_max <= label_min:
        raise ValueError(f"`label_max` ({label_max}) must be greater than `label_min` ({label_min}).")


LABEL_SCALE_FIELDS = ("label_min", "label_max")


def saved_config_file(name_or_path: Any, subfolder: str = "") -> str:
    """The config.json `from_pretrained(name_or_path, subfolder=subfolder)` reads (a folder or Hub id, or a JSON file
    given directly), as text for messages (exported code may not import os)."""
    name = str(name_or_path).rstrip("/")
    if name.endswith(".json"):
        return name
    return "/".join(part for part in (name, subfolder.strip("/"), "config.json") if part)


def check_saved_label_scale(owner: str, config_dict: dict, overrides: dict, source: str) -> None:
    """Raise a ValueError naming the field and `source` (the saved config) when `config_dict`, read as an `owner`
    with one label (regression), lacks `label_min` or `label_max` and the keyword arguments of the load
    (`overrides`) do not give it: the constructor's default scale would move every score."""
    id2label = config_dict.get("id2label")
    saved_labels = len(id2label) if isinstance(id2label, dict) else config_dict.get("num_labels") or 1
    if overrides.get("num_labels", saved_labels) != 1:
        return
    for field, end in zip(LABEL_SCALE_FIELDS, ("lowest", "highest")):
        if field not in config_dict and field not in overrides:
            raise ValueError(
                f"{source} has no `{field}`: this {owner} has one label (regression), its scores are mapped to "
                f"[label_min, label_max], and a default would move every score; add `{field}` (the {end} label of "
                f"its training data) to it, or pass `{field}=` when loading."
            )


_UNIONS = (typing.Union, type(int | None))  # `Union[X, Y]` and `X | Y` (types.UnionType)


def has_type(value: Any, hint: Any) -> bool:
    """Whether `value` has the type `hint` (an evaluated annotation), by the rules of this module's docstring."""
    origin = typing.get_origin(hint)
    if origin in _UNIONS:
        return any(has_type(value, option) for option in typing.get_args(hint))
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return has_type(value, int) or (isinstance(value, float) and math.isfinite(value))
    if origin in (list, tuple):  # JSON turns tuples into lists, and a tuple is a fine list of values
        if not isinstance(value, (list, tuple)):
            return False
        items = typing.get_args(hint)
        if origin is tuple and items and items[-1] is not Ellipsis:
            return len(value) == len(items) and all(map(has_type, value, items))
        return all(has_type(item, items[0]) for item in value) if items else True
    return isinstance(value, origin or hint)


def check_type(owner: str, field: str, value: Any, annotation: Any, hint: Any) -> None:
    """Raise a ValueError naming `field` of config class `owner` unless `value` has type `hint`; `annotation` is the
    annotation as written (shown in the message)."""
    if has_type(value, hint):
        return
    expected = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
    finite = " with finite numbers" if _has_non_finite(value) else ""
    raise ValueError(f"{owner} field `{field}` must be `{expected}`{finite}, got {value!r} ({type(value).__name__}).")


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(map(_has_non_finite, value))
    return isinstance(value, float) and not math.isfinite(value)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance: the fewest single-character insertions, deletions and substitutions from `a` to `b`."""
    row = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        diagonal, row[0] = row[0], i
        for j, char_b in enumerate(b, start=1):
            diagonal, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, diagonal + (char_a != char_b))
    return row[-1]


def closest_name(name: str, candidates: "list[str]") -> "str | None":
    """The first of `candidates` nearest to `name` if at most a third of its characters differ (a typo), else None.

    What `difflib.get_close_matches(name, candidates, n=1)` gives for typos; exported code may not import difflib.
    """
    best = min(candidates, key=lambda candidate: edit_distance(name, candidate), default=None)
    return best if best is not None and edit_distance(name, best) <= max(1, len(name) // 3) else None


def check_known_keys(owner: str, fields: "tuple[str, ...]", keys: "list[str]", backbone_config: Any = None) -> None:
    """Raise a ValueError for the first of `keys` that is neither one of `fields` nor a generic transformers key,
    saying that it belongs to the backbone's config, or naming its closest field."""
    if isinstance(backbone_config, PretrainedConfig):
        backbone_config = backbone_config.to_dict()
    for key in keys:
        if key in fields or key in TRANSFORMERS_CONFIG_KEYS:
            continue
        message = f"Unknown {owner} field `{key}`"
        close = closest_name(key, [*fields, *sorted(TRANSFORMERS_CONFIG_KEYS)])
        if isinstance(backbone_config, dict) and key in backbone_config:
            message += f": it is a field of the backbone's config (`backbone_config.{key}`), not of {owner}."
        elif close:
            message += f"; did you mean `{close}`?"
        else:
            message += f"; the {owner} fields are {list(fields)}."
        raise ValueError(message)


class PairzooConfig(PretrainedConfig):
    """Base of every pairzoo method config: checks the keys and the types of the arguments of every instantiation
    against the signature of the subclass's `__init__`, before that `__init__` runs (see this module's docstring)."""

    def __init_subclass__(cls, **kwargs):
        init = cls.__dict__.get("__init__")  # read first: transformers gives a class without one a generic `__init__`
        super().__init_subclass__(**kwargs)
        if init is not None:  # its own fields, then those of a config it extends (reached through `**kwargs`)
            own, hints = init_parameters(init), typing.get_type_hints(init)
            inherited = getattr(cls, "_declared_fields", ())
            cls._declared_fields = own + tuple(name for name in inherited if name not in own)
            types = {name: (init.__annotations__[name], hints[name]) for name in own if name in hints}
            cls._declared_types = {**getattr(cls, "_declared_types", {}), **types}

    def __new__(cls, *args, **kwargs):
        fields = getattr(cls, "_declared_fields", None)
        if fields is not None:
            arguments = {**dict(zip(fields, args)), **kwargs}
            unknown = [key for key in kwargs if key not in fields]
            check_known_keys(cls.__name__, fields, unknown, arguments.get("backbone_config"))
            for name, (annotation, hint) in cls._declared_types.items():
                if name in arguments:
                    check_type(cls.__name__, name, arguments[name], annotation, hint)
        return super().__new__(cls)

    def revalidate(self) -> None:
        """Run every check of this config again on its current values: a field set after construction (e.g.
        `config.alpha = -1.0`) raises the same ValueError, naming the field, as passing it to the constructor would.
        Models call it when they are built from the config."""
        values = {name: getattr(self, name) for name in self._declared_fields if hasattr(self, name)}
        type(self)(num_labels=self.num_labels, **values)

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path: Any, **kwargs) -> "tuple[dict, dict]":
        """transformers' reading of a saved config.json (`from_pretrained` of this config or of a model), refused
        unless it is a save of this class: a config.json without `model_type`, or with another one (another method's
        export, a plain backbone), is a ValueError naming the file and both model types, before its fields are read
        as this class's."""
        config_dict, unused = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        saved_type = config_dict.get("model_type")
        if saved_type != cls.model_type:
            source = saved_config_file(pretrained_model_name_or_path, kwargs.get("subfolder") or "")
            owner = f"{cls.__name__} and the {cls.model_type} model classes"
            if saved_type is None:
                raise ValueError(
                    f"{source!r} has no `model_type`: {owner} load saves whose `model_type` is {cls.model_type!r} "
                    "only (a save of this model states it)."
                )
            raise ValueError(
                f"{source!r} is the config of a {saved_type!r} model (`model_type`), not of a {cls.model_type!r} "
                f"one: {owner} cannot load it; load it with the {saved_type} classes (or transformers' Auto classes)."
            )
        return config_dict, unused


class LabelScaleConfig(PairzooConfig):
    """Base of configs with a regression label scale, `label_min` and `label_max` (checked by `check_label_scale`).

    A regression model (one label) maps its outputs to that scale, so a saved config must state it: both fields are
    always written, and reading a one-label config without one of them (`from_pretrained`, `AutoConfig`,
    `from_dict`) is a ValueError naming the field and the file (`check_saved_label_scale`), where the constructor's
    default would silently move every score. A keyword of the load (`from_pretrained(folder, label_min=0.0)`)
    supplies a missing value; a config built by its constructor (`create_model`) keeps the defaults.
    """

    @classmethod
    def get_config_dict(cls, pretrained_model_name_or_path: Any, **kwargs) -> "tuple[dict, dict]":
        config_dict, unused = super().get_config_dict(pretrained_model_name_or_path, **kwargs)
        source = saved_config_file(pretrained_model_name_or_path, kwargs.get("subfolder") or "")
        check_saved_label_scale(cls.__name__, config_dict, kwargs, repr(source))
        return config_dict, unused

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs) -> "LabelScaleConfig":
        check_saved_label_scale(cls.__name__, config_dict, kwargs, "the saved config (config.json)")
        given = {field: kwargs.pop(field) for field in LABEL_SCALE_FIELDS if field in kwargs}
        return super().from_dict({**config_dict, **given}, **kwargs)

    def to_diff_dict(self) -> dict:
        diff = super().to_diff_dict()
        for field in LABEL_SCALE_FIELDS:
            diff.setdefault(field, getattr(self, field))
        return diff


class LabelledConfig(LabelScaleConfig):
    """Base of configs whose heads may be classifiers: `num_labels` survives a save/load round trip.

    transformers' `to_diff_dict` drops `id2label` when it equals the two-label default (`LABEL_0`, `LABEL_1`); a reload
    would then build a one-label regression head. The labels are always written.
    """

    def to_diff_dict(self) -> dict:
        diff = super().to_diff_dict()
        diff.setdefault("id2label", {str(i): label for i, label in self.id2label.items()})
        return diff

"""Validation helpers shared by every pairzoo configuration.

Hub exports inline this module into each exported configuration file, so it imports transformers and the standard
library only.

How a configuration declares its fields, in transformers 5's style: every method config derives from `PairzooConfig`
(directly or through `LabelScaleConfig` / `LabelledConfig`), which transformers makes a keyword-only dataclass, and
declares each hyper-parameter as a typed class field with its default (`alpha: float = 2.0`). A config extending
another one declares its new fields the same way. Every instantiation is then checked (`PairzooConfig.__post_init__`):

- a keyword that is neither a field nor one of transformers' generic config keys (`TRANSFORMERS_CONFIG_KEYS`) is a
  ValueError naming it and its closest field (`closest_name`), or the backbone config it belongs to;
- the value of every field must have its declared type (`check_type`): `bool` only True/False, `int` an int but not a
  bool, `float` a finite int or float (stored as a float), `str` a string, `None` only where the type allows it,
  `list[X]` a list (or tuple, stored as a list) of X;
- `derive_defaults` fills in what a field's `None` stands for where that depends on other fields or the backbone;
- every `validate_*` method of the pairzoo classes (choices, ranges, checks across fields) runs, base classes first.

`validate()` runs the type checks and hooks again on the current values: models call it when they are built and
`save_pretrained` before it writes, so a value set after construction (`config.alpha = float("nan")`) gets the same
one-line ValueError naming the field.

A saved config.json read by `from_pretrained` must be a save of the class reading it (`PairzooConfig.get_config_dict`:
its `model_type`), and a regression config must state its label scale (`LabelScaleConfig`).
"""

import dataclasses
import difflib
import functools
import math
import typing
from typing import Any

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec

# The backbone's own config lives inside the method's config, so `from_pretrained(dir)` rebuilds everything offline.
BACKBONE_SUB_CONFIG = {"backbone_config": SubConfigSpec(config_class=AutoConfig, model_type="bert", optional=True)}

# Generic keys transformers reads from the keyword arguments of any config, or writes onto any config.json, beyond the
# fields of `PretrainedConfig` and the keys of `PretrainedConfig().to_dict()` (both added below, so the
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


TRANSFORMERS_CONFIG_KEYS = frozenset(
    {f.name for f in dataclasses.fields(PretrainedConfig)}
    | set(PretrainedConfig().to_dict())
    | set(_EXTRA_TRANSFORMERS_KEYS)
)


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


def normalized(value: Any, hint: Any) -> Any:
    """`value` (which has type `hint`) as it is stored: an int given for a `float` becomes a float, a tuple given for a
    `list[...]` becomes a list."""
    origin = typing.get_origin(hint)
    if origin in _UNIONS:
        option = next(option for option in typing.get_args(hint) if has_type(value, option))
        return normalized(value, option)
    if hint is float:
        return float(value)
    if origin is list:
        items = typing.get_args(hint)
        return [normalized(item, items[0]) if items else item for item in value]
    return value


def check_type(owner: str, field: str, value: Any, hint: Any) -> None:
    """Raise a ValueError naming `field` of config class `owner` unless `value` has type `hint`."""
    if has_type(value, hint):
        return
    expected = hint.__name__ if isinstance(hint, type) else str(hint)
    finite = " with finite numbers" if _has_non_finite(value) else ""
    raise ValueError(f"{owner} field `{field}` must be `{expected}`{finite}, got {value!r} ({type(value).__name__}).")


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, (list, tuple)):
        return any(map(_has_non_finite, value))
    return isinstance(value, float) and not math.isfinite(value)


def closest_name(name: str, candidates: "list[str]") -> "str | None":
    """The candidate nearest to `name` when it looks like a typo of it, else None."""
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return close[0] if close else None


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


def problem_type_error(problem_type: str, num_labels: int) -> ValueError:
    """The error for a `problem_type` that does not fit `num_labels` (as when a saved model is loaded with another
    `num_labels`), saying what to give."""
    return ValueError(
        f"`problem_type` {problem_type!r} does not fit `num_labels` = {num_labels}: give the problem type of the head "
        "with its `num_labels` ('regression' for 1, 'single_label_classification' for classes) or None."
    )


class PairzooConfig(PretrainedConfig):
    """Base of every pairzoo method config (see this module's docstring): typed fields, unknown keys refused with
    their closest field, `derive_defaults` and `validate_*` hooks, all run by `validate()`."""

    sub_configs_defaults = BACKBONE_SUB_CONFIG

    backbone_config: PretrainedConfig | dict | None = None

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs) -> "PairzooConfig":
        """transformers' `from_dict`, with a given `problem_type` and `id2label` built into the config together with
        `num_labels` (transformers sets them after construction, so a new head's labels would be checked against
        the saved head's problem type). A given `num_labels` of another width than the saved `id2label` (and no
        `id2label`) describes a new head: the saved label names are dropped, so that what is derived from the labels
        (Comateformer's problem type) is derived from the new width."""
        given = {field: kwargs.pop(field) for field in ("problem_type", "id2label") if field in kwargs}
        saved = config_dict.get("id2label")
        if "id2label" not in given and saved is not None and kwargs.get("num_labels") not in (None, len(saved)):
            config_dict = {k: v for k, v in config_dict.items() if k not in ("id2label", "label2id")}
        return super().from_dict({**config_dict, **given}, **kwargs)

    @classmethod
    def declared_fields(cls) -> "tuple[str, ...]":
        """The fields pairzoo declares on this class (its own and inherited ones), in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls) if f.name not in _TRANSFORMERS_FIELDS)

    def __post_init__(self, **kwargs) -> None:
        owner = type(self).__name__
        check_known_keys(owner, self.declared_fields(), list(kwargs), self.backbone_config)
        self.backbone_config = coerce_backbone_config(self.backbone_config)
        hints = _field_types(type(self))
        for name in self.declared_fields():
            check_type(owner, name, getattr(self, name), hints[name])
            setattr(self, name, normalized(getattr(self, name), hints[name]))
        self.derive_defaults(kwargs)
        super().__post_init__(**kwargs)
        self.validate()

    def derive_defaults(self, kwargs: dict) -> None:
        """Fill in the values a field's `None` stands for (they may depend on the backbone) and defaults of
        transformers' keys in `kwargs` (e.g. `num_labels`), before transformers reads them."""

    def backbone_max_length(self) -> "int | None":
        """The most tokens one input of the backbone can hold (`max_sequence_length`); None where unstated."""
        return max_sequence_length(self.backbone_config)

    def validate_problem_type(self) -> None:
        """transformers' `problem_type`: None, or the one a pairzoo head has for `num_labels` ("regression" for one
        score, "single_label_classification" for classes); pairzoo has no multi-label head."""
        if self.problem_type is None:
            return
        check_choice("problem_type", self.problem_type, ("regression", "single_label_classification"))
        if (self.problem_type == "regression") != (self.num_labels == 1):
            raise problem_type_error(self.problem_type, self.num_labels)

    def validate_classifier_dropout(self) -> None:
        """`classifier_dropout`, in the configs that declare it: None (the backbone's dropout) or a probability."""
        dropout = getattr(self, "classifier_dropout", None)
        if dropout is not None:
            check_range("classifier_dropout", dropout, 0.0, 1.0)

    def validate(self) -> None:
        """Check every field again on its current values: its type, then each `validate_*` hook of the pairzoo
        classes (base classes first), then transformers' own checks. A field set after construction (e.g.
        `config.alpha = -1.0`) raises the ValueError, naming the field, its constructor would; models call this
        when they are built, and `save_pretrained` before it writes."""
        owner = type(self).__name__
        hints = _field_types(type(self))
        for name in self.declared_fields():
            check_type(owner, name, getattr(self, name), hints[name])
        for klass in reversed(type(self).__mro__):
            if isinstance(klass, type) and issubclass(klass, PairzooConfig):
                for name, member in vars(klass).items():
                    if name.startswith("validate_") and callable(member):
                        member(self)
        super().validate()

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


_TRANSFORMERS_FIELDS = frozenset(f.name for f in dataclasses.fields(PretrainedConfig))


@functools.cache
def _field_types(cls: type) -> dict:
    """The annotation of each pairzoo field of config class `cls` (a type, as written without
    `from __future__ import annotations`)."""
    hints = {f.name: f.type for f in dataclasses.fields(cls) if f.name not in _TRANSFORMERS_FIELDS}
    for name, hint in hints.items():
        if isinstance(hint, str):
            raise TypeError(f"{cls.__name__} field `{name}` is annotated with the string {hint!r}: write the type.")
    return hints


class LabelScaleConfig(PairzooConfig):
    """Base of configs with a regression label scale, `label_min` and `label_max`, and one label by default.

    A regression model (one label) maps its outputs to that scale, so a saved config must state it: both fields are
    always written, and reading a one-label config without one of them (`from_pretrained`, `AutoConfig`,
    `from_dict`) is a ValueError naming the field and the file (`check_saved_label_scale`), where the default would
    silently move every score. A keyword of the load (`from_pretrained(folder, label_min=0.0)`) supplies a missing
    value; a config built by its constructor (`create_model`) keeps the defaults.

    Args:
        label_min (`float`, *optional*, defaults to 1.0):
            Lowest label of the regression scale; labels are mapped to [0, 1] for the loss and predictions back.
        label_max (`float`, *optional*, defaults to 5.0):
            Highest label of the regression scale.
    """

    label_min: float = 1.0
    label_max: float = 5.0

    def derive_defaults(self, kwargs: dict) -> None:
        super().derive_defaults(kwargs)
        if self.id2label is None:
            kwargs.setdefault("num_labels", 1)

    def validate_label_scale(self) -> None:
        check_label_scale(self.label_min, self.label_max)

    def validate_num_labels(self) -> None:
        if self.num_labels < 1:
            raise ValueError(f"`num_labels` must be >= 1, got {self.num_labels}.")

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

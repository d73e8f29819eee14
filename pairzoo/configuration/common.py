"""Validation helpers shared by every pairzoo configuration.

Hub exports inline this module into each exported configuration file, so it imports transformers only.
"""

from typing import Any

from transformers import AutoConfig, PretrainedConfig
from transformers.configuration_utils import SubConfigSpec

# The backbone's own config lives inside the method's config, so `from_pretrained(dir)` rebuilds everything offline.
BACKBONE_SUB_CONFIG = {"backbone_config": SubConfigSpec(config_class=AutoConfig, model_type="bert", optional=True)}


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


class LabelledConfig(PretrainedConfig):
    """Base of configs whose heads may be classifiers: `num_labels` survives a save/load round trip.

    transformers' `to_diff_dict` drops `id2label` when it equals the two-label default (`LABEL_0`, `LABEL_1`); a reload
    would then build a one-label regression head. The labels are always written.
    """

    def to_diff_dict(self) -> dict:
        diff = super().to_diff_dict()
        diff.setdefault("id2label", {str(i): label for i, label in self.id2label.items()})
        return diff

"""Building blocks shared by pairzoo models: the pretrained-backbone base class, pooling and the C-STS head.

Hub exports inline this module into each exported modeling file, so it imports torch, transformers and the standard
library only.
"""

import functools
import inspect
import os
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoModel, PreTrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.utils import (
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
    ModelOutput,
    cached_file,
    logging,
)

from .encoders import hidden_activation, hidden_dropout

logger = logging.get_logger(__name__)

# `from_pretrained` keyword arguments that say where a checkpoint's files are.
_HUB_KWARGS = ("cache_dir", "local_files_only", "token", "revision", "subfolder")


def build_backbone(backbone_config) -> PreTrainedModel:
    """Randomly initialised encoder for `backbone_config`, without BERT's pooler (the heads read hidden states)."""
    if backbone_config is None:
        raise ValueError("`backbone_config` is required to build a model; use `from_backbone(name_or_path)`.")
    try:
        return AutoModel.from_config(backbone_config, add_pooling_layer=False)
    except TypeError:  # encoders without a pooler (e.g. DistilBERT) do not take the argument
        return AutoModel.from_config(backbone_config)


def pool_hidden_states(hidden_states: torch.Tensor, attention_mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """(B, L, d) -> (B, d): first token (`cls`) or the mean over non-padding tokens (`mean`). Padding positions are
    left out by selection, not by a zero weight, so a non-finite state there (eager ModernBERT in float64 leaves NaN
    on padding outside every sliding window) does not reach the mean."""
    if pooling == "cls":
        return hidden_states[:, 0]
    if pooling == "mean":
        mask = attention_mask.unsqueeze(-1).bool()
        total = hidden_states.masked_fill(~mask, 0.0).sum(1)
        return total / mask.sum(1).to(hidden_states.dtype).clamp_min(1e-9)
    raise ValueError(f"Unknown pooling {pooling!r}.")


# Set to 1 to run `check_input_values` on every forward pass (debugging: it reads tensor values, a host-device
# synchronisation per step on an accelerator).
CHECK_INPUTS_VARIABLE = "PAIRZOO_CHECK_INPUTS"


def input_vocab_size(config) -> "int | None":
    """The vocabulary size token ids are checked against: the config's own `vocab_size`, else its backbone's."""
    backbone_config = getattr(config, "backbone_config", None)
    return getattr(config, "vocab_size", None) or getattr(backbone_config, "vocab_size", None)


def check_input_values(inputs: dict, vocab_size: "int | None", num_labels: int = 1) -> None:
    """Reject model inputs whose values are bad with a `ValueError` naming the field: token ids outside
    [0, `vocab_size`) in any `input_ids*` (an `IndexError` deep in the embedding otherwise), `mask_positions` outside
    the sequence, NaN or infinite regression `labels` (`num_labels == 1`; a NaN loss otherwise), class `labels`
    outside [0, `num_labels`).

    These checks read tensor values, so they run where inputs enter, on CPU tensors: the collators
    (`pairzoo.training.collators`) and the pipelines. A model's forward runs them only when the environment variable
    `PAIRZOO_CHECK_INPUTS` is 1 (`check_forward_inputs`). `vocab_size` None skips the token-id check.
    """
    length = None
    for name, ids in inputs.items():
        if not name.startswith("input_ids") or not isinstance(ids, torch.Tensor) or not ids.numel():
            continue
        if vocab_size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
            raise ValueError(f"`{name}` holds token ids outside [0, {vocab_size}) (the vocabulary size).")
        length = ids.shape[-1] if name == "input_ids" else length
    positions = inputs.get("mask_positions")
    if isinstance(positions, torch.Tensor) and length is not None:
        if bool(((positions < 0) | (positions >= length)).any()):
            raise ValueError(f"`mask_positions` must lie in [0, {length}), got {positions.view(-1).tolist()}.")
    labels = inputs.get("labels")
    if not isinstance(labels, torch.Tensor) or not labels.numel():
        return
    if num_labels == 1:
        if labels.is_floating_point() and not bool(torch.isfinite(labels).all()):
            raise ValueError("`labels` contains NaN or infinite values.")
    elif int(labels.min()) < 0 or int(labels.max()) >= num_labels:
        raise ValueError(f"`labels` must be class indices in [0, {num_labels}), got {labels.tolist()}.")


@functools.cache
def _forward_parameters(forward: object) -> "tuple[frozenset[str], bool]":
    """The argument names a forward function takes, and whether it also takes any keyword (`**kwargs`). Keyed by the
    function, not its class: a forward replaced on the class (a wrapper, a patch) is read afresh."""
    parameters = inspect.signature(forward).parameters.values()
    return frozenset(p.name for p in parameters), any(p.kind is p.VAR_KEYWORD for p in parameters)


# transformers' usual forward arguments: wrappers pass them all (PEFT's sequence-classification model passes
# `input_ids`, `attention_mask`, `inputs_embeds`, `output_attentions` and `output_hidden_states`, None when unused).
STANDARD_FORWARD_ARGUMENTS = frozenset(
    {
        "input_ids",
        "attention_mask",
        "token_type_ids",
        "position_ids",
        "inputs_embeds",
        "output_attentions",
        "output_hidden_states",
    }
)


def check_forward_inputs(module: nn.Module, args: tuple, kwargs: dict) -> "tuple[tuple, dict] | None":
    """Reject malformed model inputs with a `ValueError` naming the field, before they fail deep inside the encoder
    (a silently broadcast label batch, say), with checks that read no tensor value, so no host-device
    synchronisation: every `input_ids*` tensor must be integer and 2-D, its `attention_mask*` of the same shape, and
    `labels` and `mask_positions` one per row; `output_hidden_states` / `output_attentions` True on the config only
    where the forward can return them (it takes the flag, or any keyword). With the environment variable
    `PAIRZOO_CHECK_INPUTS=1`, also the model's value checks (`PairzooPreTrainedModel.check_inputs`, which otherwise
    run where inputs enter: collators and pipelines).

    One of transformers' usual arguments (`STANDARD_FORWARD_ARGUMENTS`) that the forward does not take is dropped
    when it is None, as a wrapper passes it unused; given a value, the forward refuses it (Python's TypeError naming
    it).

    Registered as a forward pre-hook by `PairzooPreTrainedModel.post_init`.
    """
    accepted, any_keyword = _forward_parameters(type(module).forward)
    unset = [k for k, v in kwargs.items() if v is None and k in STANDARD_FORWARD_ARGUMENTS and k not in accepted]
    if unset:
        kwargs = {k: v for k, v in kwargs.items() if k not in unset}
    inputs = dict(kwargs)
    if args and isinstance(args[0], torch.Tensor):
        inputs.setdefault("input_ids", args[0])
    batch_size = None
    for name, ids in inputs.items():
        if not name.startswith("input_ids") or not isinstance(ids, torch.Tensor):
            continue
        if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
            raise ValueError(f"`{name}` must hold integer token ids, got dtype {ids.dtype}.")
        if ids.dim() != 2:
            raise ValueError(f"`{name}` must be (batch_size, sequence_length), got shape {tuple(ids.shape)}.")
        mask_name = "attention_mask" + name[len("input_ids") :]
        mask = inputs.get(mask_name)
        if isinstance(mask, torch.Tensor) and mask.shape != ids.shape:
            raise ValueError(f"`{mask_name}` has shape {tuple(mask.shape)} but `{name}` has {tuple(ids.shape)}.")
        batch_size = ids.shape[0] if batch_size is None else batch_size
    for flag in ("output_hidden_states", "output_attentions"):
        if getattr(module.config, flag, False) and flag not in accepted and not any_keyword:
            raise ValueError(
                f"`{flag}` is True on the config, but {type(module).__name__} has no per-layer "
                f"{flag[len('output_') :]} to return (its forward takes no `{flag}`); set it to False."
            )
    labels = inputs.get("labels")
    if isinstance(labels, torch.Tensor) and batch_size is not None:
        check_labels(labels, batch_size, getattr(module.config, "num_labels", 1))
    positions = inputs.get("mask_positions")
    if isinstance(positions, torch.Tensor) and batch_size is not None and positions.numel() != batch_size:
        raise ValueError(
            f"`mask_positions` has shape {tuple(positions.shape)}; expected one position per row ({batch_size})."
        )
    if os.environ.get(CHECK_INPUTS_VARIABLE) == "1":
        module.check_inputs(inputs)
    return (args, kwargs) if unset else None


# The module names PEFT's sequence-classification model keeps training by default (`modules_to_save`).
PEFT_CLASSIFIER_NAMES = ("classifier", "score")


def _is_peft_module(module: nn.Module) -> bool:
    """Whether `module` is one of PEFT's (an adapter layer or a `modules_to_save` wrapper)."""
    return type(module).__module__.split(".")[0] == "peft"


def warn_frozen_method_modules(module: nn.Module, args: tuple) -> None:
    """On the first training forward (training mode) of a model that carries PEFT adapters (`peft_config`, which
    `get_peft_model` and transformers' `add_adapter` set), log a warning naming the method's modules
    (`method_modules`) whose own parameters no longer train (adapters inside one do not count): PEFT freezes every
    parameter outside its adapters and its `modules_to_save`, so the method would silently run with its modules as
    initialised."""
    if not module.training or getattr(module, "_peft_checked", False) or not getattr(module, "peft_config", None):
        return
    module._peft_checked = True
    adapters = {  # parameters of adapter layers (their `adapter_layer_names`), which train in place of the layer's;
        id(p)  # a `modules_to_save` wrapper (it keeps its `original_module`) trains a copy of the module itself
        for m in module.modules()
        if not hasattr(m, "original_module")
        for attr in getattr(m, "adapter_layer_names", ())
        if isinstance(getattr(m, attr, None), nn.Module)
        for p in getattr(m, attr).parameters()
    }
    frozen = [
        name
        for name in module.method_modules()
        if not any(p.requires_grad for p in module.get_submodule(name).parameters() if id(p) not in adapters)
    ]
    if frozen:
        logger.warning(
            f"{type(module).__name__} trains with PEFT adapters but its modules {frozen} are frozen, so the method "
            "runs with them as initialised: create the adapters with `LoraConfig(..., "
            "modules_to_save=model.method_modules())` (the model before `get_peft_model`)."
        )


def check_labels(labels: torch.Tensor, batch_size: int, num_labels: int) -> None:
    """`labels` must be one per row, `(batch_size,)` or `(batch_size, 1)`, and class indices of an integer dtype when
    `num_labels > 1` (a float class label would be truncated, and transformers reads float labels as multi-label
    targets, which no pairzoo head has); a ValueError naming `labels` otherwise. Reads no tensor value."""
    if labels.dim() == 0 or labels.shape[0] != batch_size or labels.numel() != batch_size:
        expected = f"({batch_size},) or ({batch_size}, 1)"
        raise ValueError(f"`labels` has shape {tuple(labels.shape)}; expected one label per row: {expected}.")
    if num_labels > 1 and (labels.is_floating_point() or labels.is_complex() or labels.dtype == torch.bool):
        raise ValueError(
            f"`labels` must be integer class indices for {num_labels} classes, got dtype {labels.dtype} (one-hot or "
            "multi-label targets are not supported)."
        )


def non_finite_tensors(tensors: "dict[str, torch.Tensor]") -> "list[str]":
    """Names of the floating-point tensors holding NaN or infinite values (tensors on the meta device are skipped)."""
    return sorted(
        name
        for name, tensor in tensors.items()
        if tensor.is_floating_point() and not tensor.is_meta and not bool(torch.isfinite(tensor).all())
    )


def _weights_name(path: str, hub_kwargs: dict) -> str:
    """The name of the weights file `from_pretrained(path)` reads, for messages: the first usual name present."""
    for name in (SAFE_WEIGHTS_NAME, SAFE_WEIGHTS_INDEX_NAME, WEIGHTS_NAME, WEIGHTS_INDEX_NAME):
        found = cached_file(
            path,
            name,
            _raise_exceptions_for_missing_entries=False,
            _raise_exceptions_for_connection_errors=False,
            **hub_kwargs,
        )
        if found:
            return name
    return SAFE_WEIGHTS_NAME


class PairzooPreTrainedModel(PreTrainedModel):
    """Base of every pairzoo model that wraps a pretrained encoder in `self.backbone`.

    Parameters the method adds are initialised by `_init_weights` (normal with the backbone's `initializer_range`,
    zero biases, unit LayerNorms); the backbone keeps its own initialisation, and `from_backbone` then overwrites it
    with pretrained weights, so no new parameter is ever left uninitialised.

    The forward of every pairzoo model follows one API: it is decorated with transformers' `can_return_tuple`, so
    `return_dict=False` (the argument, else `config.return_dict`) returns `output.to_tuple()`; it takes its inputs,
    `labels`, `output_hidden_states` / `output_attentions` where its encoder can return them (`hidden_states` is
    always transformers' tuple of per-layer states; None takes the config's flag, as in transformers, and a config
    flag the forward cannot honour is a ValueError on the forward pass) and `output_internals` (also return the
    method's own internals), and nothing else: an unknown keyword is Python's TypeError naming it (one of
    transformers' usual arguments given as None, as wrappers such as PEFT pass them, is dropped). Regression
    logits are `(batch_size, 1)`, as in transformers' sequence classifiers, beside `scores` `(batch_size,)` on the
    label scale. Input checks that read no tensor value run on every forward (`check_forward_inputs`); value checks
    (`check_inputs`) run where inputs enter.
    """

    base_model_prefix = "backbone"
    # modules outside the backbone that the method keeps frozen (not listed by `method_modules`)
    frozen_modules: "tuple[str, ...]" = ()
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _supports_attention_backend = True
    # every loss is a batch mean: the Trainer must not pass `num_items_in_batch`, and scales it for accumulation
    accepts_loss_kwargs = False

    def __init__(self, config, *inputs, **kwargs) -> None:
        # a field set on the config after its construction gets the constructor's checks before anything is built
        config.validate()
        super().__init__(config, *inputs, **kwargs)

    def output_flags(
        self, output_hidden_states: "bool | None", output_attentions: "bool | None" = None
    ) -> "tuple[bool, bool]":
        """A forward's `output_hidden_states` and `output_attentions`, each the config's flag where the call gives None
        (as transformers models read them: `from_pretrained(path, output_hidden_states=True)` sets the config's)."""
        config = self.config
        return (
            bool(config.output_hidden_states if output_hidden_states is None else output_hidden_states),
            bool(config.output_attentions if output_attentions is None else output_attentions),
        )

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs) -> "PairzooPreTrainedModel":
        """`PreTrainedModel.from_pretrained` that refuses weights which do not fit, instead of reporting them.

        transformers initialises missing weights at random and ignores unexpected ones, with only a load report: an
        export whose config.json gained a layer, or whose weights file lost the classifier, would load and score
        noise. Here, when the checkpoint is a save of this method (its config.json has the method's `model_type`),
        a missing or unexpected weight is a `ValueError` naming the keys and the weights file. A save of another
        class of the method (e.g. the encoder class reading a classifier's save) may lack or add the parameters
        outside the shared backbone; a plain backbone checkpoint keeps transformers' rules, since the method's own
        parameters are new there. Size mismatches already raise in transformers (unless `ignore_mismatched_sizes`).
        Whatever the checkpoint, a non-finite loaded weight and an unreadable safetensors file are a `ValueError`
        naming the file. Trainer checkpoints are resumed with `load_state_dict`, not through this method. Given
        `num_labels` or `id2label` without `problem_type` (a new head, with `ignore_mismatched_sizes=True`), the saved
        `problem_type` is dropped: the new head's follows from its labels.
        """
        want_info = kwargs.pop("output_loading_info", False)
        hub_kwargs = {key: kwargs[key] for key in _HUB_KWARGS if key in kwargs}
        if "config" not in kwargs and "problem_type" not in kwargs and {"num_labels", "id2label"} & set(kwargs):
            # a new head's problem type follows its own labels, not the saved one (set first: the labels are checked
            # against it as they are set)
            kwargs = {"problem_type": None, **kwargs}
        try:
            model, info = super().from_pretrained(
                pretrained_model_name_or_path, *model_args, output_loading_info=True, **kwargs
            )
        except Exception as err:  # safetensors' own error type (a short or corrupt file) names no file
            if type(err).__module__.split(".")[0] != "safetensors":
                raise
            path = str(pretrained_model_name_or_path)
            weights = f"{path}/{_weights_name(path, hub_kwargs)}"
            raise ValueError(f"weights file {weights!r} is corrupt or unreadable: {err}.") from err
        if pretrained_model_name_or_path is not None:
            cls._refuse_unfit_weights(model, str(pretrained_model_name_or_path), info, hub_kwargs)
        return (model, info) if want_info else model

    @classmethod
    def _refuse_unfit_weights(cls, model: PreTrainedModel, path: str, info: dict, hub_kwargs: dict) -> None:
        """The checks of `from_pretrained` on a loaded `model` (`info`: its loading info)."""
        try:
            saved = PreTrainedConfig.get_config_dict(path, **hub_kwargs)[0]
        except OSError:  # weights without a config.json (the config was passed): not a pairzoo save
            saved = {}
        if saved.get("model_type") == cls.config_class.model_type:
            same_class = cls.__name__ in (saved.get("architectures") or [cls.__name__])
            shared = cls.base_model_prefix + "."
            problems = {
                kind: sorted(key for key in info[kind] if same_class or key.startswith(shared))
                for kind in ("missing_keys", "unexpected_keys")
            }
            if any(problems.values()):
                details = "; ".join(f"{kind} ({len(keys)}): {keys[:5]}" for kind, keys in problems.items() if keys)
                raise ValueError(
                    f"'{path}/config.json' does not match {_weights_name(path, hub_kwargs)} in "
                    f"{path!r}: {details}. Loading would leave missing weights random and unexpected ones unused: "
                    "config.json was changed or the weights file damaged."
                )
        bad = non_finite_tensors(model.state_dict())
        if bad:
            raise ValueError(
                f"weights file '{path}/{_weights_name(path, hub_kwargs)}' is corrupt: tensors {bad[:5]} hold "
                "non-finite (NaN or infinite) values."
            )

    def post_init(self) -> None:
        """Initialise weights (transformers) and install the input checks (`check_forward_inputs`) and the check that
        adapters on the backbone left the method's modules trainable (`warn_frozen_method_modules`)."""
        super().post_init()
        self.register_forward_pre_hook(check_forward_inputs, with_kwargs=True)
        self.register_forward_pre_hook(warn_frozen_method_modules)

    def method_modules(self) -> "list[str]":
        """Names of the modules outside the backbone that hold the model's own parameters (the method's modules and
        its head), in registration order; not those the method keeps frozen (`frozen_modules`). With PEFT adapters on
        the backbone, pass them as `LoraConfig(modules_to_save=model.method_modules())`: `get_peft_model` freezes
        every other parameter (`task_type="SEQ_CLS"` keeps only modules whose name ends in `classifier` or `score`).
        A module holding such a classifier, a `ModuleList` or a `ModuleDict` is named by its parts, so that PEFT
        wraps no module inside another it wraps."""
        names: list[str] = []

        def visit(prefix: str, module: nn.Module) -> None:
            for name, child in module.named_children():
                path = prefix + name
                if path == self.base_model_prefix or path in self.frozen_modules:
                    continue
                if next(child.parameters(), None) is None:
                    continue
                holds_classifier = any(n.endswith(PEFT_CLASSIFIER_NAMES) for n, _ in child.named_modules() if n)
                is_container = isinstance(child, (nn.ModuleList, nn.ModuleDict)) or holds_classifier
                if is_container and not path.endswith(PEFT_CLASSIFIER_NAMES) and not _is_peft_module(child):
                    visit(path + ".", child)
                else:
                    names.append(path)

        visit("", self)
        return names

    def _set_gradient_checkpointing(self, enable: bool = True, **kwargs) -> None:
        """transformers' switch behind `gradient_checkpointing_enable()` / `activation_checkpointing_enable()`, with
        an error naming the backbone where its architecture has no checkpointing in transformers (MPNet, ALBERT)
        instead of transformers' message naming the pairzoo class."""
        backbone = getattr(self, "backbone", None)
        if (
            enable
            and isinstance(backbone, PreTrainedModel)
            and not any(hasattr(module, "gradient_checkpointing") for module in backbone.modules())
        ):
            raise ValueError(
                f"gradient checkpointing: the {backbone.config.model_type} backbone ({type(backbone).__name__}) has "
                "no gradient checkpointing in transformers; train without it."
            )
        super()._set_gradient_checkpointing(enable, **kwargs)

    def resize_token_embeddings(
        self, new_num_tokens: "int | None" = None, pad_to_multiple_of: "int | None" = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """transformers' `resize_token_embeddings` (e.g. to `len(tokenizer)` after `tokenizer.add_tokens`): resizes the
        input embeddings (`get_input_embeddings()`, the backbone's) and returns them; new rows are initialised as
        transformers does (`mean_resizing`). The new size is recorded where the model is rebuilt from, so
        `save_pretrained` / `from_pretrained` keep it and the input checks accept the new ids: `vocab_size` of the
        backbone config, and of the method config where it has that field (siamese-matcher); transformers would set
        it on the method config, whose saved config.json then fails to load."""
        embeddings = self._resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        if new_num_tokens is None and pad_to_multiple_of is None:
            return embeddings
        size = embeddings.num_embeddings
        for config in (self.config.backbone_config, getattr(getattr(self, "backbone", None), "config", None)):
            if config is not None:
                config.vocab_size = size
        if getattr(self.config, "vocab_size", None) is not None:
            self.config.vocab_size = size
        return embeddings

    def check_inputs(self, inputs: dict) -> None:
        """The value checks of `check_input_values` on model inputs `inputs` (keyword -> tensor) against this model's
        vocabulary and labels: what the pipelines run on their CPU tensors before a forward pass (the collators run
        `check_input_values` itself), and the forward pass only with `PAIRZOO_CHECK_INPUTS=1`. A method with inputs
        of its own extends it."""
        check_input_values(inputs, input_vocab_size(self.config), getattr(self.config, "num_labels", 1))

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        std = getattr(self.config.backbone_config, "initializer_range", 0.02)
        if isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            if module.bias is not None:  # e.g. ModernBERT's norms have none
                init.zeros_(module.bias)

    @classmethod
    def from_backbone(
        cls, name_or_path: str, attn_implementation: "str | dict | None" = None, **method_kwargs
    ) -> "PairzooPreTrainedModel":
        """Build the method on a pretrained encoder (local folder or Hub id); `method_kwargs` go to the config.

        The backbone never keeps BERT's pooler; when the checkpoint has trained pooler weights, they are handed to
        `init_head_from_pooler`, so a first-token head can start where `BertForSequenceClassification` starts. A
        backbone that does not load (no weights, no or a broken config.json, offline) is a ValueError naming it.
        `attn_implementation` (as in `from_pretrained`; None: transformers' default) is the attention implementation
        of the method and of its encoder; transformers refuses an unknown one before reading the weights.
        """
        attention = {} if attn_implementation is None else {"attn_implementation": attn_implementation}
        try:
            pretrained, loading_info = AutoModel.from_pretrained(name_or_path, output_loading_info=True, **attention)
        except OSError as err:
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            message = f"`backbone` {str(name_or_path)!r} does not load as a pretrained encoder: {reason}."
            raise ValueError(message) from err
        pooler = getattr(pretrained, "pooler", None)
        if pooler is not None and any(key.startswith("pooler.") for key in loading_info["missing_keys"]):
            pooler = None  # the checkpoint has no trained pooler: nothing worth copying
        config = cls.config_class(backbone_config=pretrained.config, **method_kwargs, **attention)
        model = cls(config)
        state = {key: value for key, value in pretrained.state_dict().items() if not key.startswith("pooler.")}
        model.backbone.load_state_dict(state, strict=True)
        dense = pooler if isinstance(pooler, nn.Linear) else getattr(pooler, "dense", None)  # ALBERT: a bare Linear
        if isinstance(dense, nn.Linear):
            model.init_head_from_pooler(dense)
        model.config.backbone_config.name_or_path = str(name_or_path)
        return model

    def init_head_from_pooler(self, dense: nn.Linear) -> None:
        """Start the head from the checkpoint's trained pooler `dense` (Linear(d, d) before tanh); by default the
        method's head has no such layer and this does nothing."""


@dataclass
class ConditionalSimilarityOutput(ModelOutput):
    r"""
    Output of conditional-similarity models.

    Args:
        loss (`torch.FloatTensor` of shape `()`, *optional*, returned when `labels` is given):
            MSE on labels scaled to [0, 1] (regression) or cross-entropy (classification).
        logits (`torch.FloatTensor` of shape `(batch_size, num_labels)`):
            Regression (`num_labels == 1`): the prediction on the [0, 1] scale. Classification: unnormalised class
            scores.
        scores (`torch.FloatTensor` of shape `(batch_size,)`, *optional*, regression only):
            The prediction mapped back to the label scale, `label_min + (label_max - label_min) * logits[:, 0]`.
        hidden_states (`tuple(torch.FloatTensor)`, *optional*):
            Backbone hidden states, each `(batch_size, sequence_length, hidden_size)`, when asked for.
        attentions (`tuple(torch.FloatTensor)`, *optional*):
            Backbone attention probabilities, each `(batch_size, num_heads, sequence_length, sequence_length)`, when
            asked for (needs an attention implementation that returns them, e.g. `eager`).
    """

    loss: "torch.FloatTensor | None" = None
    logits: "torch.FloatTensor | None" = None
    scores: "torch.FloatTensor | None" = None
    hidden_states: "tuple[torch.FloatTensor, ...] | None" = None
    attentions: "tuple[torch.FloatTensor, ...] | None" = None


class ConditionalSimilarityHead(nn.Module):
    """The c-sts head: optional transform (dropout, Linear(d, d), activation), dropout, Linear(d, num_labels)."""

    def __init__(self, config) -> None:
        super().__init__()
        backbone = config.backbone_config
        hidden = backbone.hidden_size
        backbone_dropout = hidden_dropout(backbone)
        dropout = config.classifier_dropout if config.classifier_dropout is not None else backbone_dropout
        self.transform = (
            nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, hidden), ACT2FN[hidden_activation(backbone)])
            if config.use_transform
            else None
        )
        self.dropout = nn.Dropout(backbone_dropout)
        self.classifier = nn.Linear(hidden, config.num_labels)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """(B, d) -> (B, num_labels)."""
        if self.transform is not None:
            features = self.transform(features)
        return self.classifier(self.dropout(features))


def similarity_loss_and_scores(
    config, logits: torch.Tensor, labels: "torch.Tensor | None"
) -> "tuple[torch.Tensor | None, torch.Tensor, torch.Tensor | None]":
    """Loss, logits and label-scale scores of a head's raw output (B, num_labels).

    Regression (`num_labels == 1`) takes labels on the original scale and scales them to [0, 1], as the c-sts
    reference does; the loss is `config.regression_loss` (absent: "mse"): "mse" compares the raw output with them,
    "bce" is binary cross-entropy with logits (the sentence-transformers `CrossEncoder` recipe) and the prediction is
    sigmoid(raw output). `logits` (B, 1) is the prediction on [0, 1] (the `(batch_size, num_labels)` shape of
    transformers' sequence classifiers, which its text-classification pipeline and sentence-transformers'
    `CrossEncoder` read), `scores` (B,) the same on the label scale. Classification takes class indices.
    """
    span = config.label_max - config.label_min
    if config.num_labels == 1:
        raw = logits.squeeze(-1)
        bce = getattr(config, "regression_loss", "mse") == "bce"
        prediction = torch.sigmoid(raw) if bce else raw
        # on the label scale in float32 at least: a half-precision step there is coarse (bfloat16: 2**-7 at 1-2)
        scores = config.label_min + span * prediction.to(torch.promote_types(prediction.dtype, torch.float32))
        loss = None
        if labels is not None:
            target = (labels.reshape(raw.shape).to(raw.dtype) - config.label_min) / span
            loss_fn = nn.functional.binary_cross_entropy_with_logits if bce else nn.functional.mse_loss
            loss = loss_fn(raw, target)
        return loss, prediction.unsqueeze(-1), scores
    loss = None
    if labels is not None:
        loss = nn.functional.cross_entropy(logits, labels.long().view(-1))
    return loss, logits, None


def conditional_span_masks(
    input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> "tuple[torch.Tensor, torch.Tensor]":
    """Sentence and condition masks (B, L) of right-padded `[CLS] s1 SEP (s2 SEP) c SEP` inputs, without a tokenizer.

    The separator id is read from each example's last non-padding token (the final separator), so this works for any
    tokenizer. The condition part is every token after the second-to-last separator through the final one; the
    sentence part is everything before it, from the first token through the separator after the last sentence.
    Padding is in neither. These equal `encode_conditional_inputs(..., return_span_masks=True)` unless a condition
    itself contains the separator token; an input with a single separator has an empty condition part.
    """
    valid = attention_mask.bool()
    positions = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
    last = torch.where(valid, positions, -1).amax(1, keepdim=True)
    separator = input_ids.gather(1, last.clamp_min(0))
    earlier_separators = (input_ids == separator) & valid & (positions < last)
    boundary = torch.where(earlier_separators, positions, -1).amax(1, keepdim=True)
    split = torch.where(boundary >= 0, boundary + 1, last + 1)
    return (valid & (positions < split)).long(), (valid & (positions >= split)).long()

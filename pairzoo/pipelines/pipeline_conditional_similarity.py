"""Input encoding and the `conditional-similarity` pipeline.

The same `encode_conditional_inputs` serves training (collators) and inference (the pipeline), so both see identical
token sequences. Hub exports ship this file as-is: it imports torch and transformers only.
"""

from collections.abc import Callable, Sized
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset
from transformers import Pipeline
from transformers.pipelines.pt_utils import PipelineDataset, PipelineIterator
from transformers.utils import logging

from ..configuration.common import check_max_length, closest_name, max_sequence_length

logger = logging.get_logger(__name__)

# Characters that show nothing: Unicode's Default_Ignorable_Code_Point ranges (zero-width spaces and joiners,
# direction marks, word joiners, the BOM, variation selectors, Hangul fillers, tags), as (first, last) pairs.
_INVISIBLE_RANGES = (
    ("\u00ad", "\u00ad"),
    ("\u034f", "\u034f"),
    ("\u061c", "\u061c"),
    ("\u115f", "\u1160"),
    ("\u17b4", "\u17b5"),
    ("\u180b", "\u180f"),
    ("\u200b", "\u200f"),
    ("\u202a", "\u202e"),
    ("\u2060", "\u206f"),
    ("\u3164", "\u3164"),
    ("\ufe00", "\ufe0f"),
    ("\ufeff", "\ufeff"),
    ("\uffa0", "\uffa0"),
    ("\ufff0", "\ufff8"),
    ("\U0001bca0", "\U0001bca3"),
    ("\U0001d173", "\U0001d17a"),
    ("\U000e0000", "\U000e0fff"),
)


def is_visible(char: str) -> bool:
    """Whether a character shows something: not whitespace, not a control character, not default-ignorable."""
    if char.isspace() or char < " " or "\x7f" <= char <= "\x9f":
        return False
    return not any(first <= char <= last for first, last in _INVISIBLE_RANGES)


def validate_texts(field: str, texts: Any, optional: bool = False) -> "list[str] | None":
    """A list of non-empty strings (or None when the field is optional and absent).

    A single string or a sequence of strings (list, tuple, a dataset column) is accepted. Bytes, dicts, sets and
    numbers are a `ValueError` naming the field, as is a text with no visible character (only whitespace, control
    or zero-width characters, see `is_visible`) or one that is not encodable Unicode (a lone surrogate), so
    tokenizers never see input they would crash on or silently mangle.
    """
    if texts is None:
        if optional:
            return None
        raise ValueError(f"`{field}` is required.")
    if isinstance(texts, str):
        texts = [texts]
    if isinstance(texts, (bytes, bytearray, dict, set, frozenset)) or not hasattr(texts, "__iter__"):
        raise ValueError(f"`{field}` must be a string or a list of strings, got {type(texts).__name__}.")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise ValueError(f"`{field}`[{i}] must be a string, got {type(text).__name__}.")
        if not any(is_visible(char) for char in text):
            raise ValueError(f"`{field}`[{i}] is empty: it has no visible character.")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as err:
            raise ValueError(f"`{field}`[{i}] is not valid Unicode ({err.reason} at position {err.start}).") from err
    return texts


def _validate_fields(sentence1, sentence2, condition) -> "tuple[list[str], list[str] | None, list[str] | None]":
    """The three text fields as lists: `sentence1` non-empty, the optional ones of the same length."""
    sentence1 = validate_texts("sentence1", sentence1)
    if not sentence1:
        raise ValueError("`sentence1` is empty: give at least one text.")
    sentence2 = validate_texts("sentence2", sentence2, optional=True)
    condition = validate_texts("condition", condition, optional=True)
    for field, texts in (("sentence2", sentence2), ("condition", condition)):
        if texts is not None and len(texts) != len(sentence1):
            raise ValueError(f"`{field}` has {len(texts)} items but `sentence1` has {len(sentence1)}.")
    return sentence1, sentence2, condition


def default_max_length(tokenizer, backbone_config: Any = None) -> int:
    """The length inputs are truncated to when no `max_length` is given: the smaller of the tokenizer's own limit and
    the backbone's (`max_sequence_length`), whichever are known; 512 when neither is (tokenizers without a limit
    report a huge number)."""
    known = [
        limit
        for limit in (getattr(tokenizer, "model_max_length", None), max_sequence_length(backbone_config))
        if isinstance(limit, int) and 0 < limit <= 100_000
    ]
    return min(known) if known else 512


def _resolve_max_length(tokenizer, max_length: "int | None") -> int:
    """`max_length` as given (a positive integer), else `default_max_length(tokenizer)`. A length the model's
    positions cannot hold is refused where the model is known (the pipelines, `pairzoo.train`), never capped here."""
    if max_length is not None and (isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1):
        raise ValueError(f"`max_length` must be a positive integer or None, got {max_length!r}.")
    return max_length if max_length is not None else default_max_length(tokenizer)


def _check_room(tokenizer, max_length: int, pair: bool) -> None:
    """A ValueError naming `max_length` unless one text token per segment fits next to the tokenizer's special tokens
    (the tokenizer itself would silently return empty texts, or ignore `max_length`)."""
    needed = tokenizer.num_special_tokens_to_add(pair=pair) + (2 if pair else 1)
    if max_length < needed:
        layout = "a sentence pair" if pair else "each text"
        raise ValueError(
            f"`max_length`={max_length} leaves no room for {layout}: the tokenizer adds "
            f"{needed - (2 if pair else 1)} special tokens, so one token per text needs max_length >= {needed}."
        )


def _segment_ids(tokenizer, texts: "list[str]") -> "list[list[int]]":
    """Token ids of each text without special tokens: exactly the tokens the tokenizer gives each text of a pair
    (`tokenizer(a, b)` tokenizes `a` and `b` on their own), so no text gets a leading space or other join artefact."""
    return tokenizer(list(texts), add_special_tokens=False)["input_ids"]


def _special_token_template(tokenizer, texts: int) -> "list[list[int]]":
    """The special token ids the tokenizer's own template puts around `texts` texts (1: its single-text template,
    2: its pair template): `[before the first text, between two texts (pair only), after the last]`, each possibly
    empty. Read from the tokenizer's encoding of one-letter texts and its special tokens mask, so every tokenizer
    (BERT's `[CLS] A [SEP] B [SEP]`, RoBERTa's `<s> A </s></s> B </s>`) gives its own layout.

    A pair template whose special tokens after the first and after the second text do not both end in the same
    separator token is a ValueError: `s1 SEP s2 SEP c SEP` inputs and `conditional_span_masks` find the condition
    by it.
    """
    probe = tokenizer(*["a", "b"][:texts], return_special_tokens_mask=True)
    parts: list[list[int]] = [[]]
    after_special = True
    for token, special in zip(probe["input_ids"], probe["special_tokens_mask"]):
        if special:
            parts[-1].append(token)
        elif after_special:  # a text starts: the special tokens after it are the next part
            parts.append([])
        after_special = bool(special)
    if texts == 2 and (len(parts) != 3 or not parts[1] or not parts[2] or parts[1][-1] != parts[2][-1]):
        layout = " ".join(tokenizer.convert_ids_to_tokens(probe["input_ids"]))
        raise ValueError(
            f"The tokenizer ({type(tokenizer).__name__}) encodes a text pair as `{layout}`: cross-encoder inputs "
            "need a tokenizer whose pair template ends each text with the same separator token."
        )
    return parts


def _truncate_pair(first: "list[int]", second: "list[int]", budget: int) -> "tuple[list[int], list[int]]":
    """Drop tokens from the end of the longer sentence until both fit in `budget` tokens."""
    first, second = list(first), list(second)
    while len(first) + len(second) > budget:
        if len(first) >= len(second):
            first.pop()
        else:
            second.pop()
    return first, second


def encode_conditional_inputs(
    tokenizer,
    sentence1: "str | list[str]",
    sentence2: "str | list[str] | None" = None,
    condition: "str | list[str] | None" = None,
    max_length: "int | None" = None,
    return_span_masks: bool = False,
) -> "dict[str, torch.Tensor]":
    """Encode `[CLS] s1 SEP s2 SEP c SEP` (cross-encoder input) in the tokenizer's own template, padded to the
    longest example.

    The special tokens are the tokenizer's (`_special_token_template`): one text gets its single-text encoding, two
    its pair encoding (the ids of `tokenizer(s1, s2)`), and three chain the pair template, whatever it puts between
    its two texts also going between the second text and the condition: `[CLS] s1 [SEP] s2 [SEP] c [SEP]` for BERT,
    `<s> s1 </s></s> s2 </s></s> c </s>` for RoBERTa, XLM-R and MPNet. No token types are returned (the model's
    default, type 0, throughout).

    `sentence2` and `condition` are optional (pair tasks have no condition; conditional classification has no second
    sentence); given ones must be non-empty. When an example exceeds `max_length` the sentences are truncated (longest
    first), never the condition; a condition that cannot fit alone is an error. With `return_span_masks`, also returns
    `sentence_mask` (first token through the separators after the last sentence) and `condition_mask` (condition
    tokens plus the final separator); padding is in neither.
    """
    sentence1, sentence2, condition = _validate_fields(sentence1, sentence2, condition)
    single, pair = _special_token_template(tokenizer, 1), _special_token_template(tokenizer, 2)
    max_length = _resolve_max_length(tokenizer, max_length)
    pad_id = tokenizer.pad_token_id or 0

    ids1 = _segment_ids(tokenizer, sentence1)
    ids2 = _segment_ids(tokenizer, sentence2) if sentence2 is not None else None
    idsc = _segment_ids(tokenizer, condition) if condition is not None else None
    texts = 1 + (ids2 is not None) + (idsc is not None)
    before, between, after = pair if texts > 1 else (single[0], [], single[1])
    n_special = len(before) + (texts - 1) * len(between) + len(after)

    sequences, sentence_lengths = [], []
    for i in range(len(sentence1)):
        a, b = ids1[i], ids2[i] if ids2 is not None else []
        c = idsc[i] if idsc is not None else None
        budget = max_length - n_special - (len(c) if c is not None else 0)
        min_sentence_tokens = 1 + (ids2 is not None)
        if budget < min_sentence_tokens:
            if c is None:
                raise ValueError(
                    f"`max_length`={max_length} leaves no room for the sentences: the special tokens take "
                    f"{n_special} and each sentence needs at least one, so max_length must be >= "
                    f"{n_special + min_sentence_tokens}."
                )
            raise ValueError(
                f"`condition`[{i}] has {len(c)} tokens and cannot fit in max_length={max_length} next to the "
                "sentences; shorten the condition or raise max_length."
            )
        if ids2 is not None:
            a, b = _truncate_pair(a, b, budget)
        else:
            a = a[:budget]
        seq = before + a
        if ids2 is not None:
            seq += between + b
        if c is not None:
            seq += between
            sentence_lengths.append(len(seq))
            seq += c + after
        else:
            seq += after
            sentence_lengths.append(len(seq))
        sequences.append(seq)

    width = max(len(s) for s in sequences)
    input_ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, seq in enumerate(sequences):
        input_ids[i, : len(seq)] = torch.tensor(seq, dtype=torch.long)
        attention_mask[i, : len(seq)] = 1
    encoded = {"input_ids": input_ids, "attention_mask": attention_mask}
    if return_span_masks:
        positions = torch.arange(width).unsqueeze(0)
        lengths = attention_mask.sum(1, keepdim=True)
        split = torch.tensor(sentence_lengths).unsqueeze(1)
        encoded["sentence_mask"] = (positions < split).long()
        encoded["condition_mask"] = ((positions >= split) & (positions < lengths)).long()
    return encoded


def encode_tri_inputs(
    tokenizer,
    sentence1: "str | list[str]",
    sentence2: "str | list[str] | None" = None,
    condition: "str | list[str] | None" = None,
    max_length: "int | None" = None,
) -> "dict[str, torch.Tensor]":
    """Encode tri-encoder inputs: each text alone as `[CLS] text SEP`, padded per field to its longest example.

    Returns `input_ids`/`attention_mask` (sentence1), `input_ids_2`/`attention_mask_2` (sentence2, when given) and
    `input_ids_3`/`attention_mask_3` (condition, when given); texts longer than `max_length` are truncated.
    """
    fields = dict(zip(("", "_2", "_3"), _validate_fields(sentence1, sentence2, condition)))
    max_length = _resolve_max_length(tokenizer, max_length)
    _check_room(tokenizer, max_length, pair=False)
    encoded = {}
    for suffix, texts in fields.items():
        if texts is None:
            continue
        batch = tokenizer(
            texts, truncation=True, max_length=max_length, padding=True, padding_side="right", return_tensors="pt"
        )
        encoded["input_ids" + suffix] = batch["input_ids"]
        encoded["attention_mask" + suffix] = batch["attention_mask"]
    return encoded


def encode_bi_inputs(
    tokenizer,
    sentence1: "str | list[str]",
    sentence2: "str | list[str] | None" = None,
    condition: "str | list[str] | None" = None,
    max_length: "int | None" = None,
) -> "dict[str, torch.Tensor]":
    """Encode bi-encoder inputs: `[CLS] s SEP c SEP` for each sentence, with `sentence_mask` and `condition_mask`.

    Each is the tokenizer's own pair encoding of (sentence, condition), the ids of `tokenizer(s, c)` (`<s> s </s></s>
    c </s>` for RoBERTa), without token types. Keys for the second sentence carry a `_2` suffix. The condition is
    required and never truncated (see `encode_conditional_inputs`).
    """
    if condition is None:
        raise ValueError("`condition` is required for bi-encoder inputs.")
    sentence1, sentence2, condition = _validate_fields(sentence1, sentence2, condition)  # every field before any work
    encoded = encode_conditional_inputs(
        tokenizer, sentence1, None, condition, max_length=max_length, return_span_masks=True
    )
    if sentence2 is not None:
        second = encode_conditional_inputs(
            tokenizer, sentence2, None, condition, max_length=max_length, return_span_masks=True
        )
        encoded.update({key + "_2": value for key, value in second.items()})
    return encoded


def encode_pair_inputs(
    tokenizer, sentence1: "str | list[str]", sentence2: "str | list[str]", max_length: "int | None" = None
) -> "dict[str, torch.Tensor]":
    """Encode a plain sentence pair with the tokenizer's own pair encoding (token types included), truncated longest
    first to `max_length` and padded to the longest example: the input of `input_format = "pair"` models."""
    sentence1, sentence2, _ = _validate_fields(sentence1, sentence2, None)
    if sentence2 is None:
        raise ValueError("`sentence2` is required for sentence-pair inputs.")
    max_length = _resolve_max_length(tokenizer, max_length)
    _check_room(tokenizer, max_length, pair=True)
    return dict(
        tokenizer(
            sentence1,
            sentence2,
            truncation=True,
            max_length=max_length,
            padding=True,
            padding_side="right",
            return_tensors="pt",
        )
    )


_INPUT_ENCODERS = {"cross": encode_conditional_inputs, "tri": encode_tri_inputs, "bi": encode_bi_inputs}
# Models that embed each sentence on its own and score the pair by comparing the embeddings: no score without both.
_NEEDS_SENTENCE2 = ("tri", "bi")


def input_length(example: Any) -> int:
    """Characters in the texts of one pipeline input (a dict of strings): the sort key of length-sorted batching, a
    proxy for its token count as in sentence-transformers' `CrossEncoder.predict`. Anything else counts 0 (its error
    is raised by `preprocess`)."""
    if not isinstance(example, dict):
        return 0
    return sum(len(value) for value in example.values() if isinstance(value, str))


# Input keys a pipeline accepts and ignores, whatever their value: rows of a data set carry their `label`.
IGNORED_INPUT_FIELDS = ("label",)


def check_input_fields(inputs: Any, required: "tuple[str, ...]", optional: "tuple[str, ...]", task: str) -> None:
    """One pipeline input: a dict holding the `required` fields, optionally the `optional` ones, each a string with a
    visible character (`validate_texts`); a key of `IGNORED_INPUT_FIELDS` (`label`) is ignored whatever its value.
    Anything else is a `ValueError` naming the field."""
    expected = ", ".join(f"`{field}`" for field in required + optional)
    if not isinstance(inputs, dict):
        raise ValueError(f"{task} inputs must be dicts with {expected}, got {type(inputs).__name__}.")
    for field in required:
        if inputs.get(field) is None:
            raise ValueError(f"Input is missing `{field}`.")
    unknown = sorted(str(key) for key in set(inputs) - set(required + optional + IGNORED_INPUT_FIELDS))
    if unknown:  # a misspelt optional field would otherwise be dropped, silently
        raise ValueError(f"Input has unknown fields {unknown}; expected {expected}.")
    for field in required + optional:
        value = inputs.get(field)
        if value is None:
            continue
        if not isinstance(value, str):  # one example per dict; batches are lists of dicts
            raise ValueError(
                f"`{field}` must be a string, got {type(value).__name__} (pass a list of dicts for a batch)."
            )
        validate_texts(field, value)


def unknown_only_segments(
    tokenizer, input_ids: torch.Tensor, attention_mask: torch.Tensor, count: int
) -> torch.Tensor:
    """(batch, `count`) booleans: whether the i-th text segment of each row holds text tokens that are all the
    tokenizer's unknown token (a text of emoji or characters outside a WordPiece vocabulary).

    Segments are the runs of tokens between separators (a run of adjacent separators, as in RoBERTa's pair encoding,
    is one boundary), read from the encoded ids so no text is tokenized twice; special tokens other than the unknown
    token are not text. A text that itself contains the separator token splits into two segments.
    """
    shape = (input_ids.shape[0], count)
    if tokenizer.unk_token_id is None or tokenizer.sep_token_id is None:
        return torch.zeros(shape, dtype=torch.bool)
    valid = attention_mask.bool()
    separator = (input_ids == tokenizer.sep_token_id) & valid
    follows_separator = torch.zeros_like(separator)
    follows_separator[:, 1:] = separator[:, :-1]
    boundary = (separator & ~follows_separator).long()
    segment = (boundary.cumsum(1) - boundary).clamp(max=count)  # segments past `count` are collected in column `count`
    others = [i for i in tokenizer.all_special_ids if i != tokenizer.unk_token_id]
    text = valid & ~torch.isin(input_ids, torch.tensor(others, dtype=input_ids.dtype))
    unknown = text & (input_ids == tokenizer.unk_token_id)
    tokens = torch.zeros(shape[0], count + 1, dtype=torch.long).scatter_add_(1, segment, text.long())
    unknowns = torch.zeros(shape[0], count + 1, dtype=torch.long).scatter_add_(1, segment, unknown.long())
    return ((tokens > 0) & (unknowns == tokens))[:, :count]


def collate_right_padded(pad_id: int) -> "Callable[[list[dict[str, torch.Tensor]]], dict[str, torch.Tensor]]":
    """A collate function for batches of encoded inputs (dicts of tensors of batch size 1, the same keys each):
    `(1, length)` tensors are padded on the right to the longest, with `pad_id` for `input_ids*` keys and 0 for the
    others (masks, token types), the layout of every pairzoo encoding; other tensors (neighbor attention's
    `mask_positions`) are concatenated."""

    def collate(items: "list[dict[str, torch.Tensor]]") -> "dict[str, torch.Tensor]":
        batch = {}
        for key in items[0]:
            tensors = [item[key] for item in items]
            if tensors[0].dim() == 2:
                width = max(t.shape[1] for t in tensors)
                value = pad_id if key.startswith("input_ids") else 0
                tensors = [torch.nn.functional.pad(t, (0, width - t.shape[1]), value=value) for t in tensors]
            batch[key] = torch.cat(tensors)
        return batch

    return collate


def check_batching(batch_size: Any, num_workers: Any) -> None:
    """A ValueError naming `batch_size` unless it is a positive integer, or `num_workers` unless it is a non-negative
    integer (None: not given)."""
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"`batch_size` must be a positive integer, got {batch_size!r}.")
    if num_workers is not None and (
        isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0
    ):
        raise ValueError(f"`num_workers` must be a non-negative integer, got {num_workers!r}.")


class NamedInputs(PipelineDataset):
    """transformers' `PipelineDataset` (inputs encoded one by one, by index), an input that cannot be encoded a
    ValueError naming its position."""

    def __getitem__(self, i: int) -> Any:
        try:
            return super().__getitem__(i)
        except ValueError as err:
            raise ValueError(f"input {i} of {len(self)}: {err}") from err


class NamedStream(PipelineIterator):
    """transformers' `PipelineIterator` over streamed inputs (a generator), encoded one by one, an input that cannot
    be encoded a ValueError naming its position."""

    def __init__(self, inputs: Any, process: Callable, params: dict) -> None:
        super().__init__(inputs, process, params)
        self._position = -1

    def __next__(self) -> Any:
        item = next(self.iterator)
        self._position += 1
        try:
            return self.infer(item, **self.params)
        except ValueError as err:
            raise ValueError(f"input {self._position}: {err}") from err


class DataSetRows(Dataset):
    """The rows of a 🤗 `datasets.Dataset` (each a dict of its columns), as the torch `Dataset` a pipeline streams."""

    def __init__(self, rows: Any) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return self.rows[i]


def data_set_rows(inputs: Any) -> Any:
    """A 🤗 `datasets` data set as its rows (`DataSetRows`; an `IterableDataset` as a generator of its rows), any other
    input as given; a `DatasetDict` (several splits) is a ValueError naming its splits."""
    if type(inputs).__module__.split(".")[0] != "datasets":
        return inputs
    if isinstance(inputs, dict):
        raise ValueError(
            f"`inputs` is a DatasetDict of splits {list(inputs)}: give one split's rows, e.g. "
            f"`scorer(data[{'validation' if 'validation' in inputs else next(iter(inputs), 'validation')!r}])`."
        )
    if isinstance(inputs, Sized) and hasattr(inputs, "__getitem__"):
        return DataSetRows(inputs)
    return (row for row in inputs)


class ScoringPipeline(Pipeline):
    """What pairzoo's pipelines share: options, the forward pass, label-scale scores or labels, and length-sorted
    batching. Subclasses define `check_example`, `encode` (a list of input dicts to one batch of model inputs),
    `text_segments`, `batch_key`, `text_fields` and `task_name`.

    `max_length` (at construction or per call) must fit the backbone's positions (`check_max_length`); without it
    inputs are truncated to `default_max_length` of the tokenizer and the backbone. A list (or tuple) of inputs is
    checked whole before any work, an error naming the input's position. A text that encodes to nothing but the
    unknown token (only emoji, say, for a WordPiece tokenizer) is scored without a word of it: each call over a dict
    or a list logs one warning naming the field and how many inputs it affects.

    A list of inputs is sorted by length (`input_length`, longest first) and cut into batches of `batch_size` (default
    1) inputs with the same `batch_key` (the same fields given); each batch is encoded with one tokenizer call, scored
    with one forward pass, and the outputs are returned in the input order. This is what sentence-transformers'
    `CrossEncoder.predict` does; transformers' per-example preprocessing, collation and postprocessing is slower. An
    input that cannot be encoded (a condition longer than `max_length`) is an error naming its position.
    Streamed inputs (a generator, a torch `Dataset` such as transformers' `KeyDataset`, a 🤗 `datasets` data set as
    its rows) go through transformers' iterator, in batches padded on the right (`collate_right_padded`) whatever the
    tokenizer's `padding_side`, encoded by `num_workers` DataLoader workers (a list is encoded in the calling
    process); an input that cannot be encoded is an error naming its position there too. `batch_size` and
    `num_workers` are checked at construction and per call.

    `dtype` (a floating-point torch dtype or its name) is honoured for a model passed as an object too: the model is
    cast to it in place, as transformers moves it to `device`, where transformers would drop it silently.
    """

    _load_tokenizer = True
    _load_processor = False
    _load_image_processor = False
    _load_feature_extractor = False
    # Keyword arguments: `max_length` is this pipeline's; transformers' `Pipeline.__call__` takes the other two.
    call_parameters = ("max_length", "batch_size", "num_workers")
    task_name = ""
    text_fields: "tuple[str, ...]" = ()  # the input keys holding texts, in the order messages name them
    _unknown_only: "dict[str, int] | None" = None  # per field, inputs of the current call that encode to only unknowns

    def __init__(self, *args: Any, dtype: Any = "auto", **kwargs: Any) -> None:
        """transformers' `Pipeline`, with the model cast to `dtype` unless it is "auto" or None; any other value
        than a floating-point torch dtype or its name is a ValueError naming `dtype`."""
        if dtype is not None and not (isinstance(dtype, str) and dtype == "auto"):
            resolved = getattr(torch, dtype, None) if isinstance(dtype, str) else dtype
            if not isinstance(resolved, torch.dtype) or not resolved.is_floating_point:
                raise ValueError(f"`dtype` must be a floating-point torch dtype, its name or 'auto', got {dtype!r}.")
            dtype = resolved
        super().__init__(*args, **kwargs)
        check_batching(self._batch_size, self._num_workers)
        if isinstance(dtype, torch.dtype) and self.model.dtype != dtype:
            self.model.to(dtype)

    def __call__(self, inputs: "dict | list[dict] | None" = None, *args, **kwargs) -> "dict | list[dict]":
        """Score one example (a dict, or its texts as keyword arguments: `scorer(sentence1=..., condition=...)`) or
        many (a list, a generator, a torch `Dataset`, a 🤗 `datasets` data set's rows); `max_length` (optional) caps
        each encoded input, `batch_size` (optional) batches a list, longest inputs first, outputs in the input
        order."""
        if args:
            raise ValueError(f"unexpected positional arguments {list(args)}; pass options by name (`max_length=`).")
        texts = {field: kwargs.pop(field) for field in self.text_fields if field in kwargs}
        if texts:
            if inputs is not None:
                raise ValueError(
                    f"`{next(iter(texts))}` is given as a keyword argument next to `inputs`: give each input's texts "
                    "in its dict, or all of one input's texts as keyword arguments."
                )
            inputs = texts
        inputs = data_set_rows(inputs)
        if isinstance(inputs, Dataset) and isinstance(inputs, Sized) and len(inputs) == 0:
            raise ValueError("`inputs` is an empty dataset: give at least one input.")
        if isinstance(inputs, (list, tuple)):
            if not inputs:
                raise ValueError("`inputs` is an empty list: give a dict or a non-empty list of dicts.")
            inputs = list(inputs)
            for i, example in enumerate(inputs):  # every input checked before any work
                try:
                    self.check_example(example)
                except ValueError as err:
                    raise ValueError(f"input {i} of {len(inputs)}: {err}") from err
        batch_size = next((b for b in (kwargs.get("batch_size"), self._batch_size) if b is not None), 1)
        check_batching(batch_size, kwargs.get("num_workers"))
        self._unknown_only = {}
        try:
            if not isinstance(inputs, list):
                outputs = super().__call__(inputs, **kwargs)
            else:
                outputs = self._score_sorted_batches(inputs, batch_size, kwargs)
            if isinstance(inputs, (dict, list)):  # streamed inputs are encoded after this call returns
                self._warn_unknown_only(1 if isinstance(inputs, dict) else len(inputs))
        finally:
            self._unknown_only = None
        return outputs

    def _score_sorted_batches(self, inputs: "list[dict]", batch_size: int, kwargs: dict) -> "list[dict]":
        options = {k: v for k, v in kwargs.items() if k not in ("batch_size", "num_workers")}
        preprocess_params, forward_params, _ = self._sanitize_parameters(**options)
        preprocess_params = {**self._preprocess_params, **preprocess_params}
        forward_params = {**self._forward_params, **forward_params}
        groups: dict[Any, list[int]] = {}
        for i in sorted(range(len(inputs)), key=lambda i: -input_length(inputs[i])):
            groups.setdefault(self.batch_key(inputs[i]), []).append(i)
        restored: list[Any] = [None] * len(inputs)
        for indices in groups.values():
            for start in range(0, len(indices), batch_size):
                chunk = indices[start : start + batch_size]
                try:
                    model_inputs = self._encode_checked([inputs[i] for i in chunk], **preprocess_params)
                except ValueError:  # name the input that fails (the message's index is its place in the batch)
                    for i in sorted(chunk):
                        try:
                            self._encode_checked([inputs[i]], **preprocess_params)
                        except ValueError as err:
                            raise ValueError(f"input {i} of {len(inputs)}: {err}") from err
                    raise
                outputs = self.forward(model_inputs, **forward_params)
                for i, result in zip(chunk, self.postprocess_batch(outputs)):
                    restored[i] = result
        return restored

    def get_iterator(
        self,
        inputs: Any,
        num_workers: int,
        batch_size: int,
        preprocess_params: dict,
        forward_params: dict,
        postprocess_params: dict,
    ) -> PipelineIterator:
        """transformers' iterator over inputs encoded one by one, an input that cannot be encoded named by its
        position (`NamedInputs`, `NamedStream`), its batches collated by `collate_right_padded`: transformers'
        collation pads on the tokenizer's `padding_side`, and left padding would move each shorter input's tokens
        (positions, neighbor attention's [MASK]) and change its score."""
        if isinstance(inputs, Sized):
            dataset = NamedInputs(inputs, self.preprocess, preprocess_params)
        else:  # an iterable cannot be split between workers (transformers' own rule)
            dataset, num_workers = NamedStream(inputs, self.preprocess, preprocess_params), min(num_workers, 1)
        collate = collate_right_padded(self.tokenizer.pad_token_id or 0)
        loader = DataLoader(dataset, num_workers=num_workers, batch_size=batch_size, collate_fn=collate)
        model_iterator = PipelineIterator(loader, self.forward, forward_params, loader_batch_size=batch_size)
        return PipelineIterator(model_iterator, self.postprocess, postprocess_params)

    def _warn_unknown_only(self, total: int) -> None:
        counts = self._unknown_only or {}
        found = {field: counts[field] for field in self.text_fields if counts.get(field)}
        if found:
            counts = ", ".join(f"`{field}` of {count} of {total} input(s)" for field, count in found.items())
            logger.warning(
                f"{self.task_name}: {counts} encode(s) to only the unknown token "
                f"({self.tokenizer.unk_token}): the model scores that text without a word of it."
            )

    def check_example(self, inputs: Any) -> None:
        """Raise a `ValueError` naming the field when one input dict cannot be scored."""
        raise NotImplementedError

    def batch_key(self, inputs: dict) -> Any:
        """Inputs with the same key are encoded together (default: all)."""
        return None

    def encode(self, examples: "list[dict]", max_length: "int | None" = None) -> "dict[str, torch.Tensor]":
        """One batch of model inputs from checked input dicts of the same `batch_key`."""
        raise NotImplementedError

    def text_segments(self, examples: "list[dict]") -> "dict[str, tuple[str | None, ...]]":
        """Where `encode(examples)` puts each text: per `input_ids*` key, the field of each of its segments (runs of
        tokens between separators, `unknown_only_segments`) in order, None for a segment that is no input text."""
        raise NotImplementedError

    @property
    def backbone_config(self) -> Any:
        """The config of the model's encoder (`config.backbone_config`; the model's own config for other models)."""
        config = self.model.config
        return getattr(config, "backbone_config", None) or config

    def _encode_checked(self, examples: "list[dict]", max_length: "int | None" = None) -> "dict[str, torch.Tensor]":
        """`encode` at `max_length` (default: `default_max_length`), with the model's value checks on the CPU
        tensors (`check_inputs` of pairzoo models: token ids within the model's vocabulary, so a tokenizer with added
        tokens the model lacks is a ValueError, not an IndexError inside the embedding), counting the texts that
        encode to only the unknown token for this call's warning."""
        if max_length is None:
            max_length = default_max_length(self.tokenizer, self.backbone_config)
        encoded = self.encode(examples, max_length=max_length)
        check_inputs = getattr(self.model, "check_inputs", None)
        if check_inputs is not None:
            check_inputs(encoded)
        if self._unknown_only is not None and self.tokenizer.unk_token_id is not None:
            found: dict[str, torch.Tensor] = {}  # a field encoded under several keys (bi's condition) counts once
            for key, fields in self.text_segments(examples).items():
                mask = encoded.get(key.replace("input_ids", "attention_mask"))
                if key not in encoded or mask is None:
                    continue
                flags = unknown_only_segments(self.tokenizer, encoded[key], mask, len(fields))
                for field, column in zip(fields, flags.T):
                    if field is not None:
                        found[field] = found[field] | column if field in found else column
            for field, column in found.items():
                self._unknown_only[field] = self._unknown_only.get(field, 0) + int(column.sum())
        return encoded

    def preprocess(self, inputs: "dict[str, str]", max_length: "int | None" = None) -> "dict[str, torch.Tensor]":
        self.check_example(inputs)
        return self._encode_checked([inputs], max_length=max_length)

    def _sanitize_parameters(self, max_length: "int | None" = None, **kwargs):
        for name in kwargs:  # transformers would drop them silently: a misspelt `max_length` would be ignored
            match = closest_name(name, list(self.call_parameters))
            hint = f"did you mean `{match}`?" if match else f"known: {', '.join(self.call_parameters)}."
            raise ValueError(f"unknown argument `{name}` for the {self.task_name} pipeline; {hint}")
        if max_length is None:
            return {}, {}, {}
        _resolve_max_length(self.tokenizer, max_length)  # a positive integer
        check_max_length(max_length, self.backbone_config, "max_length")
        return {"max_length": max_length}, {}, {}

    def _forward(self, model_inputs: "dict[str, torch.Tensor]") -> "dict[str, torch.Tensor]":
        """The model's outputs in eval mode (no dropout: a score never depends on the call or the batch, as in
        sentence-transformers' `CrossEncoder.predict`), each module's own mode restored afterwards. Logits that are not
        `(batch_size, config.num_labels)` are a ValueError: `num_labels` (or `id2label`) changed after the head was
        built, which would make a regressor's one output a single class of probability 1."""
        self.model.config.validate()  # a field changed since the model was built (an inverted label scale, say)
        modules = list(self.model.modules())
        modes = [module.training for module in modules]
        self.model.eval()
        try:
            outputs = self.model(**model_inputs)
        finally:
            for module, mode in zip(modules, modes):
                module.training = mode
        logits, num_labels = outputs.logits, self.model.config.num_labels
        if logits.dim() != 2 or logits.shape[-1] != num_labels:
            raise ValueError(
                f"the model's logits have shape {tuple(logits.shape)} but its config has num_labels={num_labels}: "
                "`num_labels` or `id2label` was changed after the model was built; rebuild it with that config."
            )
        return {"logits": logits, "scores": getattr(outputs, "scores", None)}

    def postprocess_batch(self, model_outputs: "dict[str, torch.Tensor]") -> "list[dict[str, Any]]":
        """One result per example of a batch: `{"score": s}` for regression, else `{"label", "score"}`."""
        if model_outputs.get("scores") is not None:
            return [{"score": float(s)} for s in model_outputs["scores"].reshape(len(model_outputs["logits"]))]
        probabilities = model_outputs["logits"].float().softmax(-1)
        best = probabilities.argmax(-1)
        id2label = self.model.config.id2label
        return [
            {"label": id2label.get(int(b), str(int(b))), "score": float(p[b])} for p, b in zip(probabilities, best)
        ]

    def postprocess(self, model_outputs: "dict[str, torch.Tensor]") -> "dict[str, Any]":
        return self.postprocess_batch(model_outputs)[0]


class ConditionalSimilarityPipeline(ScoringPipeline):
    """`pipeline("conditional-similarity")`: dicts with `sentence1`, `condition` and optionally `sentence2` -> scores.

    Regression models return `{"score": s}` on the label scale the model was trained on (`config.label_min` to
    `config.label_max`, 1-5 for C-STS); classification models return `{"label": name, "score": probability}`. Each
    text must be a string with a visible character; a `label` key (a data set row's) is ignored whatever its value,
    and any other key is an error. A model exported for inputs without a second sentence (conditional
    classification: the `conditional-similarity` entry of its config's `custom_pipelines` lists `input_fields`
    without `sentence2`) refuses a `sentence2`, which would give it a layout it never saw.
    """

    task_name = "conditional-similarity"
    text_fields = ("sentence1", "sentence2", "condition")

    def trained_fields(self) -> "list[str] | None":
        """The input fields the model was trained with, as its export records them (`input_fields` of this task's
        entry in its config's `custom_pipelines`); None when they are not recorded."""
        entries = getattr(self.model.config, "custom_pipelines", None)
        entry = entries.get(self.task_name) if isinstance(entries, dict) else None
        fields = entry.get("input_fields") if isinstance(entry, dict) else None
        return list(fields) if isinstance(fields, (list, tuple)) else None

    def check_example(self, inputs: Any) -> None:
        check_input_fields(inputs, ("sentence1", "condition"), ("sentence2",), self.task_name)
        fields = self.trained_fields()
        if inputs.get("sentence2") is not None and fields is not None and "sentence2" not in fields:
            listed = " and ".join(f"`{field}`" for field in fields)
            raise ValueError(
                f"Input has `sentence2`, but this model was trained on inputs of {listed} only (a sentence and a "
                "condition such as an aspect, no second sentence): leave `sentence2` out."
            )
        input_format = getattr(self.model, "input_format", "cross")
        if input_format not in _INPUT_ENCODERS:
            raise ValueError(f"no input encoding for input_format {input_format!r}; known: {sorted(_INPUT_ENCODERS)}.")
        if input_format in _NEEDS_SENTENCE2 and inputs.get("sentence2") is None:
            raise ValueError(
                f"Input is missing `sentence2`: {type(self.model).__name__} embeds each sentence on its own and "
                "scores a pair of them."
            )

    def batch_key(self, inputs: dict) -> bool:
        return inputs.get("sentence2") is not None

    def encode(self, examples: "list[dict]", max_length: "int | None" = None) -> "dict[str, torch.Tensor]":
        sentence2 = [e.get("sentence2") for e in examples]
        return _INPUT_ENCODERS[getattr(self.model, "input_format", "cross")](
            self.tokenizer,
            [e["sentence1"] for e in examples],
            None if sentence2[0] is None else sentence2,
            [e["condition"] for e in examples],
            max_length=max_length,
        )

    def text_segments(self, examples: "list[dict]") -> "dict[str, tuple[str | None, ...]]":
        pair = examples[0].get("sentence2") is not None
        input_format = getattr(self.model, "input_format", "cross")
        if input_format == "tri":
            return {"input_ids": ("sentence1",), "input_ids_2": ("sentence2",), "input_ids_3": ("condition",)}
        if input_format == "bi":
            return {"input_ids": ("sentence1", "condition"), "input_ids_2": ("sentence2", "condition")}
        return {"input_ids": ("sentence1", "sentence2", "condition") if pair else ("sentence1", "condition")}

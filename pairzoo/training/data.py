"""Data loaders: every data set of the shared data folder, C-STS CSVs, the synthetic set and Hub ids.

Each loader returns a `datasets.DatasetDict` with one schema per task kind (see `SCHEMAS`). Splits are named `train`,
`validation` and `test`. Labelled test splits of the shared folder are held out on purpose: a loader returns the splits
whose files exist, logs which are missing, and asking for a missing split is a `FileNotFoundError` naming its file.
Data sets that ship without a training split get a documented, seeded split of what they have (see `DATASETS`).
The shared data is read from its folder, never copied into the repository.
"""

import csv
import dataclasses
import math
import os
import random
import re
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Features, Value
from transformers.utils import logging

from ..pipelines.pipeline_conditional_similarity import is_visible
from .synthetic import make_synthetic_dataset

logger = logging.get_logger(__name__)

DATA_DIR_ENV = "PAIRZOO_DATA_DIR"

_TEXT = Value("string")


def _schema(task: str, label_names: "list[str] | None" = None) -> Features:
    label = ClassLabel(names=label_names) if label_names else Value("float32")
    if task == "pair-regression" or task == "pair-classification":
        return Features({"sentence1": _TEXT, "sentence2": _TEXT, "label": label})
    if task == "conditional-similarity":
        return Features({"sentence1": _TEXT, "sentence2": _TEXT, "condition": _TEXT, "label": label})
    if task == "conditional-classification":
        return Features({"sentence1": _TEXT, "condition": _TEXT, "label": label})
    if task == "kg-triples":
        return Features({"head_id": _TEXT, "head": _TEXT, "relation": _TEXT, "tail_id": _TEXT, "tail": _TEXT})
    raise ValueError(f"Unknown task kind {task!r}; choose one of {list(SCHEMAS)}.")


SCHEMAS = {
    "pair-regression": ["sentence1", "sentence2", "label (float)"],
    "pair-classification": ["sentence1", "sentence2", "label (class)"],
    "conditional-similarity": ["sentence1", "sentence2", "condition", "label (float, 1-5 for C-STS)"],
    "conditional-classification": ["sentence1", "condition", "label (class)"],
    "kg-triples": ["head_id", "head", "relation", "tail_id", "tail"],
}


# --------------------------------------------------------------------------------------------- the data folder


def resolve_data_dir(data_dir: "str | os.PathLike | None" = None) -> Path:
    """The shared data folder: the argument, else `$PAIRZOO_DATA_DIR`, else `../shared/data` when it exists."""
    if data_dir is None:
        data_dir = os.environ.get(DATA_DIR_ENV)
    if data_dir is not None:
        path = Path(data_dir)
        if not path.is_dir():
            raise FileNotFoundError(f"data folder {str(path)!r} does not exist (from --data_dir or ${DATA_DIR_ENV}).")
        return path
    candidates = [
        Path.cwd() / ".." / "shared" / "data",
        Path(__file__).resolve().parents[2] / ".." / "shared" / "data",
    ]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    tried = ", ".join(str(c) for c in candidates)
    raise FileNotFoundError(f"no data folder found (tried {tried}); pass --data_dir or set ${DATA_DIR_ENV}.")


# --------------------------------------------------------------------------------------------- file readers


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise FileNotFoundError(f"data file {str(path)!r} not found.")
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            return handle.read().splitlines()
    except UnicodeDecodeError as err:
        raise ValueError(f"data file {str(path)!r} is not valid UTF-8 ({err.reason} at byte {err.start}).") from err


def _read_tsv(
    path: Path, header: bool, min_fields: int, max_fields: "int | None" = None
) -> "tuple[list[str], list[list[str]]]":
    """Rows of a TSV read with quoting off (many sentences hold unbalanced quotes); rows with fewer than `min_fields`
    or more than `max_fields` fields are errors naming the file and line. With `header`, an empty file and a header
    naming a column twice (a reader would silently take one of them) are errors naming the file."""
    lines = _read_lines(path)
    try:
        rows = list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    except csv.Error as err:
        raise ValueError(f"data file {str(path)!r} is not a readable TSV: {err}.") from err
    if header and not rows:
        raise ValueError(f"data file {str(path)!r} is empty: expected a header line of tab-separated column names.")
    names = rows.pop(0) if header else []
    _check_unique_columns(names, path)
    for number, row in enumerate(rows, start=2 if header else 1):
        if len(row) < min_fields:
            raise ValueError(
                f"{str(path)!r} line {number}: expected at least {min_fields} tab-separated fields, got {len(row)}."
            )
        if max_fields is not None and len(row) > max_fields:
            raise ValueError(
                f"{str(path)!r} line {number}: expected at most {max_fields} tab-separated fields, got {len(row)} "
                "(a stray tab in a sentence?)."
            )
    return names, rows


def _check_unique_columns(names: "list[str]", path: Path) -> None:
    """A ValueError naming the file and the column when a header names a column twice."""
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(
            f"{str(path)!r} names column {twice[0]!r} {names.count(twice[0])} times in its header (columns: {names}); "
            "each column name must be unique."
        )


def _column(names: list[str], name: str, path: Path) -> int:
    if name not in names:
        raise ValueError(f"{str(path)!r} has no column {name!r} (columns: {names}).")
    return names.index(name)


def _check_text(value: str, field: str, path: Path, row: int) -> str:
    """`value`, unless it has no visible character (only whitespace, control or zero-width characters, which
    `validate_texts` refuses in every batch): then a ValueError naming the file, row and field."""
    if not any(is_visible(char) for char in value):
        raise ValueError(f"{str(path)!r} row {row}: `{field}` is empty.")
    return value


def _float_label(value: str, path: Path, row: int, low: float, high: float) -> float:
    try:
        label = float(value)
    except ValueError as err:
        raise ValueError(f"{str(path)!r} row {row}: label {value!r} is not a number.") from err
    if math.isnan(label) or not low <= label <= high:
        raise ValueError(f"{str(path)!r} row {row}: label {label} is outside [{low}, {high}].")
    return label


def _class_label(value: str, names: list[str], path: Path, row: int) -> int:
    if value not in names:
        raise ValueError(f"{str(path)!r} row {row}: label {value!r} is not one of {names}.")
    return names.index(value)


# --------------------------------------------------------------------------------------------- per-data-set readers


def _glue_pair_reader(col1: str, col2: str, col_label: str, labels: "list[str] | None", scale=(0.0, 5.0)) -> Callable:
    def read(path: Path) -> list[dict]:
        names, rows = _read_tsv(path, header=True, min_fields=1)
        i1, i2, il = _column(names, col1, path), _column(names, col2, path), _column(names, col_label, path)
        out = []
        for n, row in enumerate(rows, start=2):
            if len(row) != len(names):  # GLUE files have exactly the header's fields on every row
                raise ValueError(
                    f"{str(path)!r} line {n}: expected {len(names)} tab-separated fields (the header's), "
                    f"got {len(row)}."
                )
            label = _class_label(row[il], labels, path, n) if labels else _float_label(row[il], path, n, *scale)
            out.append(
                {
                    "sentence1": _check_text(row[i1], col1, path, n),
                    "sentence2": _check_text(row[i2], col2, path, n),
                    "label": label,
                }
            )
        return out

    return read


def _sts_original_reader(path: Path) -> list[dict]:
    """The original STS Benchmark files (`STS-B/original/sts-*.tsv`): no header; `genre filename year id score
    sentence1 sentence2`, and on some rows 2 more fields naming the sentences' sources."""
    _, rows = _read_tsv(path, header=False, min_fields=7, max_fields=9)
    return [
        {
            "sentence1": _check_text(row[5], "sentence1", path, n),
            "sentence2": _check_text(row[6], "sentence2", path, n),
            "label": _float_label(row[4], path, n, 0.0, 5.0),
        }
        for n, row in enumerate(rows, start=1)
    ]


def _headerless_pair_reader(labels: list[str]) -> Callable:
    def read(path: Path) -> list[dict]:
        _, rows = _read_tsv(path, header=False, min_fields=3, max_fields=3)
        return [
            {
                "sentence1": _check_text(r[0], "sentence1", path, n),
                "sentence2": _check_text(r[1], "sentence2", path, n),
                "label": _class_label(r[2], labels, path, n),
            }
            for n, r in enumerate(rows, start=1)
        ]

    return read


SICK_SETS = ("TRAIN", "TRIAL", "TEST")


def _sick_reader(target: str) -> Callable:
    def read(path: Path, semeval_set: str) -> list[dict]:
        names, rows = _read_tsv(path, header=True, min_fields=12, max_fields=12)
        ia, ib = _column(names, "sentence_A", path), _column(names, "sentence_B", path)
        iset = _column(names, "SemEval_set", path)
        il = _column(names, "relatedness_score" if target == "relatedness" else "entailment_label", path)
        out = []
        for n, row in enumerate(rows, start=2):
            if row[iset] not in SICK_SETS:  # a misspelt split would silently drop the row
                raise ValueError(
                    f"{str(path)!r} line {n}: `SemEval_set` {row[iset]!r} is not one of {list(SICK_SETS)}."
                )
            if row[iset] != semeval_set:
                continue
            label = (
                _float_label(row[il], path, n, 1.0, 5.0)
                if target == "relatedness"
                else _class_label(row[il], SICK_E_LABELS, path, n)
            )
            sentences = [_check_text(row[i], name, path, n) for i, name in ((ia, "sentence_A"), (ib, "sentence_B"))]
            out.append({"sentence1": sentences[0], "sentence2": sentences[1], "label": label})
        return out

    return read


# The files the e-SNLI reader reads beside each `labels.<split>` (stems; the suffix is the split's).
ESNLI_COMPANIONS = ("s1", "s2", "preproc1_expl_1", "preproc1_expl_2", "preproc1_expl_3")
# WN18RR: the split files, and the entity and relation texts every split (and `load_kg_entities`) reads.
WN18RR_SPLIT_FILES = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}
WN18RR_TEXT_FILES = ("entity2text.txt", "relation2text.txt")


def _snli_reader(path: Path) -> list[dict]:
    folder, suffix = path.parent, path.name.split(".", 1)[1]
    s1, s2, *explanations = (_read_lines(folder / f"{stem}.{suffix}") for stem in ESNLI_COMPANIONS)
    labels = _read_lines(path)
    sizes = {len(s1), len(s2), len(labels), *(len(e) for e in explanations)}
    if len(sizes) != 1:
        raise ValueError(f"e-SNLI files in {str(folder)!r} ({suffix}) are not line-aligned: line counts {sizes}.")
    return [
        {
            "sentence1": _check_text(s1[i].strip(), f"s1.{suffix}", folder / f"s1.{suffix}", i + 1),
            "sentence2": _check_text(s2[i].strip(), f"s2.{suffix}", folder / f"s2.{suffix}", i + 1),
            "label": _class_label(labels[i], NLI_LABELS, path, i + 1),
            **{f"explanation_{k + 1}": explanations[k][i] for k in range(3)},
        }
        for i in range(len(labels))
    ]


def _absa_reader(path: Path) -> list[dict]:
    if not path.is_file():
        raise FileNotFoundError(f"data file {str(path)!r} not found.")
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as err:
        raise ValueError(f"{str(path)!r} is not valid XML: {err}.") from err
    out = []
    for sentence in root.iter("sentence"):
        text = sentence.findtext("text") or ""
        for term in sentence.iter("aspectTerm"):
            polarity = term.get("polarity")
            if polarity == "conflict":  # the usual set-up drops `conflict`
                continue
            out.append(
                {
                    "sentence1": _check_text(text, "text", path, len(out) + 1),
                    "condition": _check_text(term.get("term", ""), "aspectTerm term", path, len(out) + 1),
                    "label": _class_label(polarity, ABSA_LABELS, path, len(out) + 1),
                }
            )
    if not out:
        raise ValueError(f"{str(path)!r} has no aspect terms (`<aspectTerm>` other than `conflict`) to train on.")
    return out


SICK_E_LABELS = ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"]
NLI_LABELS = ["entailment", "neutral", "contradiction"]
BINARY_NLI_LABELS = ["entailment", "not_entailment"]
ABSA_LABELS = ["positive", "neutral", "negative"]


@dataclass(frozen=True)
class DatasetSpec:
    """A data set of the shared folder: task kind, files per split, reader (`split_readers`: the reader of a split
    whose file has another format) and how missing splits are handled."""

    name: str
    task: str
    files: dict
    reader: Callable
    label_names: "list[str] | None" = None
    derived_train: "float | None" = None
    note: str = ""
    split_readers: dict = dataclasses.field(default_factory=dict)


DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in [
        DatasetSpec(
            "stsb",
            "pair-regression",
            {"train": "STS-B/train.tsv", "validation": "STS-B/dev.tsv", "test": "STS-B/original/sts-test.tsv"},
            _glue_pair_reader("sentence1", "sentence2", "score", None),
            note="GLUE STS-B, scores 0-5; the labelled test split is the original STS Benchmark file.",
            split_readers={"test": _sts_original_reader},
        ),
        DatasetSpec(
            "sick-r",
            "pair-regression",
            {
                "train": ("SICK/SICK.txt", "TRAIN"),
                "validation": ("SICK/SICK.txt", "TRIAL"),
                "test": ("SICK/SICK.txt", "TEST"),
            },
            _sick_reader("relatedness"),
            note="SICK relatedness 1-5; SemEval_set TRAIN/TRIAL/TEST give train/validation/test.",
        ),
        DatasetSpec(
            "sick-e",
            "pair-classification",
            {
                "train": ("SICK/SICK.txt", "TRAIN"),
                "validation": ("SICK/SICK.txt", "TRIAL"),
                "test": ("SICK/SICK.txt", "TEST"),
            },
            _sick_reader("entailment"),
            SICK_E_LABELS,
            note="SICK entailment; SemEval_set TRAIN/TRIAL/TEST give train/validation/test.",
        ),
        DatasetSpec(
            "mrpc",
            "pair-classification",
            {"train": "MRPC/train.tsv", "validation": "MRPC/dev.tsv", "test": "MRPC/msr_paraphrase_test.txt"},
            _glue_pair_reader("#1 String", "#2 String", "Quality", ["0", "1"]),
            ["0", "1"],
            note="GLUE MRPC, 1 = paraphrase.",
        ),
        DatasetSpec(
            "rte",
            "pair-classification",
            {"train": "RTE/train.tsv", "validation": "RTE/dev.tsv"},
            _glue_pair_reader("sentence1", "sentence2", "label", BINARY_NLI_LABELS),
            BINARY_NLI_LABELS,
            note="GLUE RTE (the GLUE test file has no labels).",
        ),
        DatasetSpec(
            "qnli",
            "pair-classification",
            {"validation": "QNLI/dev.tsv"},
            _glue_pair_reader("question", "sentence", "label", BINARY_NLI_LABELS),
            BINARY_NLI_LABELS,
            derived_train=0.8,
            note="GLUE QNLI dev only; train/validation are a seeded 80/20 split of dev.",
        ),
        DatasetSpec(
            "quora",
            "pair-classification",
            {
                "validation": "Quora_BiMPM_partition/re2_format/dev.txt",
                "test": "Quora_BiMPM_partition/re2_format/test.txt",
            },
            _headerless_pair_reader(["0", "1"]),
            ["0", "1"],
            derived_train=0.8,
            note="Quora BiMPM partition, dev only here; train/validation are a seeded 80/20 split of dev.",
        ),
        DatasetSpec(
            "scitail",
            "pair-classification",
            {"validation": "SciTail/re2_format/dev.txt", "test": "SciTail/re2_format/test.txt"},
            _headerless_pair_reader(["0", "1"]),
            ["0", "1"],
            derived_train=0.8,
            note="SciTail (RE2 format, 0 = entails), dev only here; train/validation are a seeded 80/20 split of dev.",
        ),
        DatasetSpec(
            "snli",
            "pair-classification",
            {"validation": "e-SNLI/labels.dev", "test": "e-SNLI/labels.test"},
            _snli_reader,
            NLI_LABELS,
            note="SNLI dev with the three e-SNLI explanations (columns explanation_1..3).",
        ),
        DatasetSpec(
            "absa-restaurants",
            "conditional-classification",
            {
                "train": "SemEval2014_ABSA/Restaurants_Train_v2.xml",
                "test": "SemEval2014_ABSA/Restaurants_Test_Gold.xml",
            },
            _absa_reader,
            ABSA_LABELS,
            derived_train=0.9,
            note="SemEval-2014 ABSA restaurants (sentence, aspect term) -> polarity, conflict dropped; "
            "validation is a seeded 10% of train.",
        ),
        DatasetSpec(
            "absa-laptops",
            "conditional-classification",
            {"train": "SemEval2014_ABSA/Laptop_Train_v2.xml", "test": "SemEval2014_ABSA/Laptops_Test_Gold.xml"},
            _absa_reader,
            ABSA_LABELS,
            derived_train=0.9,
            note="SemEval-2014 ABSA laptops (sentence, aspect term) -> polarity, conflict dropped; "
            "validation is a seeded 10% of train.",
        ),
    ]
}
KG_DATASETS = ("wn18rr",)
BUILTIN_DATASETS = ("synthetic", "csts")


def list_datasets() -> list[str]:
    """Names accepted by `load_dataset` (plus `hub:<id>` for Hub data sets)."""
    return sorted([*DATASETS, *KG_DATASETS, *BUILTIN_DATASETS])


def dataset_task(name: str) -> str:
    """Task kind of a data set name."""
    if name in DATASETS:
        return DATASETS[name].task
    if name in KG_DATASETS:
        return "kg-triples"
    if name in BUILTIN_DATASETS:
        return "conditional-similarity"
    raise ValueError(f"Unknown dataset {name!r}; choose one of {list_datasets()} or 'hub:<id>'.")


def has_training_split(name: str) -> bool:
    """Whether data set `name` (see `list_datasets()`) has a train split: its own file or one derived from another
    split."""
    if name in DATASETS:
        return "train" in DATASETS[name].files or DATASETS[name].derived_train is not None
    return name in BUILTIN_DATASETS or name in KG_DATASETS


def _derive_train(rows: list[dict], fraction: float, seed: int) -> "tuple[list[dict], list[dict]]":
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    cut = int(round(fraction * len(rows)))
    return [rows[i] for i in sorted(order[:cut])], [rows[i] for i in sorted(order[cut:])]


def _load_shared(spec: DatasetSpec, data_dir: Path, split: "str | None", seed: int) -> DatasetDict:
    wanted = [split] if split else list(spec.files)
    if split and split not in spec.files and not (spec.derived_train and split in ("train", "validation")):
        raise ValueError(f"dataset {spec.name!r} has no split {split!r}; it has {sorted(spec.files)}.")
    rows: dict[str, list[dict]] = {}
    for name, where in spec.files.items():
        if spec.derived_train and name in ("train", "validation"):
            continue
        if name not in wanted:
            continue
        rel, *extra = where if isinstance(where, tuple) else (where,)
        path = data_dir / rel
        if not path.is_file():
            if split == name:
                raise FileNotFoundError(f"split {name!r} of {spec.name!r} needs {str(path)!r}, which is missing.")
            logger.warning(
                "%s: split %r is missing (%s not found; labelled test splits are held out).", spec.name, name, path
            )
            continue
        rows[name] = spec.split_readers.get(name, spec.reader)(path, *extra)
        if not rows[name]:
            if name != "test":  # only labelled test rows are held out; an empty train or validation file is broken
                raise ValueError(f"split {name!r} of {spec.name!r} has no rows in {str(path)!r}.")
            if split == name:
                raise FileNotFoundError(f"split {name!r} of {spec.name!r} has no rows in {str(path)!r} (held out).")
            logger.warning("%s: split %r has no rows in %s (held out).", spec.name, name, path)
            del rows[name]
    if spec.derived_train and (split is None or split in ("train", "validation")):
        source = "train" if "train" in spec.files else "validation"
        rel = spec.files[source]
        source_rows = spec.reader(data_dir / rel)
        rows["train"], rows["validation"] = _derive_train(source_rows, spec.derived_train, seed)
        if not rows["train"] or not rows["validation"]:
            raise ValueError(
                f"{str(data_dir / rel)!r} has {len(source_rows)} row(s): too few to split into train and validation "
                f"({spec.derived_train:.0%} / {1 - spec.derived_train:.0%})."
            )
    features = _schema(spec.task, spec.label_names)
    out = DatasetDict()
    for name in ("train", "validation", "test"):
        if name in rows and (split is None or split == name):
            extra_columns = {k: _TEXT for k in rows[name][0] if k not in features}
            out[name] = Dataset.from_list(rows[name], features=Features({**features, **extra_columns}))
    return out


# --------------------------------------------------------------------------------------------- knowledge graph


def _read_kg_texts(path: Path, distinct_texts: bool = False) -> "dict[str, str]":
    """`id -> text` of a WN18RR text file (`entity2text.txt`, `relation2text.txt`): one `id<TAB>text` row a line.
    An empty file, a row without exactly two fields (a tab inside the text), an empty id or text, and an id listed
    twice (which would add a second candidate for one entity) are ValueErrors naming the file and line.

    `distinct_texts` (relations): two ids whose texts are equal once runs of whitespace are collapsed are a
    ValueError naming the file, both ids and the text. A relation is known to the model only by its text (the
    condition) and its answers are grouped by that text, so two such relations would silently become one. Entities
    are told apart by id, so entities sharing a text (common in real graphs) are allowed."""
    _, rows = _read_tsv(path, header=False, min_fields=2, max_fields=2)
    if not rows:
        raise ValueError(f"{str(path)!r} has no rows.")
    texts: dict[str, str] = {}
    lines: dict[str, int] = {}
    owners: dict[str, str] = {}
    for number, (key, text) in enumerate(rows, start=1):
        if not key.strip() or not text.strip():
            raise ValueError(f"{str(path)!r} line {number}: the {'id' if not key.strip() else 'text'} is empty.")
        if key in texts:
            raise ValueError(f"{str(path)!r} line {number}: {key!r} is listed again (first on line {lines[key]}).")
        normalised = " ".join(text.split())
        if distinct_texts and normalised in owners:
            first = owners[normalised]
            raise ValueError(
                f"{str(path)!r} line {number}: relations {first!r} (line {lines[first]}) and {key!r} have the same "
                f"text {normalised!r}, so the model could not tell them apart; give each relation its own text."
            )
        texts[key], lines[key] = text, number
        owners.setdefault(normalised, key)
    return texts


def load_kg_entities(
    data_dir: "str | os.PathLike | None" = None, kg_dir: "str | os.PathLike | None" = None
) -> Dataset:
    """The entity table of a knowledge graph: `entity_id`, `text` ("name, definition"), from `entity2text.txt` of
    `kg_dir` (a folder in the WN18RR layout, see `load_kg_folder`), else of WN18RR in the data folder (`data_dir`).
    Its rows are checked as `_read_kg_texts` says (each entity once: the table is the candidate set of link
    prediction)."""
    texts = _read_kg_texts(_kg_folder(data_dir, kg_dir)[0] / "entity2text.txt")
    return Dataset.from_dict({"entity_id": list(texts), "text": list(texts.values())})


def _kg_folder(data_dir: "str | os.PathLike | None", kg_dir: "str | os.PathLike | None") -> "tuple[Path, str]":
    """The folder of a knowledge graph's files and the name its errors use: `kg_dir` (which must exist), else
    `<data folder>/WN18RR` as `'wn18rr'`."""
    if kg_dir is None:
        return resolve_data_dir(data_dir) / "WN18RR", "wn18rr"
    if not Path(kg_dir).is_dir():
        raise FileNotFoundError(f"knowledge-graph folder {str(kg_dir)!r} (--kg_dir) does not exist.")
    return Path(kg_dir), str(kg_dir)


def load_kg_folder(kg_dir: "str | os.PathLike", split: "str | None" = None) -> DatasetDict:
    """Triples `(head_id, head, relation, tail_id, tail)` of a knowledge graph in the WN18RR layout: a folder with
    `entity2text.txt` and `relation2text.txt` (one `id<TAB>text` row a line) and the splits `train.tsv`, `dev.tsv`
    (validation) and optionally `test.tsv` (one `head_id<TAB>relation_id<TAB>tail_id` row a line), checked as
    `load_dataset("wn18rr")` checks WN18RR."""
    folder, name = _kg_folder(None, kg_dir)
    return _load_kg_triples(folder, name, split)


def _load_wn18rr(data_dir: Path, split: "str | None") -> DatasetDict:
    return _load_kg_triples(data_dir / "WN18RR", "wn18rr", split)


def _load_kg_triples(folder: Path, name: str, split: "str | None") -> DatasetDict:
    """Triples `(head_id, head, relation, tail_id, tail)` of the splits that exist in `folder` (WN18RR layout),
    errors naming the knowledge graph `name`. The text files are checked by `_read_kg_texts` (relation texts must
    be distinct); a split file needs exactly three tab-separated fields a row (head id, relation id, tail id) naming
    listed entities and relations, and an empty train or dev file is an error (an empty test file is held out); each
    error names the file and line."""
    entities = _read_kg_texts(folder / "entity2text.txt")
    relations = _read_kg_texts(folder / "relation2text.txt", distinct_texts=True)
    files = WN18RR_SPLIT_FILES
    if split is not None and split not in files:
        raise ValueError(f"dataset {name!r} has no split {split!r}; it has {sorted(files)}.")
    out = DatasetDict()
    for split_name, file in files.items():
        if split is not None and split_name != split:
            continue
        path = folder / file
        if not path.is_file():
            if split == split_name:
                raise FileNotFoundError(f"split {split_name!r} of {name!r} needs {str(path)!r}, which is missing.")
            logger.warning(
                "%s: split %r is missing (%s not found; labelled test splits are held out).", name, split_name, path
            )
            continue
        _, rows = _read_tsv(path, header=False, min_fields=3, max_fields=3)
        if not rows:
            if split_name != "test":
                raise ValueError(f"split {split_name!r} of {name!r} has no rows in {str(path)!r}.")
            if split == split_name:
                raise FileNotFoundError(f"split {split_name!r} of {name!r} has no rows in {str(path)!r} (held out).")
            logger.warning("%s: split %r has no rows in %s (held out).", name, split_name, path)
            continue
        triples = []
        for n, (head, relation, tail) in enumerate(rows, start=1):
            for entity in (head, tail):
                if entity not in entities:
                    raise ValueError(f"{str(path)!r} line {n}: entity {entity!r} has no text in entity2text.txt.")
            if relation not in relations:
                raise ValueError(f"{str(path)!r} line {n}: relation {relation!r} is not in relation2text.txt.")
            triples.append(
                {
                    "head_id": head,
                    "head": entities[head],
                    "relation": relations[relation],
                    "tail_id": tail,
                    "tail": entities[tail],
                }
            )
        out[split_name] = Dataset.from_list(triples, features=_schema("kg-triples"))
    return out


# --------------------------------------------------------------------------------------------- C-STS CSVs


CSTS_COLUMNS = ("sentence1", "sentence2", "condition", "label")


def _read_csts_csv(path: Path, require_labels: bool) -> list[dict]:
    lines = _read_lines(path)
    try:
        return _parse_csts_rows(csv.DictReader(lines), path, require_labels)
    except csv.Error as err:
        raise ValueError(f"C-STS file {str(path)!r} is not a readable CSV: {err}.") from err


def _parse_csts_rows(reader: csv.DictReader, path: Path, require_labels: bool) -> list[dict]:
    _check_unique_columns(list(reader.fieldnames or []), path)
    missing = [c for c in CSTS_COLUMNS if c not in (reader.fieldnames or [])]
    if missing and (missing != ["label"] or require_labels):
        raise ValueError(f"C-STS file {str(path)!r} is missing columns {missing} (has {reader.fieldnames}).")
    width = len(reader.fieldnames)
    rows = []
    for n, row in enumerate(reader, start=2):
        if None in row or any(value is None for value in row.values()):  # DictReader's marks of a ragged row
            count = width + len(row.get(None) or []) - sum(value is None for value in row.values())
            raise ValueError(
                f"{str(path)!r} row {n}: expected {width} comma-separated fields (the header's), got {count}."
            )
        example = {f: _check_text(row.get(f) or "", f, path, n) for f in ("sentence1", "sentence2", "condition")}
        raw = (row.get("label") or "").strip()
        if not raw:
            if require_labels:
                raise ValueError(f"{str(path)!r} row {n}: `label` is empty.")
            example["label"] = float("nan")
        else:
            example["label"] = _float_label(raw, path, n, 1.0, 5.0)
        rows.append(example)
    if not rows:
        raise ValueError(f"C-STS file {str(path)!r} has no rows.")
    return rows


def load_csts(path: "str | os.PathLike", split: "str | None" = None) -> DatasetDict:
    """Official C-STS CSVs: a folder with `csts_{train,validation,test}.csv`, or one CSV file (returned as split
    `split`, default `train`).

    Columns `sentence1, sentence2, condition, label`, each named once; labels must be in 1-5 (the unlabelled official
    test file, or one file read as `test`, may leave them empty, giving NaN).
    """
    path = Path(path)
    if path.is_file():
        rows = _read_csts_csv(path, require_labels=split != "test")
        return DatasetDict({split or "train": Dataset.from_list(rows, features=_schema("conditional-similarity"))})
    if not path.is_dir():
        raise FileNotFoundError(f"C-STS path {str(path)!r} does not exist.")
    out = DatasetDict()
    for name in ("train", "validation", "test"):
        if split is not None and name != split:
            continue
        file = path / f"csts_{name}.csv"
        if not file.is_file():
            if split == name or name == "train":
                raise FileNotFoundError(f"C-STS split {name!r} needs {str(file)!r}, which is missing.")
            logger.warning("csts: split %r is missing (%s not found).", name, file)
            continue
        out[name] = Dataset.from_list(
            _read_csts_csv(file, require_labels=name != "test"), features=_schema("conditional-similarity")
        )
    return out


# --------------------------------------------------------------------------------------------- your own files


# File suffix -> the `datasets` builder that reads it (TSV: the CSV builder with a tab delimiter and quoting off).
DATA_FILE_BUILDERS = {".csv": "csv", ".tsv": "csv", ".jsonl": "json", ".json": "json", ".parquet": "parquet"}
# The split of each own data file and the flag of `pairzoo.train` that names it.
DATA_FILE_FLAGS = {"train": "--train_file", "validation": "--validation_file", "test": "--test_file"}
# The row fields of pairzoo's schemas, the flag naming each one's column in own data files, and what the field holds.
COLUMN_FLAGS = {
    "sentence1": "--sentence1_column",
    "sentence2": "--sentence2_column",
    "condition": "--condition_column",
    "label": "--label_column",
}
_FIELD_ROLES = {
    "sentence1": "first sentence",
    "sentence2": "second sentence",
    "condition": "condition",
    "label": "label",
}


def _csv_quoting(delimiter: str) -> int:
    """How CSV (quoted fields) and TSV (no quoting: a quote is text) files are read."""
    return csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL


def _csv_header(path: Path, delimiter: str, flag: str) -> "list[str]":
    """The column names of a CSV or TSV file's header line: each named once, none blank, and no fewer than the fields
    of the first row (pandas would read a first field without a name as the row index, shifting every column). A
    file of a header line and blank lines has no rows: a ValueError."""
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            rows = csv.reader(handle, delimiter=delimiter, quoting=_csv_quoting(delimiter))
            header = next(rows, None)
            try:
                first = next((row for row in rows if any(cell.strip() for cell in row)), [])
            except (csv.Error, UnicodeDecodeError):  # the builder names what is wrong with the rows
                first = None
    except UnicodeDecodeError as err:
        raise ValueError(f"`{flag}` {str(path)!r} is not valid UTF-8 ({err.reason} at byte {err.start}).") from err
    except csv.Error as err:
        raise ValueError(f"`{flag}` {str(path)!r}: its header line is not readable ({err}).") from err
    if not header:
        raise ValueError(f"`{flag}` {str(path)!r} is empty: expected a header line of column names.")
    _check_unique_columns(header, path)
    blank = [number for number, name in enumerate(header, start=1) if not name.strip()]
    if blank:
        raise ValueError(f"`{flag}` {str(path)!r}: column {blank[0]} of its header has no name (columns: {header}).")
    if first == []:
        raise ValueError(f"`{flag}` {str(path)!r} has no rows.")
    if first is not None and len(first) > len(header):
        raise ValueError(
            f"`{flag}` {str(path)!r}: its first row has {len(first)} fields and its header names {len(header)} "
            f"(columns: {header}); give every field a column name (a delimiter at the end of each line adds one)."
        )
    return header


def read_data_file(path: "str | os.PathLike", flag: str = "data file") -> Dataset:
    """The rows of a CSV, TSV, JSON lines (`.jsonl`, or `.json`) or Parquet file, chosen by its suffix
    (`DATA_FILE_BUILDERS`) and read by that format's `datasets` builder (`datasets.load_dataset("csv", ...)`).

    CSV and TSV cells are read as the text written (no type or missing-value guessing), TSV with quoting off as the
    shared data's TSV files are; their header line must name each column once. A missing file, an unknown suffix, a
    file without rows and one the builder cannot parse are errors naming `flag` and the file.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in DATA_FILE_BUILDERS:
        raise ValueError(
            f"`{flag}` {str(path)!r}: unknown file type {suffix or '(no suffix)'!r}; use .csv, .tsv, .jsonl (or "
            ".json) with one JSON object a line, or .parquet."
        )
    if not path.is_file():
        raise FileNotFoundError(f"`{flag}` {str(path)!r} does not exist.")
    builder, options = DATA_FILE_BUILDERS[suffix], {}
    if builder == "csv":
        delimiter = "\t" if suffix == ".tsv" else ","
        names = _csv_header(path, delimiter, flag)
        options = {
            "delimiter": delimiter,
            "features": Features({name: _TEXT for name in names}),
            "na_filter": False,
            "encoding": "utf-8-sig",
            "quoting": _csv_quoting(delimiter),
        }
    import datasets

    bars = not datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # a bar per file read; an error stays one line
    try:
        data = datasets.load_dataset(builder, data_files={"data": str(path)}, split="data", **options)
    except Exception as err:  # pandas, pyarrow, JSON and decoding errors, some wrapped by `datasets`: say which file
        if builder != "csv" and _has_no_rows(path, suffix):  # builders fail on a file without rows, each its own way
            raise ValueError(f"`{flag}` {str(path)!r} has no rows.") from err
        reason = " ".join(str(err.__cause__ or err).split())
        raise ValueError(
            f"`{flag}` {str(path)!r} is not a readable {suffix[1:].upper()} file: {reason[:300]}"
        ) from err
    finally:
        if bars:
            datasets.enable_progress_bars()
    if len(data) == 0:
        raise ValueError(f"`{flag}` {str(path)!r} has no rows.")
    if builder != "csv":
        _check_utf8(data, path, flag)
    return data


def _has_no_rows(path: Path, suffix: str) -> bool:
    """Whether a JSON or Parquet file that its builder could not read holds no rows: a JSON file of whitespace (or an
    empty array), a Parquet file of 0 rows (a CSV or TSV file without rows is refused by `_csv_header`)."""
    try:
        if suffix == ".parquet":
            import pyarrow.parquet

            return pyarrow.parquet.ParquetFile(path).metadata.num_rows == 0
        text = path.read_text(encoding="utf-8-sig").strip()
        return not text or (text[0] == "[" and text[-1] == "]" and not text[1:-1].strip())
    except (OSError, ValueError):  # unreadable as well: the builder's error says why
        return False


def _check_utf8(data: Dataset, path: Path, flag: str) -> None:
    """Refuse text that the JSON (or Parquet) reader kept as undecodable bytes: a ValueError naming the file, row and
    column of the first cell that is not valid UTF-8."""
    import pyarrow

    table = data.data.table
    for name, column in zip(table.column_names, table.columns):
        start = 0
        for chunk in column.chunks:
            try:
                chunk.validate(full=True)
            except pyarrow.ArrowInvalid as err:
                index = re.search(r"string index (\d+)", str(err))
                where = _row(path, start + int(index.group(1))) if index else f"`{flag}` {str(path)!r}"
                raise ValueError(f"{where}: `{name}` is not valid UTF-8 text.") from err
            start += len(chunk)


def _row(path: Path, index: int) -> str:
    """`'<file>' row N` of the row at 0-based `index` of a data file: CSV and TSV rows are numbered as a spreadsheet
    shows them (the header is row 1), JSON lines by line, Parquet from 1."""
    return f"{str(path)!r} row {index + (2 if path.suffix.lower() in ('.csv', '.tsv') else 1)}"


def _file_texts(values: list, column: str, path: Path) -> "list[str]":
    """`values` of text column `column`, each with a visible character (`_check_text`), else a ValueError naming
    the file, row and column."""
    for index, value in enumerate(values):
        if not isinstance(value, str) and value is not None:
            raise ValueError(f"{_row(path, index)}: `{column}` is {value!r}, not text.")
        if value is None or not any(is_visible(char) for char in value):
            raise ValueError(f"{_row(path, index)}: `{column}` is empty.")
    return values


def _as_number(value: object) -> "int | float | None":
    """`value` as a label number (an int where it is written as one; a bool is 0 or 1), None for a class name (also
    one Python alone reads as a number: with digit separators, `1_000`)."""
    if isinstance(value, (bool, int)):
        return int(value)
    if isinstance(value, float):
        return value
    if "_" in value:
        return None
    for parse in (int, float):
        try:
            return parse(value.strip())
        except ValueError:
            continue
    return None


def _raw_labels(values: list, column: str, path: Path) -> list:
    """`values` of label column `column`, each a number or a non-empty class name, else a ValueError naming the
    file, row and column."""
    for index, value in enumerate(values):
        if value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"{_row(path, index)}: `{column}` is empty.")
        if not isinstance(value, (str, int, float)):
            raise ValueError(f"{_row(path, index)}: `{column}` is {value!r}, neither a number nor a class name.")
        number = _as_number(value)
        if number is not None and not math.isfinite(number):
            raise ValueError(f"{_row(path, index)}: `{column}` is {value!r}, not a finite number.")
    return values


def _whole_floats(values: list) -> bool:
    """Whether number labels `values` are at most 10 distinct whole numbers, one or more written as a float (`1.0`,
    as pandas writes an integer column that held a missing value): class ids a file lost on the way."""
    numbers = [_as_number(value) for value in values]
    return (
        all(isinstance(n, (int, float)) and math.isfinite(n) and float(n).is_integer() for n in numbers)
        and any(isinstance(n, float) for n in numbers)
        and len(set(numbers)) <= 10
    )


def _near_column(names: "list[str]", column: str) -> str:
    """`; column 'X' differs from it only in case or spaces` for a column of `names` that is `column` written another
    way, else ''."""
    near = [name for name in names if name != column and name.strip().casefold() == column.strip().casefold()]
    return f"; column {near[0]!r} differs from it only in case or spaces" if near else ""


def _used_fields(names: "list[str]", columns: "dict[str, str]", path: Path) -> "list[str]":
    """The row fields the training file has: `sentence1` and `label` always (a missing column names its flag),
    `sentence2` and `condition` when their column is there (a column named by its flag must be, and one written
    another way, `Condition`, is an error rather than a field left out)."""
    used = []
    for field, flag in COLUMN_FLAGS.items():
        column = columns[field]
        if column in names:
            used.append(field)
        elif field in ("sentence1", "label") or column != field:
            raise ValueError(
                f"`--train_file` {str(path)!r} has no column {column!r} ({flag}; its columns: {names}); set {flag} "
                f"to the column of its {_FIELD_ROLES[field]}s{_near_column(names, column)}."
            )
        elif _near_column(names, column):  # an optional column written another way would change the task kind
            raise ValueError(
                f"`--train_file` {str(path)!r} has no column {column!r} ({flag}; its columns: {names}), but "
                f"{_near_column(names, column)[2:]}: rename it, or set {flag} to it."
            )
    twice = [field for field in used if [columns[f] for f in used].count(columns[field]) > 1]
    if twice:
        raise ValueError(
            f"{' and '.join(COLUMN_FLAGS[f] for f in twice)} all name column {columns[twice[0]]!r}; each field needs "
            "its own column."
        )
    return used


def _own_task(fields: "list[str]", numbers: bool, integers: bool, regression_scale: bool, tasks: tuple, path: Path):
    """The task kind of training rows with `fields` whose labels are numbers (all `integers`) or class names:
    regression for non-integer numbers and with `regression_scale` (`--label_min`/`--label_max`), classification for
    names; integer labels are class ids, unless the model trains only the regression kind of these fields."""
    pair, conditional = "sentence2" in fields, "condition" in fields
    if not pair and not conditional:
        raise ValueError(
            f"`--train_file` {str(path)!r} has a first sentence and labels but no second sentence and no condition "
            f"(columns {COLUMN_FLAGS['sentence2']} and {COLUMN_FLAGS['condition']} default to 'sentence2' and "
            "'condition'); pairzoo's tasks read a sentence pair, a pair and a condition, or a sentence and a "
            "condition."
        )
    regression_kind = "conditional-similarity" if conditional else "pair-regression"
    classification_kind = "pair-classification" if not conditional else "conditional-classification"
    if conditional and pair:
        classification_kind = None  # a pair with a condition is scored (C-STS), not classified
    elif conditional:
        regression_kind = None  # a sentence with a condition is classified (ABSA), not scored
    if not numbers and regression_scale:
        raise ValueError(
            "`--label_min`/`--label_max` set the scale of regression labels, but the labels of --train_file "
            f"{str(path)!r} are class names; leave them out to train a classifier."
        )
    regression = numbers and (regression_scale or not integers)
    if integers and not regression_scale and classification_kind not in tasks and regression_kind in tasks:
        regression = True
    if not regression and integers and classification_kind is None:
        regression = True
    task = regression_kind if regression else classification_kind
    if task is None:
        has = "a sentence pair and a condition" if pair else "a sentence and a condition (no second sentence)"
        raise ValueError(
            f"`--train_file` {str(path)!r} has {has} with {'numeric' if regression else 'class'} labels: no pairzoo "
            "task reads that. Conditional similarity scores a sentence pair under a condition (numeric labels); "
            "conditional classification classifies one sentence under a condition (class labels)."
        )
    return task


def _regression_labels(
    labels: "dict[str, list]", paths: "dict[str, Path]", column: str, label_min, label_max
) -> "tuple[dict[str, list[float]], tuple[float, float], str]":
    """Regression scores of each split, the label range (`label_min`/`label_max`, each defaulting to the training
    scores' min / max) and where it came from; a score outside it is a ValueError naming the file, row and column."""
    scores = {split: [float(_as_number(value)) for value in values] for split, values in labels.items()}
    low = min(scores["train"]) if label_min is None else float(label_min)
    high = max(scores["train"]) if label_max is None else float(label_max)
    if label_min is not None and label_max is not None:
        source = "--label_min/--label_max"
    elif label_min is not None or label_max is not None:
        source = "--label_min/--label_max and the training labels' min/max"
    else:
        source = "the training labels' min/max"
    if not low < high:
        raise ValueError(
            f"the label range [{low:g}, {high:g}] ({source}) is empty; regression needs --label_min < --label_max "
            "(set both when every training label is the same)."
        )
    for split, values in scores.items():
        for index, score in enumerate(values):
            if not low <= score <= high:
                raise ValueError(
                    f"{_row(paths[split], index)}: `{column}` {score:g} is outside the label range [{low:g}, "
                    f"{high:g}] ({source}); set --label_min/--label_max to widen it."
                )
    return scores, (low, high), source


def _class_labels(
    labels: "dict[str, list]", paths: "dict[str, Path]", column: str, integers: bool
) -> "tuple[dict[str, list[int]], list[str], str]":
    """Class ids of each split, the class names and how they were read: integer labels are ids 0..max (names "0",
    "1", ...), other labels names in sorted order, each without the spaces around it (`yes` and ` yes` are one class).
    A negative id, fewer than two training classes and a validation or test label no training row has are ValueErrors
    naming the file, row and column."""
    if integers:
        ids = [int(_as_number(value)) for value in labels["train"]]
        negative = next((index for index, i in enumerate(ids) if i < 0), None)
        if negative is not None:
            raise ValueError(
                f"{_row(paths['train'], negative)}: `{column}` {ids[negative]} is not a class id (0, 1, ...)."
            )
        names = [str(i) for i in range(max(ids) + 1)]
        classes = sorted(set(ids))
        unused = max(ids) + 1 - len(classes)
        empty = f"; {unused} of these ids no training row has" if unused else ""
        text = f"class ids 0..{max(ids)} (integer labels{empty}; --label_min/--label_max make them regression scores)"
    else:
        classes = names = sorted({str(value).strip() for value in labels["train"]})
        text = "classes from the label names, sorted: " + ", ".join(f"{i} = {name!r}" for i, name in enumerate(names))
    if len(classes) < 2:
        raise ValueError(
            f"`--train_file` {str(paths['train'])!r}: every `{column}` is {classes[0]!r}; classification needs at "
            "least two classes."
        )
    encoded = {}
    for split, values in labels.items():
        encoded[split] = []
        for index, value in enumerate(values):
            number = _as_number(value) if integers else None
            key = int(number) if number is not None and float(number).is_integer() else str(value).strip()
            if key not in classes:
                raise ValueError(
                    f"{_row(paths[split], index)}: `{column}` {value!r} is not a class of the training file (its "
                    f"classes: {classes})."
                )
            encoded[split].append(key if integers else names.index(key))
    return encoded, names, text


def _check_label_kinds(labels: "dict[str, list]", paths: "dict[str, Path]", column: str) -> bool:
    """Whether the training labels are numbers (most of them; else class names). Numbers and class names are not
    mixed in the training file, and the other files' labels are numbers when the training labels are; a label that
    breaks this is a ValueError naming the file, row and column."""
    numeric = [_as_number(value) is not None for value in labels["train"]]
    numbers = numeric.count(True) >= numeric.count(False)
    for split, values in labels.items():
        for index, value in enumerate(values):
            if numbers and _as_number(value) is None:
                others = "the other labels" if split == "train" else "the training labels"
                raise ValueError(
                    f"{_row(paths[split], index)}: `{column}` {value!r} is not a number, and {others} are numbers."
                )
            if not numbers and split == "train" and _as_number(value) is not None:
                raise ValueError(
                    f"{_row(paths[split], index)}: `{column}` {value!r} is a number, and the other labels are class "
                    "names; labels are either numbers or class names."
                )
    return numbers


@dataclass(frozen=True)
class DataFiles:
    """Own data files read by `load_data_files`: their task kind, splits (pairzoo's schema of that kind), the class
    names (classification) or the label range (regression), and the summary: one line that states what was
    inferred, and a warning line when validation or test rows repeat training rows (`_overlap_warning`)."""

    task: str
    splits: DatasetDict
    label_names: "list[str] | None"
    label_range: "tuple[float, float] | None"
    summary: str


def load_data_files(
    files: "dict[str, str | os.PathLike]",
    columns: "dict[str, str] | None" = None,
    label_min: "float | None" = None,
    label_max: "float | None" = None,
    tasks: "tuple[str, ...]" = tuple(SCHEMAS),
) -> DataFiles:
    """Read own data files (`files`: split -> path; `train` and `validation` needed, `test` optional; each read by
    `read_data_file`) into pairzoo's schema of their task kind.

    `columns` maps the fields `sentence1`, `sentence2`, `condition`, `label` to column names (each defaults to its
    own name). `sentence1` and `label` are required; `sentence2` and `condition` are used when the training file has
    their column. The task kind follows from the fields and the training labels: a sentence pair is pair
    regression or pair classification, a pair with a condition conditional similarity (numeric labels), a sentence
    with a condition conditional classification (class labels). Labels that are not all integers, or any labels with
    `label_min`/`label_max`, are regression scores; their range is `[label_min, label_max]`, each bound defaulting to
    the training labels' min / max. Class names (labels that are not numbers; spaces around them dropped) become
    classes in sorted order; integer labels are class ids 0..max (or regression scores when the model, whose `tasks`
    are given, trains only the regression kind of these fields).

    Checked like the shared data sets: every text has a visible character, every label is a number or a class name
    (not a mix), regression labels lie in the range, validation and test labels are classes of the training file,
    and each split has the training file's columns; errors name the file, row and column (a missing column the flag
    that names it). Validation or test rows that repeat a training row are not an error: the summary gets a warning
    line counting them (`_overlap_warning`) and training goes on.
    """
    columns = {**{field: field for field in COLUMN_FLAGS}, **(columns or {})}
    unknown = sorted(set(files) - set(DATA_FILE_FLAGS))
    if unknown:
        raise ValueError(f"own data files are {list(DATA_FILE_FLAGS)}, got {unknown}.")
    for split in ("train", "validation"):
        if files.get(split) is None:
            raise ValueError(f"own data files need a {split} file ({DATA_FILE_FLAGS[split]}).")
    paths = {split: Path(path) for split, path in files.items() if path is not None}
    raw = {split: read_data_file(path, DATA_FILE_FLAGS[split]) for split, path in paths.items()}
    fields = _used_fields(raw["train"].column_names, columns, paths["train"])
    texts, labels = {}, {}
    for split, data in raw.items():
        missing = [field for field in fields if columns[field] not in data.column_names]
        if missing:
            raise ValueError(
                f"`{DATA_FILE_FLAGS[split]}` {str(paths[split])!r} has no column {columns[missing[0]]!r} "
                f"({COLUMN_FLAGS[missing[0]]}), which the training file has (its columns: {data.column_names})"
                f"{_near_column(data.column_names, columns[missing[0]])}."
            )
        texts[split] = {f: _file_texts(data[columns[f]], columns[f], paths[split]) for f in fields if f != "label"}
        labels[split] = _raw_labels(data[columns["label"]], columns["label"], paths[split])
    numbers = _check_label_kinds(labels, paths, columns["label"])
    integers = numbers and all(isinstance(_as_number(value), int) for value in labels["train"])
    scale = label_min is not None or label_max is not None
    task = _own_task(fields, numbers, integers, scale, tasks, paths["train"])
    if task in ("pair-regression", "conditional-similarity"):
        encoded, label_range, source = _regression_labels(labels, paths, columns["label"], label_min, label_max)
        label_names, label_text = None, f"regression labels on [{label_range[0]:g}, {label_range[1]:g}] ({source})"
        if not integers and _whole_floats(labels["train"]):
            label_text += (
                " (every training label is a whole number written as a float, such as 1.0: written as integers, "
                "0 and 1, they would be classes)"
            )
    else:
        encoded, label_names, label_text = _class_labels(labels, paths, columns["label"], integers)
        label_range = None
    features = _schema(task, label_names)
    splits = DatasetDict()
    for split in ("train", "validation", "test"):
        if split in raw:
            splits[split] = Dataset.from_dict({**texts[split], "label": encoded[split]}, features=features)
    read = ", ".join(f"{field} <- {columns[field]!r}" for field in fields)
    rows = ", ".join(f"{len(data)} {split}" for split, data in splits.items())
    summary = f"--train_file {str(paths['train'])!r}: {task.replace('-', ' ')} ({read}); {label_text}; rows: {rows}."
    overlap = _overlap_warning(texts, paths)
    return DataFiles(task, splits, label_names, label_range, summary + (f"\n{overlap}" if overlap else ""))


def _overlap_warning(texts: "dict[str, dict[str, list[str]]]", paths: "dict[str, Path]") -> str:
    """One warning line on the validation and test rows whose texts (every text field read: the sentences and the
    condition, exactly as read; labels aside) are those of a training row, '' when there are none. Such rows score
    the model on inputs it was trained on and raise its dev metric; they are counted, not removed, and training goes
    on (a warning, not an error: a shared row can be deliberate, and the user decides). A validation or test file
    that is the training file itself is said to be so."""
    fields = list(texts["train"])
    named = fields[0] if len(fields) == 1 else f"{', '.join(fields[:-1])} and {fields[-1]}"
    seen = set(zip(*(texts["train"][field] for field in fields)))
    parts = []
    for split in ("validation", "test"):
        if split not in texts:
            continue
        rows = list(zip(*(texts[split][field] for field in fields)))
        shared = sum(row in seen for row in rows)
        flag = DATA_FILE_FLAGS[split]
        if os.path.samefile(paths[split], paths["train"]):
            parts.append(f"{flag} is the --train_file itself, so all {len(rows)} of its rows are training rows")
        elif shared:
            parts.append(f"{shared} of {len(rows)} {flag} rows have the {named} of a --train_file row")
    if not parts:
        return ""
    return (
        f"warning: {'; '.join(parts)}: metrics on them score inputs the model was trained on and overstate how it "
        "does on unseen inputs; training goes on."
    )


# --------------------------------------------------------------------------------------------- entry point


def _load_hub(hub_id: str, split: "str | None") -> DatasetDict:
    import datasets

    try:
        loaded = datasets.load_dataset(hub_id, split=split)
    except Exception as err:  # offline, unknown id, ...: say which id failed and why
        raise ValueError(f"could not load Hub dataset {hub_id!r} (needs internet): {err}") from err
    loaded = DatasetDict({split: loaded}) if split else loaded
    for name, dataset in loaded.items():
        columns = set(dataset.column_names)
        if not any({c.split(" ")[0] for c in cols} <= columns for cols in SCHEMAS.values()):
            raise ValueError(
                f"Hub dataset {hub_id!r} split {name!r} has columns {sorted(columns)}, no pairzoo schema."
            )
    return loaded


def dataset_files(name: str, split: "str | None" = None) -> list[str]:
    """Paths, relative to the data folder, that `load_dataset(name, split=split)` reads (every split's when `split`
    is None; for `wn18rr` also what `load_kg_entities` reads): none for `synthetic` and `hub:<id>`; a derived
    train/validation split gives the file it is cut from. `csts` (read from its own path), an unknown name or a
    split the data set does not have is a ValueError."""
    if name == "synthetic" or name.startswith("hub:"):
        return []
    if name == "csts":
        raise ValueError("dataset 'csts' is read from `csts_path` (the official C-STS CSVs), not the data folder.")
    dataset_task(name)  # unknown names raise here, listing the known ones
    if name == "wn18rr":
        if split is not None and split not in WN18RR_SPLIT_FILES:
            raise ValueError(f"dataset 'wn18rr' has no split {split!r}; it has {sorted(WN18RR_SPLIT_FILES)}.")
        splits = [split] if split else list(WN18RR_SPLIT_FILES)
        return [f"WN18RR/{f}" for f in (*WN18RR_TEXT_FILES, *(WN18RR_SPLIT_FILES[s] for s in splits))]
    spec = DATASETS[name]
    if split is None:
        sources = list(spec.files)
    elif spec.derived_train and split in ("train", "validation"):  # both cut from one file (`_load_shared`)
        sources = ["train" if "train" in spec.files else "validation"]
    elif split in spec.files:
        sources = [split]
    else:
        raise ValueError(f"dataset {name!r} has no split {split!r}; it has {sorted(spec.files)}.")
    files: list[str] = []
    for source in sources:
        where = spec.files[source]
        rel = where[0] if isinstance(where, tuple) else where
        folder, file = rel.rsplit("/", 1)
        stems = [f"{folder}/{stem}.{file.split('.', 1)[1]}" for stem in ESNLI_COMPANIONS] if name == "snli" else []
        files += [f for f in (rel, *stems) if f not in files]
    return files


def load_dataset(
    name: str,
    data_dir: "str | os.PathLike | None" = None,
    split: "str | None" = None,
    seed: int = 0,
    csts_path: "str | os.PathLike | None" = None,
    synthetic_sizes: "tuple[int, int, int]" = (2000, 400, 400),
) -> DatasetDict:
    """Load data set `name` (see `list_datasets()`), or a Hub data set as `hub:<id>`.

    `seed` drives the synthetic generator and the documented train/validation splits of data sets shipped without
    one. `csts_path` is the folder of the official C-STS CSVs for `name="csts"`, or one CSV file read as the split
    `split` names: without `split` (every split, as training asks) one file is a ValueError naming `csts_path`, since
    training needs the train and validation files (a validation split cut from one file would put the two
    conditions of one sentence pair on both sides).
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"`dataset` must be a non-empty string, got {name!r}.")
    if split is not None and split not in ("train", "validation", "test"):
        raise ValueError(f"`split` must be 'train', 'validation' or 'test', got {split!r}.")
    if name.startswith("hub:"):
        return _load_hub(name[4:], split)
    if name == "synthetic":
        data = make_synthetic_dataset(*synthetic_sizes, seed=seed)
        return DatasetDict({split: data[split]}) if split else data
    if name == "csts":
        if csts_path is None:
            raise ValueError("dataset 'csts' needs `csts_path` (--csts_path): the folder of the official C-STS CSVs.")
        if split is None and Path(csts_path).is_file():
            raise ValueError(
                f"`csts_path` (--csts_path) {str(csts_path)!r} is one file; training needs the folder of the C-STS "
                "CSVs, with csts_train.csv and csts_validation.csv (one file can be read as one split: "
                "load_dataset('csts', csts_path=file, split=...))."
            )
        return load_csts(csts_path, split)
    dataset_task(name)  # unknown names raise here, listing the known ones
    data_dir = resolve_data_dir(data_dir)
    if name == "wn18rr":
        return _load_wn18rr(data_dir, split)
    return _load_shared(DATASETS[name], data_dir, split, seed)


def label_range(name: str) -> "tuple[float, float] | None":
    """Label scale of a regression data set (None for classification and knowledge graphs)."""
    task = dataset_task(name) if not name.startswith("hub:") else "conditional-similarity"
    if task not in ("pair-regression", "conditional-similarity"):
        return None
    return (0.0, 5.0) if name == "stsb" else (1.0, 5.0)

"""Data loaders: every data set of the shared data folder, C-STS CSVs, the synthetic set and Hub ids.

Each loader returns a `datasets.DatasetDict` with one schema per task kind (see `SCHEMAS`). Splits are named `train`,
`validation` and `test`. Labelled test splits of the shared folder are held out on purpose: a loader returns the splits
whose files exist, logs which are missing, and asking for a missing split is a `FileNotFoundError` naming its file.
Data sets that ship without a training split get a documented, seeded split of what they have (see `DATASETS`).
The shared data is read from its folder, never copied into the repository.
"""

import csv
import dataclasses
import logging
import math
import os
import random
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

from .synthetic import make_synthetic_dataset

logger = logging.getLogger(__name__)

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
    or more than `max_fields` fields are errors naming the file and line."""
    lines = _read_lines(path)
    try:
        rows = list(csv.reader(lines, delimiter="\t", quoting=csv.QUOTE_NONE))
    except csv.Error as err:
        raise ValueError(f"data file {str(path)!r} is not a readable TSV: {err}.") from err
    names = rows.pop(0) if header and rows else []
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


def _column(names: list[str], name: str, path: Path) -> int:
    if name not in names:
        raise ValueError(f"{str(path)!r} has no column {name!r} (columns: {names}).")
    return names.index(name)


def _check_text(value: str, field: str, path: Path, row: int) -> str:
    if not value.strip():
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


def load_kg_entities(data_dir: "str | os.PathLike | None" = None) -> Dataset:
    """WN18RR entity table: `entity_id`, `text` ("name, definition"), from `entity2text.txt`."""
    path = resolve_data_dir(data_dir) / "WN18RR" / "entity2text.txt"
    _, rows = _read_tsv(path, header=False, min_fields=2)
    return Dataset.from_dict({"entity_id": [r[0] for r in rows], "text": [r[1] for r in rows]})


def _load_wn18rr(data_dir: Path, split: "str | None") -> DatasetDict:
    folder = data_dir / "WN18RR"
    entities, relations = (dict(_read_tsv(folder / f, header=False, min_fields=2)[1]) for f in WN18RR_TEXT_FILES)
    files = WN18RR_SPLIT_FILES
    if split is not None and split not in files:
        raise ValueError(f"dataset 'wn18rr' has no split {split!r}; it has {sorted(files)}.")
    out = DatasetDict()
    for name, file in files.items():
        if split is not None and name != split:
            continue
        path = folder / file
        if not path.is_file():
            if split == name:
                raise FileNotFoundError(f"split {name!r} of 'wn18rr' needs {str(path)!r}, which is missing.")
            logger.warning(
                "wn18rr: split %r is missing (%s not found; labelled test splits are held out).", name, path
            )
            continue
        _, rows = _read_tsv(path, header=False, min_fields=3)
        triples = []
        for n, (head, relation, tail, *_) in enumerate(rows, start=1):
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
        out[name] = Dataset.from_list(triples, features=_schema("kg-triples"))
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
    """Official C-STS CSVs: a folder with `csts_{train,validation,test}.csv`, or one CSV file (returned as `train`).

    Columns `sentence1, sentence2, condition, label`; labels must be in 1-5 (the unlabelled official test file may
    leave them empty, giving NaN).
    """
    path = Path(path)
    if path.is_file():
        return DatasetDict(
            {
                split or "train": Dataset.from_list(
                    _read_csts_csv(path, True), features=_schema("conditional-similarity")
                )
            }
        )
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
    one. `csts_path` is the folder (or file) of the official C-STS CSVs for `name="csts"`.
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

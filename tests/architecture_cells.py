"""The families x architectures matrix: what one cell checks, shared by tests/test_architectures.py and
benchmarks/architecture_matrix.py.

A cell is one method family (a registry model in a given configuration, `FAMILIES`) on one tiny random backbone
(`pairzoo.backbones.TINY_ARCHITECTURES`). In this process (`run_cell`): create -> forward on a batch of two rows
encoded by the family's collator -> two AdamW steps (finite gradients reaching every trainable parameter; trainable
parameters move, frozen ones do not) -> save/load round trip (same logits) -> pairzoo's own pipeline scores two
examples -> Hub export (`pairzoo.hub_cards.export_model`). Each export then goes to ONE fresh process for the whole
matrix (`FreshProcess`, pairzoo unimportable), which loads it with its card's Auto class and `trust_remote_code=True`
(logits on the same batch must equal the exported model's) and runs its card's pipeline (outputs equal to pairzoo's
pipeline). A cell's result names the first stage (`STAGES`) that failed.

Where a family cannot apply to an architecture by construction, creation refuses it with a ValueError naming the
architecture; `EXPECTED_REFUSALS` lists those cells, and such a cell passes only when creation raises that error.
"""

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import pipeline, set_seed

from pairzoo import create_model, load_tokenizer
from pairzoo.backbones import TINY_ARCHITECTURES, backbone_config
from pairzoo.hub_cards import export_model
from pairzoo.hub_cards.export import _BLOCK_PAIRZOO
from pairzoo.registry import get_model_spec
from pairzoo.training.collators import make_collator

ATOL, RTOL = 1e-6, 1e-5  # float32 rounding after a reload (tests/model_harness.py: assert_close_after_reload)
MAX_LENGTH = 64
STAGES = ("create", "forward", "train", "save-load", "pipeline", "export", "fresh-auto-class", "fresh-pipeline")
SICK_LABELS = {0: "entailment", 1: "neutral", 2: "contradiction"}


@dataclass(frozen=True)
class Family:
    """A row of the matrix: registry model `model` with config `overrides`, trained and exported for task kind
    `task` (None: the model's registry task)."""

    model: str
    overrides: dict = field(default_factory=dict)
    task: "str | None" = None


# Tiny settings (2 layers, 4 heads) of each family's configuration; the recommended forms follow pairzoo/make_zoo.py.
FAMILIES: "dict[str, Family]" = {
    "cross-encoder": Family("cross-encoder"),
    "seaver": Family("seaver"),
    "csr-tri": Family("csr", {"architecture": "tri", "router_layers": [0, 1]}),
    "csr-bi": Family("csr", {"architecture": "bi", "router_layers": [0, 1]}),
    "csr-reference": Family("csr", {"architecture": "tri", "router": "reference"}),
    "csr-no-router": Family("csr", {"use_router": False, "tri_head": "hadamard"}),
    "comateformer": Family(  # the recommended gentle integration (make_zoo's), a 3-class SICK-E-like head
        "comateformer",
        {"integration": "mix", "combined_dropout": False, "mix_scale": 10.0, "id2label": SICK_LABELS},
    ),
    "siamese-re2-sfa": Family(
        "siamese-matcher",
        {
            "matcher": "re2",
            "feature_attention": "sfa",
            "feature_attention_residual": "gated",
            "hidden_size": 64,
            "max_sequence_length": 32,
            "sfa_reductions": [2, 2],
            "id2label": SICK_LABELS,
        },
    ),
    "neighbor-attention": Family(
        "neighbor-attention",
        {
            "training_mode": "neighbor",
            "classifier_norm": "batch",
            "lambda_m": 0.0,
            "lambda_n": 0.0,
            "neighbor_layers": [0],
            "num_candidates": 20,
            "num_neighbors": 4,
            "id2label": SICK_LABELS,
        },
    ),
}

# (family, architecture) -> a regex the creation ValueError must match (it must also name the architecture's
# model_type). Each entry says why the method cannot apply to that architecture by construction.
EXPECTED_REFUSALS: "dict[tuple[str, str], str]" = {
    # CSR's reference router attends from the sentence to the separately encoded condition's keys, placing the
    # sentence after the condition by absolute position ids; DeBERTa (relative terms), MPNet (bucketed relative bias)
    # and ModernBERT (rotary) compute positions between tokens of one sequence inside attention, so those keys have
    # no position there.
    ("csr-reference", "tiny-deberta-v2"): r"router='reference' cannot run on",
    ("csr-reference", "tiny-mpnet"): r"router='reference' cannot run on",
    ("csr-reference", "tiny-modernbert"): r"router='reference' cannot run on",
}

_ROWS = [
    {"sentence1": "Two women are walking in a park.", "sentence2": "A man runs on a beach.", "condition": "People."},
    {"sentence1": "A cat sleeps.", "sentence2": "A dog sleeps on the warm sofa.", "condition": "The animal."},
]


def cell_id(family: str, architecture: str) -> str:
    return f"{family}/{architecture}"


def all_cells() -> "list[tuple[str, str]]":
    """Every (family, architecture) of the matrix, families in `FAMILIES` order."""
    return [(family, architecture) for family in FAMILIES for architecture in TINY_ARCHITECTURES]


@dataclass
class CellResult:
    """What a cell reached: `stage` is the first stage that failed (None: every stage passed), `error` its one-line
    error; `refusal` the creation ValueError's message when creation refused the architecture."""

    family: str
    architecture: str
    stage: "str | None" = None
    error: str = ""
    refusal: "str | None" = None

    def failed(self, stage: str, err: BaseException) -> "CellResult":
        self.stage, self.error = stage, _one_line(err)
        return self


def _one_line(err: "BaseException | str", limit: int = 700) -> str:
    if isinstance(err, BaseException):
        frames = traceback.extract_tb(err.__traceback__)
        where = f" ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
        err = f"{type(err).__name__}: {err}{where}"
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


@functools.cache
def tokenizer_of(architecture: str):
    return load_tokenizer(architecture)


def model_type_of(architecture: str) -> str:
    return backbone_config(architecture).model_type


def _task_and_entry_points(family: Family) -> "tuple[str, str, str]":
    spec = get_model_spec(family.model)
    task = family.task or spec.task
    auto_class, pipeline_task = spec.entry_points(task)
    return task, auto_class, pipeline_task


def _rows(task: str, config) -> "list[dict]":
    """Two training rows of task kind `task` with labels the model's head takes."""
    fields = ("sentence1", "sentence2", "condition") if task.startswith("conditional") else ("sentence1", "sentence2")
    if config.num_labels > 1:
        labels = [0, config.num_labels - 1]
    else:
        low, high = config.label_min, config.label_max
        labels = [low + 0.25 * (high - low), low + 0.75 * (high - low)]
    return [{**{f: row[f] for f in fields}, "label": label} for row, label in zip(_ROWS, labels)]


def pipeline_examples(pipeline_task: str) -> "list[dict]":
    if pipeline_task == "conditional-similarity":
        return [{f: row[f] for f in ("sentence1", "sentence2", "condition")} for row in _ROWS]
    return [{"text": row["sentence1"], "text_pair": row["sentence2"]} for row in _ROWS]


def _check_train_steps(model, batch: dict) -> None:
    """Two AdamW steps: every gradient finite, every trainable parameter with a non-zero gradient in one of the two
    backward passes (a zero-initialised gate, such as the Siamese matcher's gated skip connection, passes no gradient
    to the branch it gates until its first step), every trainable parameter moved and no frozen one."""
    trainable = {n: p for n, p in model.named_parameters() if p.requires_grad}
    if not trainable:
        raise AssertionError("the model has no trainable parameter")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(trainable.values(), lr=1e-2)
    reached = set()
    model.train()
    for step in range(2):
        optimizer.zero_grad()
        loss = model(**batch).loss
        if loss is None or not torch.isfinite(loss):
            raise AssertionError(f"step {step}: loss {loss}")
        loss.backward()
        bad = [n for n, p in trainable.items() if p.grad is not None and not torch.isfinite(p.grad).all()]
        if bad:
            raise AssertionError(f"step {step}: non-finite gradients: {bad[:6]}")
        reached.update(n for n, p in trainable.items() if p.grad is not None and p.grad.any())
        optimizer.step()
    model.eval()
    missing = [n for n in trainable if n not in reached]
    if missing:
        raise AssertionError(f"no gradient reached {len(missing)} trainable parameters: {missing[:6]}")
    unmoved = [n for n, p in trainable.items() if torch.equal(p.detach(), before[n])]
    moved_frozen = [
        n for n, p in model.named_parameters() if not p.requires_grad and not torch.equal(p.detach(), before[n])
    ]
    if unmoved or moved_frozen:
        raise AssertionError(f"trainable parameters not moved: {unmoved[:6]}; frozen ones moved: {moved_frozen[:6]}")


def _close(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(actual, expected, atol=ATOL, rtol=RTOL, msg=lambda m: f"{what}: {m}")


def run_cell(family_name: str, architecture: str, folder: Path) -> "tuple[CellResult, dict | None]":
    """The in-process stages of one cell; its export and what the fresh process needs go under `folder`. Returns
    the result so far and the fresh-process job (None when a stage failed or creation refused)."""
    result = CellResult(family_name, architecture)
    family = FAMILIES[family_name]
    task, auto_class, pipeline_task = _task_and_entry_points(family)
    set_seed(0)
    try:
        model = create_model(family.model, backbone=architecture, **family.overrides).eval()
    except ValueError as err:
        result.refusal = str(err)
        return result.failed("create", err), None
    except Exception as err:
        return result.failed("create", err), None
    tokenizer = tokenizer_of(architecture)
    stage = "forward"
    try:
        config = model.config
        label_range = (config.label_min, config.label_max) if config.num_labels == 1 else None
        batch = make_collator(model, tokenizer, MAX_LENGTH, label_range)(_rows(task, config))
        with torch.no_grad():
            out = model(**batch)
        if out.logits.shape[0] != 2 or not torch.isfinite(out.logits).all():
            raise AssertionError(f"logits of shape {tuple(out.logits.shape)}, finite: {torch.isfinite(out.logits)}")
        if out.loss is None or not torch.isfinite(out.loss):
            raise AssertionError(f"loss {out.loss}")
        stage = "train"
        _check_train_steps(model, batch)
        stage = "save-load"
        features = {k: v.contiguous() for k, v in batch.items() if k != "labels"}
        with torch.no_grad():
            logits = model(**features).logits
        saved = folder / "saved"
        model.save_pretrained(saved)
        reloaded = type(model).from_pretrained(saved).eval()
        with torch.no_grad():
            _close(reloaded(**features).logits, logits, "reloaded logits")
        shutil.rmtree(saved)
        stage = "pipeline"
        examples = pipeline_examples(pipeline_task)
        expected = pipeline(pipeline_task, model=model, tokenizer=tokenizer)(examples)
        stage = "export"
        exported = export_model(model, tokenizer, folder / "export", task=task)
        save_file(features, str(folder / "inputs.safetensors"))
    except Exception as err:
        return result.failed(stage, err), None
    job = {
        "cell": cell_id(family_name, architecture),
        "folder": str(exported.resolve()),
        "auto_class": auto_class,
        "class": type(model).__name__,
        "inputs": str((folder / "inputs.safetensors").resolve()),
        "logits": logits.tolist(),
        "pipeline_task": pipeline_task,
        "examples": examples,
        "expected": expected,
        "atol": ATOL,
        "rtol": RTOL,
    }
    return result, job


# Runs in the fresh process: pairzoo blocked, then one job file path per stdin line (each job's export loaded with
# its Auto class and its pipeline, outputs compared with the job's expectations), one result line per job.
_FRESH_SCRIPT = (
    _BLOCK_PAIRZOO
    + r"""
import json, traceback

import torch, transformers
from safetensors.torch import load_file
from transformers import pipeline

torch.set_num_threads(1)


def close(actual, expected, atol, rtol):
    actual, expected = torch.tensor(actual, dtype=torch.float64), torch.tensor(expected, dtype=torch.float64)
    return actual.shape == expected.shape and bool(torch.allclose(actual, expected, atol=atol, rtol=rtol))


def name(obj):
    return type(obj).__module__ + "." + type(obj).__name__


def one_line(err):
    frames = traceback.extract_tb(err.__traceback__)
    where = f" ({frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return " ".join(f"{type(err).__name__}: {err}{where}".split())[:700]


for line in sys.stdin:
    with open(line.strip()) as file:
        job = json.load(file)
    stage, error = "fresh-auto-class", ""
    try:
        auto = getattr(transformers, job["auto_class"])
        model = auto.from_pretrained(job["folder"], trust_remote_code=True, use_safetensors=True).eval()
        if name(model).startswith("pairzoo") or type(model).__name__ != job["class"]:
            raise AssertionError(f"{job['auto_class']} loaded {name(model)}, not the export's {job['class']}")
        with torch.no_grad():
            logits = model(**load_file(job["inputs"]))["logits"]
        if not close(logits.tolist(), job["logits"], job["atol"], job["rtol"]):
            raise AssertionError(f"logits {logits.tolist()} differ from pairzoo's {job['logits']}")
        stage = "fresh-pipeline"
        scorer = pipeline(
            job["pipeline_task"], model=job["folder"], trust_remote_code=True, device="cpu",
            model_kwargs={"use_safetensors": True},
        )
        if name(scorer).startswith("pairzoo") or name(scorer.model).startswith("pairzoo"):
            raise AssertionError(f"the pipeline is pairzoo's: {name(scorer)}, {name(scorer.model)}")
        outputs = scorer(job["examples"])
        same = len(outputs) == len(job["expected"]) and all(
            got.keys() == want.keys()
            and got.get("label") == want.get("label")
            and close(got["score"], want["score"], job["atol"], job["rtol"])
            for got, want in zip(outputs, job["expected"])
        )
        if not same:
            raise AssertionError(f"pipeline outputs {outputs} differ from pairzoo's {job['expected']}")
        stage = None
    except Exception as err:
        error = one_line(err)
    print("MATRIX_CELL " + json.dumps({"cell": job["cell"], "stage": stage, "error": error}), flush=True)
if "pairzoo" in sys.modules:
    raise SystemExit("pairzoo was imported")
print("MATRIX_DONE", flush=True)
"""
)


class FreshProcess:
    """ONE new Python process, started at once, that loads exports as their users do: pairzoo cannot be imported in
    it, offline, outside the repository, one thread, its own empty cache of remote code (`HF_MODULES_CACHE`). Each
    `submit`ted job is written to a JSON file whose path goes to the process's stdin, so the process (its imports
    first) works while the next cells are built; `results` waits for it."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.cells = folder, []
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "OMP_NUM_THREADS": "1",
            "HF_MODULES_CACHE": str(folder / "hf_modules"),
        }
        env.pop("PYTHONPATH", None)
        self.stdout, self.stderr = (open(folder / name, "w+") for name in ("fresh.out", "fresh.err"))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _FRESH_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=self.stdout,
            stderr=self.stderr,
            text=True,
            env=env,
            cwd=folder,
        )

    def submit(self, job: dict) -> None:
        job_file = self.folder / f"job{len(self.cells)}.json"
        job_file.write_text(json.dumps(job))
        self.cells.append(job["cell"])
        try:
            self.proc.stdin.write(f"{job_file}\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):  # the process died; `results` reports it per cell
            pass

    def results(self, timeout: float) -> "dict[str, dict]":
        """Cell id -> {"stage": first failed stage or None, "error"} for every submitted job. A cell the process did
        not report on (it crashed, imported pairzoo or ran past `timeout` seconds) gets stage "fresh-auto-class" and
        the process's last error line."""
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout)
            tail = None
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            tail = f"the fresh process took more than {timeout:g} s"
        self.stdout.seek(0), self.stderr.seek(0)
        lines, errors = self.stdout.read().splitlines(), self.stderr.read().strip().splitlines()
        self.stdout.close(), self.stderr.close()
        done = tail is None and self.proc.returncode == 0 and "MATRIX_DONE" in lines
        tail = tail or (errors or [f"exit code {self.proc.returncode}"])[-1]
        results = {}
        for line in lines:
            if line.startswith("MATRIX_CELL "):
                cell = json.loads(line[len("MATRIX_CELL ") :])
                results[cell.pop("cell")] = cell
        for cell in self.cells:
            if cell not in results:
                results[cell] = {"stage": "fresh-auto-class", "error": f"no result from the fresh process: {tail}"}
            elif not done and results[cell]["stage"] is None:  # the process failed after the cell passed
                results[cell] = {"stage": "fresh-pipeline", "error": f"the fresh process failed: {tail}"}
        return results


def _control_jobs(job: dict) -> "list[dict]":
    """Two copies of `job` whose expectations are off by 1e-3, one in the logits, one in the pipeline's first
    score: the fresh process must report them at `fresh-auto-class` and `fresh-pipeline`."""
    logits = {**job, "cell": CONTROL_LOGITS, "logits": (torch.tensor(job["logits"]) + 1e-3).tolist()}
    expected = [dict(output) for output in job["expected"]]
    expected[0]["score"] += 1e-3
    return [logits, {**job, "cell": CONTROL_PIPELINE, "expected": expected}]


CONTROL_LOGITS, CONTROL_PIPELINE = "control/logits", "control/pipeline"


def run_matrix(
    cells: "list[tuple[str, str]]", folder: "Path | None" = None, controls: bool = False, timeout: float = 600
) -> "dict[str, CellResult]":
    """Every cell's result (cell id -> `CellResult`): the in-process stages per cell, and one fresh process
    (`FreshProcess`, at most `timeout` seconds after the last cell is built) for all exports. Works in `folder`
    (default: a temporary folder, removed afterwards); runs on one torch thread. With
    `controls`, the fresh process also gets `_control_jobs` (results under `CONTROL_LOGITS` and `CONTROL_PIPELINE`,
    family "control"), which show that its comparisons can fail."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    own = folder is None
    folder = Path(tempfile.mkdtemp(prefix="pairzoo-matrix-")) if own else Path(folder)
    fresh = FreshProcess(folder)
    try:
        results, first_job = {}, None
        for number, (family, architecture) in enumerate(cells):
            cell_folder = folder / f"cell{number}"
            cell_folder.mkdir(parents=True)
            result, job = run_cell(family, architecture, cell_folder)
            results[cell_id(family, architecture)] = result
            if job is not None:
                fresh.submit(job)
                first_job = first_job or job
        if controls and first_job is not None:
            for job in _control_jobs(first_job):
                results[job["cell"]] = CellResult("control", first_job["cell"])
                fresh.submit(job)
        for cell, outcome in fresh.results(timeout).items():
            if outcome["stage"] is not None:
                results[cell].stage, results[cell].error = outcome["stage"], outcome["error"]
        return results
    finally:
        if fresh.proc.poll() is None:  # an error in this process: stop the fresh one
            fresh.proc.kill()
            fresh.proc.wait()
        torch.set_num_threads(threads)
        if own:
            shutil.rmtree(folder, ignore_errors=True)


def refusal_problem(result: CellResult) -> "str | None":
    """Why `result` of an expected-refusal cell is wrong (None: creation refused the architecture as expected)."""
    pattern = EXPECTED_REFUSALS[(result.family, result.architecture)]
    if result.refusal is None:
        return f"expected creation to refuse {result.architecture}, but stage {result.stage or 'none'} failed"
    model_type = model_type_of(result.architecture)
    if model_type not in result.refusal or not re.search(pattern, result.refusal):
        return f"the refusal must name {model_type!r} and match {pattern!r}: {result.refusal}"
    return None


def status(result: CellResult) -> str:
    """The cell's mark in the markdown table: ✓, refused (when expected), or ✗ and the stage that failed."""
    if (result.family, result.architecture) in EXPECTED_REFUSALS:
        return "refused" if refusal_problem(result) is None else "✗ refusal"
    return "✓" if result.stage is None else f"✗ {result.stage}"


def markdown_table(results: "dict[str, CellResult]", families: "list[str]", architectures: "list[str]") -> str:
    """The matrix as a markdown table: a row per family, a column per architecture (its name without `tiny-`), each
    cell its `status`; a cell absent from `results` is blank."""
    header = ["family", *(a.removeprefix("tiny-") for a in architectures)]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for family in families:
        marks = [status(results[cell_id(family, a)]) if cell_id(family, a) in results else "" for a in architectures]
        lines.append("| " + " | ".join([family, *marks]) + " |")
    return "\n".join(lines)


__all__ = [
    "CONTROL_LOGITS",
    "CONTROL_PIPELINE",
    "EXPECTED_REFUSALS",
    "FAMILIES",
    "STAGES",
    "CellResult",
    "all_cells",
    "cell_id",
    "markdown_table",
    "refusal_problem",
    "run_matrix",
    "status",
]

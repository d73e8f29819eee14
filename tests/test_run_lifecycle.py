"""The life of a training run in `python -m pairzoo.train` and `python -m pairzoo.train_kg`: the output folder is
checked before anything is built, held by one run at a time (a killed run's lock is taken over), cleared of what a
run killed mid-write left, released at the end; every file a run writes gets a plain `open`'s mode; an undefined
validation metric keeps the trained run (null in a strict-JSON metrics.json); and each flag's bad value is one line
naming the flag, with nothing written."""

import json
import logging
import math
import os
import socket
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from test_kg import _write_graph

from pairzoo.fileio import LOCK_NAME, FolderInUseError, folder_lock, remove_leftovers
from pairzoo.modeling import CrossEncoderForConditionalSimilarity
from pairzoo.train import console_main
from pairzoo.train_kg import console_main as kg_console_main
from pairzoo.training import cli, kg
from pairzoo.training.cli import NonFiniteLossError, complete_checkpoints, main, undefined_metrics

REPO = Path(__file__).resolve().parents[1]
TINY = ["--backbone", "tiny-bert", "--max_steps", "1", "--per_device_train_batch_size", "4",
        "--synthetic_train_size", "8", "--synthetic_validation_size", "4", "--max_length", "48",
        "--eval_strategy", "no", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]  # fmt: skip
KG_TINY = ["--backbone", "tiny-bert", "--max_steps", "1", "--batch_size", "4", "--max_length", "16",
           "--eval_batch_size", "4", "--logging_steps", "1"]  # fmt: skip
# A process that holds a folder's lock until its stdin closes.
HOLD_LOCK = (
    "import sys\nfrom pairzoo.fileio import folder_lock\n"
    "with folder_lock(sys.argv[1]):\n    print('held', flush=True)\n    sys.stdin.read()\n"
)
CSTS_HEADER = "sentence1,sentence2,condition,label\n"


def _snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*")}


def _plain_mode(tmp_path: Path) -> int:
    """The mode a plain `open` gives a new file here."""
    probe = tmp_path / "plain-open-probe"
    probe.write_text("x")
    mode = stat.S_IMODE(probe.stat().st_mode)
    probe.unlink()
    return mode


def _write_lock(folder: Path, pid: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    lock = folder / LOCK_NAME
    lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": "2024-01-01 00:00:00"}))
    return lock


def _dead_pid() -> int:
    """The id of a process that has ended (and was reaped)."""
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(proc.stdout)


def _hold_lock(folder: Path) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(folder)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    return holder


def _error_line(capsys, prog: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith(f"{prog}: error: "), err
    assert not any("Traceback" in line for line in err)
    return err[-1]


def _kg_argv(tmp_path: Path, out: Path, *extra: str) -> list[str]:
    data_dir = tmp_path / "data"
    if not data_dir.exists():
        _write_graph(data_dir)
    return [*KG_TINY, "--data_dir", str(data_dir), "--output_dir", str(out), *extra]


# --------------------------------------------------------------------------------------- one run per output folder


@pytest.mark.parametrize("tool", ["train", "train_kg"])
def test_a_lock_of_a_live_process_refuses_the_run_and_writes_nothing(tmp_path, capsys, tool):
    out = tmp_path / "run"
    sleeper = subprocess.Popen(["sleep", "120"])
    try:
        _write_lock(out, sleeper.pid)
        argv = [*TINY, "--output_dir", str(out)] if tool == "train" else _kg_argv(tmp_path, out)
        before = _snapshot(tmp_path)
        assert (console_main if tool == "train" else kg_console_main)(argv) == 2
    finally:
        sleeper.kill()
        sleeper.wait()
    line = _error_line(capsys, f"pairzoo.{tool}")
    assert "`--output_dir`" in line and repr(str(out)) in line and f"pid {sleeper.pid}" in line
    assert LOCK_NAME in line  # says which file to delete if no run uses the folder
    assert _snapshot(tmp_path) == before


def test_a_second_run_is_refused_while_the_first_holds_the_folder(tmp_path):
    out = tmp_path / "run"
    holder = _hold_lock(out)
    try:
        before = _snapshot(tmp_path)
        with pytest.raises(FolderInUseError, match=rf"`--output_dir` .*is in use by another run \(pid {holder.pid} "):
            main([*TINY, "--output_dir", str(out)])
        assert _snapshot(tmp_path) == before
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert holder.returncode == 0
    assert not out.exists(), "the holder released its lock and removed the folder it created, left empty"


def test_a_killed_runs_lock_is_taken_over_with_a_warning_and_released_at_the_end(tmp_path, caplog):
    out = tmp_path / "run"
    holder = _hold_lock(out)
    holder.kill()  # SIGKILL: no clean-up, the lock file stays
    holder.wait()
    assert json.loads((out / LOCK_NAME).read_text())["pid"] == holder.pid
    with caplog.at_level(logging.WARNING, logger="pairzoo"):
        result = main([*TINY, "--output_dir", str(out)])
    taken = [r.getMessage() for r in caplog.records if "taking over the lock" in r.getMessage()]
    assert len(taken) == 1 and f"pid {holder.pid}" in taken[0] and "no longer running" in taken[0]
    assert result["train_steps"] == 1 and (out / "metrics.json").is_file() and (out / "export").is_dir()
    assert not (out / LOCK_NAME).exists()


def test_a_failed_run_releases_its_lock_and_removes_the_folder_it_created(tmp_path, monkeypatch):
    real_forward = CrossEncoderForConditionalSimilarity.forward

    def nan_loss(self, *args, **kwargs):
        out = real_forward(self, *args, **kwargs)
        if self.training and out.loss is not None:
            out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(CrossEncoderForConditionalSimilarity, "forward", nan_loss)
    with pytest.raises(NonFiniteLossError):
        main([*TINY, "--output_dir", str(tmp_path / "new" / "run")])
    assert list(tmp_path.iterdir()) == []
    with folder_lock(tmp_path / "new" / "run"):  # free again
        pass


def test_only_the_main_process_takes_the_lock(tmp_path, monkeypatch):
    """The other processes of a distributed run neither take nor check the lock the main process holds."""
    out = tmp_path / "run"
    _write_lock(out, os.getpid())
    cli.check_output_dir(out, is_main=False)
    monkeypatch.setenv("RANK", "1")
    cli.check_output_dir(out)  # the launcher's rank decides when the run has no TrainingArguments yet
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(FolderInUseError, match=f"pid {os.getpid()}"):
        cli.check_output_dir(out)


# --------------------------------------------------------------------------------------- the output folder's shape


@pytest.mark.parametrize("tool", ["train", "train_kg"])
@pytest.mark.parametrize("where", ["file", "under-a-file"])
def test_an_output_dir_that_cannot_be_a_folder_fails_before_anything_is_built(tmp_path, capsys, monkeypatch, tool,
                                                                                where):  # fmt: skip
    def never(*args, **kwargs):
        raise AssertionError("built data or a model before checking --output_dir")

    for module in (cli, kg):
        monkeypatch.setattr(module, "load_dataset", never)
        monkeypatch.setattr(module, "create_model", never)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file")
    out = blocker if where == "file" else blocker / "run"
    argv = [*TINY, "--output_dir", str(out)] if tool == "train" else _kg_argv(tmp_path, out)
    before = _snapshot(tmp_path)
    assert (console_main if tool == "train" else kg_console_main)(argv) == 2
    line = _error_line(capsys, f"pairzoo.{tool}")
    expected = "is a file, not a folder" if where == "file" else f"is under {str(blocker)!r}, which is a file"
    assert f"`--output_dir` {str(out)!r} {expected}" in line
    assert _snapshot(tmp_path) == before


# --------------------------------------------------------------------------------------- fp16 without a GPU


@pytest.mark.parametrize(
    "flags, accelerator", [(["--fp16", "true"], False), (["--fp16", "true", "--use_cpu", "true"], True)]
)
def test_fp16_on_the_cpu_is_refused(tmp_path, capsys, monkeypatch, flags, accelerator):
    monkeypatch.setattr(cli, "has_accelerator", lambda: accelerator)
    assert console_main([*TINY, "--output_dir", str(tmp_path / "run"), *flags]) == 2
    line = _error_line(capsys, "pairzoo.train")
    assert "`--fp16` needs a GPU or another accelerator" in line
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "accelerator, use_cpu, pinned", [(True, False, True), (True, True, False), (False, False, False)]
)
def test_host_memory_is_pinned_only_for_a_run_on_an_accelerator(tmp_path, monkeypatch, accelerator, use_cpu, pinned):
    from transformers import TrainingArguments

    monkeypatch.setattr(cli, "has_accelerator", lambda: accelerator)
    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=use_cpu, report_to="none")
    cli.unpin_memory_without_accelerator(args)
    assert args.dataloader_pin_memory is pinned


def test_the_kg_trainer_has_no_fp16_and_says_so(tmp_path, capsys):
    out = tmp_path / "out"
    assert kg_console_main(_kg_argv(tmp_path, out, "--fp16", "true")) == 2
    assert "--fp16" in _error_line(capsys, "pairzoo.train_kg")
    assert not out.exists()


# --------------------------------------------------------------------------------------- an undefined metric


def test_an_undefined_validation_metric_keeps_the_trained_run(tmp_path, capsys, caplog):
    csts = tmp_path / "csts"
    csts.mkdir()
    (csts / "csts_train.csv").write_text(
        CSTS_HEADER + "".join(f"A man walks {i}.,A man runs.,The speed.,{1 + i % 5}\n" for i in range(8))
    )
    # every validation label equal: Spearman and Pearson are undefined
    (csts / "csts_validation.csv").write_text(
        CSTS_HEADER + "".join(f"A dog {i}.,A cat.,The animal.,3\n" for i in range(4))
    )
    out = tmp_path / "run"
    with caplog.at_level(logging.WARNING, logger="pairzoo"):
        status = console_main([*TINY, "--dataset", "csts", "--csts_path", str(csts), "--output_dir", str(out)])
    assert status == 0, capsys.readouterr().err[-2000:]
    text = (out / "metrics.json").read_text()

    def no_constants(name):
        raise AssertionError(f"metrics.json holds {name}: not strict JSON")

    metrics = json.loads(text, parse_constant=no_constants)["metrics"]
    assert metrics["validation_spearman"] is None and metrics["validation_pearson"] is None
    assert math.isfinite(metrics["validation_mse"]) and math.isfinite(metrics["validation_loss"])
    warned = [r.getMessage() for r in caplog.records if "is undefined" in r.getMessage()]
    assert any(m.startswith("validation_spearman is undefined") for m in warned), warned
    assert (out / "export" / "model.safetensors").is_file()
    card = (out / "export" / "README.md").read_text()
    assert "validation_mse" in card and "validation_spearman" not in card and "nan" not in card.lower().split()


def test_a_non_finite_validation_loss_is_still_a_failed_run():
    with pytest.raises(NonFiniteLossError, match="validation_loss"):
        undefined_metrics({"validation_loss": float("nan"), "validation_spearman": 0.5})
    assert undefined_metrics({"validation_loss": 0.1, "validation_spearman": float("nan")}) == ["validation_spearman"]


# --------------------------------------------------------------------------------------- leftovers and modes


def _leftover(folder: Path, name: str, tag: str = "tmp", is_dir: bool = True) -> Path:
    path = folder / f".{name}.{tag}.{uuid.uuid4().hex}"
    if is_dir:
        path.mkdir(parents=True)
        (path / "model.safetensors").write_bytes(b"\0" * 16)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{")
    return path


def test_a_run_clears_what_a_killed_export_left_and_gives_every_file_a_plain_mode(tmp_path, caplog):
    out = tmp_path / "run"
    leftovers = [_leftover(out, "export"), _leftover(out, "export"), _leftover(out, "metrics.json", is_dir=False)]
    (out / ".mine").write_text("a user's hidden file")
    (out / ".export.tmp.not-hex").mkdir()  # not a name `temporary_sibling` makes
    with caplog.at_level(logging.WARNING, logger="pairzoo"):
        main([*TINY, "--max_steps", "2", "--save_strategy", "steps", "--save_steps", "1", "--output_dir", str(out)])
    assert not any(path.exists() for path in leftovers)
    assert (out / ".mine").is_file() and (out / ".export.tmp.not-hex").is_dir()
    cleared = [r.getMessage() for r in caplog.records if "cleared what an interrupted run left" in r.getMessage()]
    assert len(cleared) == 1 and all(path.name in cleared[0] for path in leftovers)
    assert [p.name for p in complete_checkpoints(out)] == ["checkpoint-1", "checkpoint-2"]
    plain = _plain_mode(tmp_path)
    written = [p for p in out.rglob("*") if p.is_file() and p.name != ".mine"]
    assert any(p.name == "model.safetensors" and p.parent.name == "checkpoint-1" for p in written)
    assert {str(p.relative_to(out)): oct(stat.S_IMODE(p.stat().st_mode)) for p in written} == {
        str(p.relative_to(out)): oct(plain) for p in written
    }


def test_the_kg_trainer_takes_over_a_killed_runs_folder(tmp_path, caplog):
    out = tmp_path / "out"
    pid = _dead_pid()
    _write_lock(out, pid)
    leftover = _leftover(out, "export")
    with caplog.at_level(logging.WARNING, logger="pairzoo"):
        assert kg_console_main(_kg_argv(tmp_path, out)) == 0
    messages = [r.getMessage() for r in caplog.records]
    assert any("taking over the lock" in m and f"pid {pid}" in m for m in messages)
    assert any("cleared what an interrupted run left" in m and leftover.name in m for m in messages)
    assert not leftover.exists() and not (out / LOCK_NAME).exists()
    json.loads((out / "metrics.json").read_text(), parse_constant=lambda name: pytest.fail(f"metrics.json: {name}"))
    plain = _plain_mode(tmp_path)
    assert {stat.S_IMODE(p.stat().st_mode) for p in out.rglob("*") if p.is_file()} == {plain}


def test_an_old_export_left_without_its_replacement_is_restored(tmp_path):
    aside = _leftover(tmp_path, "export", "old")  # killed between moving the export aside and renaming the new one in
    stale = _leftover(tmp_path, "metrics.json", "old", is_dir=False)
    (tmp_path / "metrics.json").write_text("{}")
    removed, restored = remove_leftovers(tmp_path)
    assert restored == ["export"] and removed == [stale.name]
    assert (tmp_path / "export" / "model.safetensors").is_file() and not aside.exists()
    assert (tmp_path / "metrics.json").read_text() == "{}"


def test_a_failed_run_into_an_existing_folder_leaves_it_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    before = _snapshot(tmp_path)
    real_forward = CrossEncoderForConditionalSimilarity.forward

    def nan_loss(self, *args, **kwargs):
        result = real_forward(self, *args, **kwargs)
        if self.training and result.loss is not None:
            result.loss = result.loss * float("nan")
        return result

    monkeypatch.setattr(CrossEncoderForConditionalSimilarity, "forward", nan_loss)
    with pytest.raises(NonFiniteLossError):
        main([*TINY, "--output_dir", str(out)])
    assert _snapshot(tmp_path) == before, "the lock file came and went without a trace"


# --------------------------------------------------------------------------------------- every flag's bad value

BAD_FLAGS = [
    (["--bf16", "true"], "`--bf16` needs a GPU"),
    (["--bf16_full_eval", "true"], "`--bf16_full_eval` needs a GPU"),
    (["--max_length", "100000"], "`--max_length` is 100000, above the backbone's limit of 512"),
    (["--data_seed_split", "-1"], "`--data_seed_split` must be an integer in [0, 2**32)"),
    (["--csts_path", "{tmp}"], "`--csts_path` is read with --dataset csts only"),
    (["--lr_scheduler_type", "nope"], "argument --lr_scheduler_type/--lr-scheduler-type: invalid choice: 'nope'"),
    (["--lr_scheduler_kwargs", "{bad"], "`--lr_scheduler_kwargs` is not valid JSON"),
    (["--lr_scheduler_kwargs", '{"nope": 1}'], "`--lr_scheduler_kwargs` has ['nope'], which the 'linear' schedule"),
    (["--optim", "nope"], "argument --optim: invalid choice: 'nope'"),
    (["--optim_args", "x"], "`--optim_args` must be comma-separated key=value pairs"),
    (["--save_total_limit", "0"], "`--save_total_limit` must be an integer >= 1"),
    (["--data_seed", "-1"], "`--data_seed` must be an integer in [0, 2**32)"),
    (["--eval_accumulation_steps", "0"], "`--eval_accumulation_steps` must be an integer >= 1"),
    (["--neftune_noise_alpha", "-1"], "`--neftune_noise_alpha` must be a number > 0"),
    (["--report_to", "tensorboard"], "`--report_to tensorboard` needs the tensorboard package"),
    (["--report_to", "nope"], "`--report_to` 'nope' is not one of"),
    (["--label_smoothing_factor", "0.5"], "`--label_smoothing_factor` smooths class labels"),
    (["--label_names", "foo"], "`--label_names` is fixed by pairzoo.train"),
    (["--eval_delay", "-1"], "`--eval_delay` must be a number >= 0"),
    (["--ddp_timeout", "0"], "`--ddp_timeout` must be an integer >= 1"),
    (["--dataloader_num_workers", "1", "--dataloader_prefetch_factor", "0"], "`--dataloader_prefetch_factor` must"),
    (["--accelerator_config", "{x"], "`--accelerator_config` is not valid JSON"),
    (["--deepspeed", "ds.json"], "`--deepspeed` needs the deepspeed package"),
    (["--eval_strategy", "nope"], "argument --eval_strategy/--eval-strategy: invalid choice"),
    (["--log_level", "nope"], "argument --log_level/--log-level: invalid choice"),
    (["--debug", "nope"], "argument --debug: invalid DebugOption value"),
    (["--max_steps", "abc"], "argument --max_steps/--max-steps: invalid int value: 'abc'"),
    (["--export", "maybe"], "argument --export: Truthy value expected"),
]


@pytest.mark.parametrize("flags, message", BAD_FLAGS, ids=[" ".join(f[0][:2]) for f in BAD_FLAGS])
def test_a_bad_flag_value_is_one_line_naming_the_flag_and_writes_nothing(tmp_path, capsys, monkeypatch, flags,
                                                                        message):  # fmt: skip
    # the same outcome on any machine: no accelerator, no reporting integration, no deepspeed installed
    monkeypatch.setattr(cli, "has_accelerator", lambda: False)
    monkeypatch.setattr(cli, "get_available_reporting_integrations", lambda: [])
    monkeypatch.setattr(cli, "is_installed", lambda package: package != "deepspeed")
    out = tmp_path / "run"
    argv = [*TINY, "--output_dir", str(out), *(f.replace("{tmp}", str(tmp_path)) for f in flags)]
    assert console_main(argv) == 2
    line = _error_line(capsys, "pairzoo.train")
    assert message in line
    assert list(tmp_path.iterdir()) == []

"""`pairzoo.console`: the parser, error line, `--traceback` and logging every pairzoo command line shares, and each
command line (pairzoo's and the benchmark scripts') on a bad flag (one line naming it, exit status 2, nothing
written)."""

import importlib
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pairzoo import demo, make_zoo
from pairzoo.adapt_mlm import main as adapt_main
from pairzoo.console import check_at_least, json_object, parse_flags, run_command, split_console_arguments
from pairzoo.hub_cards.__main__ import main as hub_cards_main
from pairzoo.train import console_main as train_main
from pairzoo.train_kg import console_main as train_kg_main
from pairzoo.training import expressiveness

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the benchmark scripts, as `benchmarks.<name>`


def test_traceback_is_taken_out_of_the_command_line_in_place():
    argv = ["push", "f", "org/n", "--learning_rate", "-1", "--traceback", "--x=2", "--", "--y"]
    console, rest = split_console_arguments(argv)
    assert console.traceback and rest == ["push", "f", "org/n", "--learning_rate", "-1", "--x=2", "--", "--y"]
    console, rest = split_console_arguments(["--dataset", "sick-e"])
    assert not console.traceback and rest == ["--dataset", "sick-e"]


def _fails(err: BaseException):
    def main(argv: "list[str]") -> None:
        raise err

    return main


def test_input_errors_are_one_line_with_status_2_and_failures_status_1(capsys):
    assert run_command("pairzoo.x", _fails(ValueError("`--a` is bad:\n  line two")), []) == 2
    assert capsys.readouterr().err == "pairzoo.x: error: `--a` is bad: line two\n"
    assert run_command("pairzoo.x", _fails(KeyError("no column 'label'")), []) == 2
    assert capsys.readouterr().err == "pairzoo.x: error: no column 'label'\n"
    failures = (FloatingPointError,)
    assert run_command("pairzoo.x", _fails(FloatingPointError("loss is nan")), [], failures=failures) == 1
    assert capsys.readouterr().err == "pairzoo.x: error: loss is nan\n"
    assert run_command("pairzoo.x", _fails(OSError("offline")), [], errors=(OSError,)) == 2
    with pytest.raises(OSError):  # not an input error of this command: a bug, with its traceback
        run_command("pairzoo.x", _fails(OSError("offline")), [])
    with pytest.raises(ValueError, match="`--a` is bad"):
        run_command("pairzoo.x", _fails(ValueError("`--a` is bad")), ["--traceback"])
    seen = []
    assert run_command("pairzoo.x", seen.append, ["--a", "1", "--traceback"]) == 0
    assert seen == [["--a", "1"]]  # the command never sees --traceback
    assert run_command("pairzoo.x", seen.append, ["--traceback", "maybe"]) == 2
    assert "argument --traceback: Truthy value expected" in capsys.readouterr().err


def test_progress_messages_are_bare_lines_on_stderr_while_a_command_runs():
    script = (
        "from transformers.utils import logging\n"
        "from pairzoo.console import run_command\n"
        "log = logging.get_logger('pairzoo.tool')\n"
        "log.info('hidden: no command runs')\n"
        "run_command('pairzoo.tool', lambda argv: log.info('step %d of %d', 1, 2), [])\n"
        "log.info('hidden again')\n"
        "print('result')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "step 1 of 2\n" and proc.stdout == "result\n"


@pytest.mark.parametrize(
    "tool, prog, argv, named",
    [
        (
            train_main,
            "pairzoo.train",
            ["--max_steps", "many"],
            "argument --max_steps/--max-steps: invalid int value: 'many'",
        ),
        (train_kg_main, "pairzoo.train_kg", ["--no_such_flag", "1"], "--no_such_flag"),
        (adapt_main, "pairzoo.adapt_mlm", ["--output_dir", "OUT"], "the following arguments are required: --dataset"),
        (adapt_main, "pairzoo.adapt_mlm", ["--dataset", "sick-e"], "required: --output_dir"),
        (make_zoo.main, "pairzoo.make_zoo", ["--profile", "tpu"], "argument --profile: invalid choice: 'tpu'"),
        (hub_cards_main, "pairzoo.hub_cards", ["card", "OUT"], "the following arguments are required: --results"),
        (hub_cards_main, "pairzoo.hub_cards", ["publish"], "argument command: invalid choice: 'publish'"),
        (
            lambda argv: run_command("pairzoo.demo", demo.main, argv),
            "pairzoo.demo",
            ["--epochs", "two"],
            "argument --epochs: invalid float value: 'two'",
        ),
        (
            lambda argv: run_command(expressiveness.PROG, expressiveness.main, argv),
            "pairzoo.training.expressiveness",
            ["--k", "5"],
            "the following arguments are required: --model_dir",
        ),
    ],
)
def test_every_command_line_refuses_a_bad_flag_in_one_line(tmp_path, capsys, tool, prog, argv, named):
    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    assert tool(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{prog}: error: ") and named in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def test_traceback_shows_the_exception_in_every_command_line(tmp_path):
    with pytest.raises(ValueError, match="--no_such_flag"):
        train_kg_main(["--output_dir", str(tmp_path / "out"), "--no_such_flag", "1", "--traceback"])
    with pytest.raises(ValueError, match="the following arguments are required: --dataset"):
        adapt_main(["--traceback", "--output_dir", str(tmp_path / "out")])
    assert list(tmp_path.iterdir()) == []


@dataclass
class _Flags:
    name: str = field(default="x", metadata={"help": "a string"})
    sizes: list[int] = field(default_factory=lambda: [1, 2], metadata={"help": "a list"})
    limit: int | None = field(default=None, metadata={"help": "an optional integer"})
    fast: bool = field(default=False, metadata={"help": "a store-true switch"})
    folder: Path | None = field(default=None, metadata={"positional": True, "help": "an optional positional"})

    def __post_init__(self) -> None:
        check_at_least(self, 1, "sizes", "limit")


@dataclass
class _More:
    rate: float = field(default=0.5, metadata={"help": "a number"})


def test_parse_flags_gives_the_dataclass_or_a_tuple_and_refuses_what_no_flag_takes():
    assert parse_flags(_Flags, [], "d") == _Flags()
    args = parse_flags(_Flags, ["out", "--sizes", "3", "4", "--limit", "2", "--fast", "--name", "y"], "d")
    assert args == _Flags(name="y", sizes=[3, 4], limit=2, fast=True, folder=Path("out"))
    assert parse_flags((_Flags, _More), ["--rate", "2", "--fast", "false"], "d") == (_Flags(), _More(rate=2.0))
    assert parse_flags([_More], [], "d") == (_More(),)
    assert parse_flags(_Flags, ["--traceback"], "d") == _Flags()  # listed in the help; run_command takes it out
    with pytest.raises(ValueError, match=r"^unrecognized arguments: out2 --rate 2$"):
        parse_flags(_Flags, ["out", "out2", "--rate", "2"], "d")
    with pytest.raises(ValueError, match=r"^unrecognized arguments: --no_such_flag$"):  # before the checks below
        parse_flags(_Flags, ["--limit", "0", "--no_such_flag"], "d")
    with pytest.raises(ValueError, match=r"^--limit must be an integer >= 1, got 0\.$"):
        parse_flags(_Flags, ["--limit", "0"], "d")
    with pytest.raises(ValueError, match=r"^--sizes must be integers >= 1, got 0\.$"):
        parse_flags(_Flags, ["--sizes", "2", "0"], "d")
    with pytest.raises(ValueError, match=r"argument --sizes: invalid int value: 'two'"):
        parse_flags(_Flags, ["--sizes", "two"], "d")
    with pytest.raises(ValueError, match=r"argument --limit: expected one argument"):
        parse_flags(_Flags, ["--limit"], "d")


def test_parse_flags_help_lists_every_flag_its_default_and_traceback(capsys):
    with pytest.raises(SystemExit) as raised:
        parse_flags(_Flags, ["--help"], "What the tool does.")
    out = capsys.readouterr().out
    assert raised.value.code == 0 and "What the tool does." in out
    for flag in ("folder", "--name", "--sizes", "--limit", "--fast", "--traceback", "(default: [1, 2])"):
        assert flag in out, flag


def test_json_object_flags_name_the_flag():
    assert json_object('{"a": 1}', "overrides") == {"a": 1}
    with pytest.raises(ValueError, match=r"^--overrides is not valid JSON \(Expecting"):
        json_object("{a: 1}", "overrides")
    with pytest.raises(ValueError, match=r"^--overrides must be a JSON object, got '\[1\]'\.$"):
        json_object("[1]", "overrides")


# Each benchmark script: a bad flag, and what its one error line names.
BENCHMARK_BAD_FLAGS = [
    ("architecture_matrix", ["--families", "nope"], "argument --families: invalid choice: 'nope'"),
    ("device_pack", ["--output", "OUT/pack"], "the following arguments are required: --datasets"),
    ("probe_mask", ["--batch_size", "0", "--output", "OUT/p.json"], "`--batch_size` must be an integer >= 1, got 0"),
    ("quality", ["--workers", "0", "--output_dir", "OUT"], "--workers must be an integer >= 1, got 0."),
    ("report", ["--readme", "OUT/README.md"], "give a results_dir, or --kg_dir alone"),
    ("report", ["OUT", "OUT/b"], "unrecognized arguments: "),
    ("speed", ["--lengths", "16", "0", "--output_dir", "OUT"], "--lengths must be integers >= 1, got 0."),
    ("speed", ["--output_dir", "FILE/speed"], "`--output_dir` "),
    ("speed_batch", ["--limit", "0"], "--limit must be an integer >= 1, got 0."),
    ("speed_comateformer", ["--arms", "plain"], "argument --arms: invalid choice: 'plain'"),
    ("speed_csr", ["--threads", "0"], "--threads must be an integer >= 1, got 0."),
    ("speed_neighbor_attention", ["--warmup", "-1"], "--warmup must be an integer >= 0, got -1."),
    ("speed_neighbor_attention", ["--overrides", "[1]"], "--overrides must be a JSON object"),
    ("speed_seaver", ["--seaver_overrides", "{bad"], "--seaver_overrides is not valid JSON"),
    ("speed_siamese_matcher", ["--batch_sizes", "1", "0"], "--batch_sizes must be integers >= 1, got 0."),
    ("tune", ["--workers", "0", "--output_dir", "OUT"], "--workers must be an integer >= 1, got 0."),
]


@pytest.mark.parametrize(("script", "argv", "named"), BENCHMARK_BAD_FLAGS)
def test_every_benchmark_script_refuses_a_bad_flag_in_one_line(tmp_path, capsys, script, argv, named):
    module = importlib.import_module(f"benchmarks.{script}")
    (tmp_path / "file").write_text("a file, not a folder")
    # OUT: a folder that does not exist yet; FILE: a file
    placed = {"OUT": "out", "FILE": "file"}
    parts = [a.partition("/") for a in argv]
    argv = [
        str(tmp_path / placed[head] / rest) if head in placed else head + slash + rest for head, slash, rest in parts
    ]
    assert run_command(f"{script}.py", module.main, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{script}.py: error: ") and named in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.mark.parametrize("script", sorted(dict.fromkeys(script for script, _, _ in BENCHMARK_BAD_FLAGS)))
def test_every_benchmark_script_prints_its_help(capsys, script):
    module = importlib.import_module(f"benchmarks.{script}")
    with pytest.raises(SystemExit) as raised:
        run_command(f"{script}.py", module.main, ["--help"])
    out = capsys.readouterr().out
    assert raised.value.code == 0 and out.startswith("usage: ") and "--traceback" in out

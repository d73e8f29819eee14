"""`pairzoo.console`: the parser, error line, `--traceback` and logging every pairzoo command line shares, and each
command line on a bad flag (one line naming it, exit status 2, nothing written)."""

import subprocess
import sys
from pathlib import Path

import pytest

from pairzoo import demo, make_zoo
from pairzoo.adapt_mlm import main as adapt_main
from pairzoo.console import run_command, split_console_arguments
from pairzoo.hub_cards.__main__ import main as hub_cards_main
from pairzoo.train import console_main as train_main
from pairzoo.train_kg import console_main as train_kg_main
from pairzoo.training import expressiveness

REPO = Path(__file__).resolve().parents[1]


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

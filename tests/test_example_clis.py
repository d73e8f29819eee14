"""The command lines of the examples and of the web demo (`app.py`): pairzoo's one style (`pairzoo.console`). Help
exits 0; a bad flag, a missing folder or an unwritable output is one line `<prog>: error: ...` naming it, exit status
2, before anything is written or served; every flag keeps its name and default."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pairzoo import create_model, load_tokenizer
from pairzoo.hub_cards import export_model

REPO = Path(__file__).resolve().parents[1]
# script -> (its prog in the error line, how it is run, the arguments every run needs)
SCRIPTS = {
    "examples/quickstart.py": ("examples/quickstart.py", ["examples/quickstart.py"], []),
    "examples/train_with_trainer.py": ("examples/train_with_trainer.py", ["examples/train_with_trainer.py"], []),
    "examples/seaver_heatmap.py": (
        "examples.seaver_heatmap",
        ["-m", "examples.seaver_heatmap"],
        [".", "--sentence1", "a", "--condition", "b", "--output", "x.png"],
    ),
    "app.py": ("app.py", ["app.py"], []),
}
_MODULES: "dict[str, ModuleType]" = {}


def _script(relative: str) -> ModuleType:
    """The script at `relative` (under the repository) imported as a module, once."""
    if relative not in _MODULES:
        name = "cli_under_test_" + Path(relative).stem
        spec = importlib.util.spec_from_file_location(name, REPO / relative)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _MODULES[relative] = module
    return _MODULES[relative]


def _one_error_line(capsys, prog: str) -> str:
    """The command's stderr, which must be one line `<prog>: error: ...`; nothing on stdout."""
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and err.startswith(f"{prog}: error: "), (out, err)
    return err


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_prints_usage_and_exits_0(script, capsys):
    with pytest.raises(SystemExit) as exit_info:
        _script(script).main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ") and "--help" in out


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_an_unknown_flag_is_one_line_and_exit_status_2(script):
    prog, command, needed = SCRIPTS[script]
    proc = subprocess.run(
        [sys.executable, *command, *needed, "--no_such_flag", "1"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr[-3000:]
    assert proc.stderr.startswith(f"{prog}: error: ") and "--no_such_flag" in proc.stderr


def test_quickstart_keeps_its_flags_and_refuses_bad_input_before_writing(tmp_path, capsys):
    quickstart = _script("examples/quickstart.py")
    assert quickstart.parse_args([]) == quickstart.QuickstartArguments("cross-encoder", "outputs/quickstart")
    args = quickstart.parse_args(["--model", "seaver", "--output_dir", str(tmp_path / "out")])
    assert (args.model, args.output_dir) == ("seaver", str(tmp_path / "out"))

    assert quickstart.main(["--model", "bert", "--output_dir", str(tmp_path / "out")]) == 2
    assert "argument --model: invalid choice: 'bert'" in _one_error_line(capsys, "examples/quickstart.py")
    (tmp_path / "file").write_text("")
    assert quickstart.main(["--output_dir", str(tmp_path / "file" / "out")]) == 2
    assert "`--output_dir`" in _one_error_line(capsys, "examples/quickstart.py")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_train_with_trainer_keeps_its_flags_and_refuses_an_unwritable_output_dir(tmp_path, capsys):
    example = _script("examples/train_with_trainer.py")
    assert example.parse_args([]) == example.ExampleArguments("minilm", "outputs/train_with_trainer")
    assert example.parse_args(["--backbone", "tiny-bert"]).backbone == "tiny-bert"
    (tmp_path / "file").write_text("")
    assert example.main(["--backbone", "tiny-bert", "--output_dir", str(tmp_path / "file")]) == 2
    assert "`--output_dir`" in _one_error_line(capsys, "examples/train_with_trainer.py")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


@pytest.fixture(scope="module")
def seaver_export(tmp_path_factory) -> Path:
    """A tiny random SEAVER model exported as `pairzoo.train` exports one."""
    model = create_model("seaver", backbone="tiny-bert").eval()
    return export_model(model, load_tokenizer("tiny-bert"), tmp_path_factory.mktemp("seaver") / "export")


def test_seaver_heatmap_draws_the_export_given_as_positional_argument(seaver_export, tmp_path, capsys):
    output = tmp_path / "figure.png"
    argv = [str(seaver_export), "--sentence1", "A man rides a bike.", "--sentence2", "A woman walks a dog."]
    flags = ["--condition", "The gender.", "--output", str(output)]
    assert _script("examples/seaver_heatmap.py").main([*argv, *flags]) == 0
    out, err = capsys.readouterr()
    assert out == f"{output}\n", err
    assert output.read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize(
    "case, message",
    [
        ("missing export", "export_dir: "),
        ("missing baseline", "--baseline_export: "),
        ("output is a folder", "--output: "),
        ("output under a file", "`--output`"),
        ("no condition", "the following arguments are required: --condition"),
    ],
)
def test_seaver_heatmap_bad_input_is_one_line_and_writes_nothing(case, message, seaver_export, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    flags = {"--sentence1": "a", "--condition": "b", "--output": str(tmp_path / "figure.png")}
    export = str(seaver_export)
    if case == "missing export":
        export = str(tmp_path / "no-export")
    elif case == "missing baseline":
        flags["--baseline_export"] = str(tmp_path / "no-export")
    elif case == "output is a folder":
        flags["--output"] = str(tmp_path)
    elif case == "output under a file":
        flags["--output"] = str(tmp_path / "file" / "figure.png")
    else:
        del flags["--condition"]
    argv = [export, *(item for pair in flags.items() for item in pair)]
    assert _script("examples/seaver_heatmap.py").main(argv) == 2
    assert message in _one_error_line(capsys, "examples.seaver_heatmap")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_app_flags_keep_their_defaults_and_environment(monkeypatch, tmp_path):
    app = _script("app.py")
    monkeypatch.delenv("PAIRZOO_APP_MODELS", raising=False)
    monkeypatch.delenv("GRADIO_SERVER_PORT", raising=False)
    assert app.parse_args([]) == app.AppArguments([], "minilm", "127.0.0.1", 7860)
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    monkeypatch.setenv("PAIRZOO_APP_MODELS", f"{first}{os.pathsep}{second}")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "8123")
    assert app.parse_args([]) == app.AppArguments([str(first), str(second)], "minilm", "127.0.0.1", 8123)
    args = app.parse_args(["--models", str(second), "--backbone", "tiny-bert", "--host", "0.0.0.0", "--port", "9000"])
    assert args == app.AppArguments([str(second)], "tiny-bert", "0.0.0.0", 9000)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--models", "no-such-folder"], "--models: not a folder: no-such-folder"),
        (["--port", "70000"], "--port: 70000 is not a port number"),
        (["--port", "seven"], "argument --port: invalid int value: 'seven'"),
    ],
)
def test_app_bad_flags_are_one_line_before_anything_is_served(flags, message, monkeypatch, capsys):
    app = _script("app.py")

    def serve(*args, **kwargs):
        raise AssertionError("the demo was built for bad flags")

    monkeypatch.setattr(app, "build_demo", serve)
    assert app.main(flags) == 2
    assert message in _one_error_line(capsys, "app.py")

"""The remote-code files every export carries, compared with reviewed copies under tests/golden/.

A change to a modeling, configuration, pipeline or shared module changes what exports ship; the golden copies make
that change visible in review. After an intended change, regenerate them with
`PAIRZOO_UPDATE_GOLDEN=1 pytest tests/test_codegen_golden.py` and review the diff.
"""

import ast
import importlib
import os
import sys
from pathlib import Path

import pytest

from pairzoo.hub_cards.codegen import code_files, inline_module, remote_code_files
from pairzoo.hub_cards.export import _pipeline_classes
from pairzoo.zoo import MODEL_SPECS

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("PAIRZOO_UPDATE_GOLDEN") == "1"


def _generated() -> "dict[str, str]":
    """`{relative golden path: source}` of every generated file of every family."""
    files = {}
    for spec in MODEL_SPECS:
        for name, text in remote_code_files(spec.config_class, spec.model_class, *_pipeline_classes(spec)).items():
            files[f"{spec.name}/{name}.golden"] = text
    return files


GENERATED = _generated()


@pytest.mark.parametrize("relative", sorted(GENERATED))
def test_generated_file_matches_its_reviewed_copy(relative):
    golden = GOLDEN / relative
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(GENERATED[relative])
    assert golden.is_file(), f"{golden} is missing: regenerate with PAIRZOO_UPDATE_GOLDEN=1"
    assert GENERATED[relative] == golden.read_text(), f"{relative} changed: review, then regenerate the golden copy"


def test_no_stale_golden_copies():
    stale = sorted(
        str(p.relative_to(GOLDEN)) for p in GOLDEN.rglob("*.golden") if str(p.relative_to(GOLDEN)) not in GENERATED
    )
    if UPDATE:
        for name in stale:
            (GOLDEN / name).unlink()
        stale = []
    assert not stale


@pytest.mark.parametrize("relative", sorted(GENERATED))
def test_generated_file_binds_each_imported_name_once_and_uses_it(relative):
    tree = ast.parse(GENERATED[relative])
    bound = [
        alias.asname or alias.name.split(".")[0]
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    ]
    assert len(bound) == len(set(bound)), sorted(name for name in bound if bound.count(name) > 1)
    source_names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):  # names inside string annotations such as "torch.Tensor | None"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                source_names |= {n.id for n in ast.walk(ast.parse(node.value, mode="eval")) if isinstance(n, ast.Name)}
            except SyntaxError:
                pass
    unused = [name for name in bound if name not in source_names]
    assert not unused, f"imports never used: {unused}"


def test_only_used_shared_definitions_are_inlined(tmp_path):
    package = tmp_path / "pkg"
    (package / "modeling").mkdir(parents=True)
    (package / "modeling" / "common.py").write_text(
        "import math\nimport torch\n\n\ndef used():\n    return helper()\n\n\ndef helper():\n    return math.pi\n\n\n"
        "def unused():\n    return torch.zeros(1)\n"
    )
    (package / "modeling" / "modeling_x.py").write_text(
        '"""X."""\n\nimport math\n\nfrom .common import used\n\n\ndef f():\n    return used() + math.e\n'
    )
    code = inline_module(package / "modeling" / "modeling_x.py", {})
    assert "def used" in code and "def helper" in code
    assert "def unused" not in code and "import torch" not in code
    assert code.count("import math") == 1
    namespace: dict = {}
    exec(compile(code, "modeling_x.py", "exec"), namespace)
    assert namespace["f"]() == pytest.approx(3.141592653589793 + 2.718281828459045)


def _write_package(root: Path, files: "dict[str, str]") -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_modeling_siblings_are_generated_as_their_own_files_and_the_export_runs_alone(tmp_path, monkeypatch):
    package = tmp_path / "pkg"
    _write_package(
        package,
        {
            "configuration/configuration_x.py": "class XConfig:\n    width = 3\n",
            "modeling/common.py": "def double(x):\n    return 2 * x\n\n\ndef unused():\n    return 0\n",
            "modeling/x_blocks.py": '"""Blocks."""\n\n\ndef add_one(x):\n    return x + 1\n',
            "modeling/x_host.py": (
                '"""Host."""\n\nfrom ..configuration.configuration_x import XConfig\nfrom .common import double\n'
                "from .x_blocks import add_one\n\n\ndef host(x):\n    return add_one(double(x)) * XConfig.width\n"
            ),
            "modeling/modeling_x.py": (
                '"""Model."""\n\nfrom .common import double\nfrom .x_blocks import add_one\nfrom .x_host import host\n'
                "\n\ndef model(x):\n    return double(host(x)) + add_one(0)\n"
            ),
            "pipelines/pipeline_x.py": "def pipe():\n    return 1\n",
        },
    )
    files = code_files(
        package / "configuration/configuration_x.py",
        package / "modeling/modeling_x.py",
        [package / "pipelines/pipeline_x.py"],
    )
    assert sorted(files) == [
        "configuration_x.py",
        "modeling_x.py",
        "pipeline_x.py",
        "x_blocks.py",  # imported by the model and its host, written once
        "x_host.py",
    ]
    host = files["x_host.py"]
    assert "from .configuration_x import XConfig" in host and "from .x_blocks import add_one" in host
    assert "def double" in host and "def unused" not in host  # the shared module's used part, inlined
    assert "def host" not in files["modeling_x.py"] and "from .x_host import host" in files["modeling_x.py"]
    export = tmp_path / "exported"
    _write_package(export, {"__init__.py": "", **files})
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert importlib.import_module("exported.modeling_x").model(5) == 2 * ((2 * 5 + 1) * 3) + 1
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "exported"]:
            del sys.modules[name]


def test_two_source_files_exported_under_one_name_are_refused(tmp_path):
    package = tmp_path / "pkg"
    _write_package(
        package,
        {
            "configuration/configuration_x.py": "class XConfig:\n    pass\n",
            "modeling/helpers.py": "def a():\n    return 1\n",
            "modeling/modeling_x.py": "from .helpers import a\n\n\ndef model():\n    return a()\n",
            "pipelines/helpers.py": "def b():\n    return 2\n",
            "pipelines/pipeline_x.py": "from .helpers import b\n\n\ndef pipe():\n    return b()\n",
        },
    )
    with pytest.raises(ValueError, match=r"pipelines/helpers\.py and .*modeling/helpers\.py would both be exported"):
        code_files(
            package / "configuration/configuration_x.py",
            package / "modeling/modeling_x.py",
            [package / "pipelines/pipeline_x.py"],
        )

"""benchmarks/device_pack.py: the folder a lent GPU call carries (float16 MiniLM, the named data sets' files as
data.tar.xz, wheels, run.sh), on a tiny BERT and a tiny fake data folder, without the wheel download;
`$PAIRZOO_MINILM_DIR`; and `--backbone_chunks mpnet-base`'s parts and their assemble.sh, on a tiny MPNet."""

import email.message
import importlib.metadata
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import AutoModel, AutoTokenizer, BertModel, MPNetModel

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import device_pack  # noqa: E402

from pairzoo import create_model  # noqa: E402
from pairzoo.backbones import (  # noqa: E402
    MINILM_DIR_ENV,
    MPNET_DIR_ENV,
    load_tokenizer,
    minilm_path,
    resolve_backbone,
    tiny_backbone_config,
)
from pairzoo.console import run_command  # noqa: E402
from pairzoo.training.data import load_dataset, load_kg_entities  # noqa: E402

SICK_HEADER = (
    "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tentailment_AB\tentailment_BA\t"
    "sentence_A_original\tsentence_B_original\tsentence_A_dataset\tsentence_B_dataset\tSemEval_set"
)
FP16_RTOL = 2.0**-11  # float16 keeps 11 significant bits: round to nearest is off by at most half a unit
FP16_ATOL = 2.0**-25  # half of float16's smallest subnormal step, for values below its normal range


def _sick_row(n: int, label: str, split: str) -> str:
    fields = [str(n), f"A man plays {n}.", f"A person plays {n}.", label, "3.5", "x", "y", "a", "b", "c", "d", split]
    return "\t".join(fields)


def make_data_folder(root: Path) -> Path:
    """A tiny data folder: SICK, e-SNLI dev, WN18RR without test.tsv, and an MRPC file no packed data set reads."""
    (root / "SICK").mkdir(parents=True)
    rows = [
        _sick_row(i, label, split)
        for i, (label, split) in enumerate(
            [("NEUTRAL", "TRAIN"), ("ENTAILMENT", "TRAIN"), ("CONTRADICTION", "TRIAL"), ("NEUTRAL", "TEST")], start=1
        )
    ]
    (root / "SICK" / "SICK.txt").write_text("\n".join([SICK_HEADER, *rows]) + "\n")
    snli = root / "e-SNLI"
    snli.mkdir()
    (snli / "labels.dev").write_text("neutral\nentailment\n")
    for stem in ("s1", "s2", "preproc1_expl_1", "preproc1_expl_2", "preproc1_expl_3"):
        (snli / f"{stem}.dev").write_text(f"{stem} one .\n{stem} two .\n")
    (snli / "LICENSE").write_text("not read by the loader\n")
    kg = root / "WN18RR"
    kg.mkdir()
    (kg / "entity2text.txt").write_text("01\tdog, an animal\n02\tcat, an animal\n03\tpet, a kept animal\n")
    (kg / "relation2text.txt").write_text("_hypernym\thypernym\n")
    (kg / "train.tsv").write_text("01\t_hypernym\t03\n02\t_hypernym\t03\n")
    (kg / "dev.tsv").write_text("01\t_hypernym\t03\n")
    (root / "MRPC").mkdir()
    (root / "MRPC" / "train.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
    return root


def make_tiny_minilm(folder: Path) -> Path:
    """A tiny random BERT saved like the bundled MiniLM: float32 safetensors, a config without `dtype` (the real one
    predates it), tokenizer files and a sentence-transformers sub-folder."""
    torch.manual_seed(0)
    model = BertModel(tiny_backbone_config("tiny-bert"))
    with torch.no_grad():  # values across float16's range: large, ordinary, and below its normal range
        model.embeddings.word_embeddings.weight[0, :4] = torch.tensor([1234.5, -0.3333, 1e-6, -3e-7])
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("dtype", None)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}\n')
    (folder / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    return folder


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> "tuple[Path, Path]":
    root = tmp_path_factory.mktemp("sources")
    return make_data_folder(root / "data"), make_tiny_minilm(root / "minilm")


@pytest.fixture(scope="module")
def built(sources, tmp_path_factory) -> "tuple[Path, dict, list[str]]":
    """The pack of sick-e, snli and wn18rr, the sizes `build_pack` returned and the lines it printed."""
    data, minilm = sources
    output, lines = tmp_path_factory.mktemp("out") / ".devpack", []
    sizes = device_pack.build_pack(
        output, ["sick-e", "snli", "wn18rr"], data_dir=data, minilm_dir=minilm, wheels=False, log=lines.append
    )
    return output, sizes, lines


@pytest.fixture(scope="module")
def pack(built) -> Path:
    return built[0]


def _pack_args(sources, output) -> list[str]:
    data, minilm = sources
    return ["--output", str(output), "--data_dir", str(data), "--minilm_dir", str(minilm), "--no_wheels"]


# what the `pack` fixture's data sets read of make_data_folder's files (WN18RR without its held-out test.tsv)
ESNLI_FILES = [f"e-SNLI/{stem}.dev" for stem in ("labels", "s1", "s2", *(f"preproc1_expl_{i}" for i in (1, 2, 3)))]
WN18RR_FILES = [f"WN18RR/{name}" for name in ("entity2text.txt", "relation2text.txt", "train.tsv", "dev.tsv")]
PACKED_DATA_FILES = sorted(["SICK/SICK.txt", *ESNLI_FILES, *WN18RR_FILES])


def _archive_members(pack: Path) -> "dict[str, tarfile.TarInfo]":
    with tarfile.open(pack / "data.tar.xz") as archive:
        return {member.name: member for member in archive.getmembers()}


def _files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def _copy_of(pack: Path, where: Path) -> Path:
    """A copy of the (module-wide) pack, for tests that run run.sh, which extracts the data beside itself."""
    return Path(shutil.copytree(pack, where / ".devpack", symlinks=True))


def _clean_env(mpnet: "Path | str" = "/nonexistent/mpnet") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAIRZOO_", "HF_", "DEVPACK_"))}
    env.update(PYTHON=sys.executable, OMP_NUM_THREADS="1", DEVPACK_MPNET=str(mpnet))
    return env


# --------------------------------------------------------------------------------------------- $PAIRZOO_MINILM_DIR


def test_minilm_dir_variable_points_minilm_at_another_folder(monkeypatch, tmp_path):
    monkeypatch.delenv(MINILM_DIR_ENV, raising=False)
    bundled = minilm_path()
    assert (Path(bundled) / "model.safetensors").is_file()
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setenv(MINILM_DIR_ENV, str(tmp_path))
    assert minilm_path() == str(tmp_path)
    assert resolve_backbone("minilm") == str(tmp_path)
    monkeypatch.setenv(MINILM_DIR_ENV, str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match=r"PAIRZOO_MINILM_DIR.*nowhere.*config\.json"):
        minilm_path()
    monkeypatch.setenv(MINILM_DIR_ENV, "")  # empty: as unset
    assert minilm_path() == bundled


# --------------------------------------------------------------------------------------------- the pack


def test_pack_holds_the_named_data_sets_files_as_one_xz_archive(pack, sources):
    data, _ = sources
    assert _listing(pack) == ["data.tar.xz", "minilm", "pack.json", "run.sh", "wheels"]  # no data/ folder
    members = _archive_members(pack)
    files = sorted(name.removeprefix("data/") for name, member in members.items() if member.isfile())
    assert files == PACKED_DATA_FILES  # only what the named data sets read: no LICENSE, no MRPC, no test.tsv
    assert all(member.isfile() or member.isdir() for member in members.values())
    assert all(name == "data" or name.startswith("data/") for name in members)
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members.values()} == {(0, 0, "", "")}
    with tarfile.open(pack / "data.tar.xz") as archive:
        assert archive.extractfile("data/SICK/SICK.txt").read() == (data / "SICK" / "SICK.txt").read_bytes()

    minilm = _files_under(pack / "minilm")
    assert "model.safetensors" in minilm and "1_Pooling/config.json" in minilm and "tokenizer.json" in minilm
    assert ".gitattributes" not in minilm
    assert list((pack / "wheels").iterdir()) == []  # --no_wheels
    summary = json.loads((pack / "pack.json").read_text())
    assert summary["datasets"] == ["sick-e", "snli", "wn18rr"] and summary["wheels"] == {}
    assert sorted(summary["data_files"]) == PACKED_DATA_FILES
    # sizes as they travel (the data compressed), and the data's uncompressed size beside them
    assert set(summary["sizes"]) == {"minilm", "data.tar.xz", "wheels", "run.sh"}
    assert summary["sizes"]["data.tar.xz"] == (pack / "data.tar.xz").stat().st_size
    assert summary["data_bytes_uncompressed"] == sum(m.size for m in members.values() if m.isfile())
    assert summary["data_bytes_uncompressed"] == sum((data / rel).stat().st_size for rel in PACKED_DATA_FILES)


def test_sizes_are_printed_with_the_data_compressed_and_uncompressed(built, sources):
    pack, sizes, lines = built
    archive = (pack / "data.tar.xz").stat().st_size
    assert sizes["data.tar.xz"] == archive and "data" not in sizes
    assert sizes["pack"] == sum(sizes[part] for part in ("minilm", "data.tar.xz", "wheels", "run.sh", "pack.json"))
    assert sizes["total"] == sizes["pack"] + sizes["working_tree"]
    uncompressed = sum((sources[0] / rel).stat().st_size for rel in PACKED_DATA_FILES)
    assert sizes["data_uncompressed"] == uncompressed
    (line,) = [line for line in lines if line.startswith("data.tar.xz ")]
    assert f"({archive:,} bytes; data/ uncompressed " in line and f"{uncompressed:,} bytes)" in line
    assert any(line.startswith("wn18rr: not in the data folder") and "WN18RR/test.tsv" in line for line in lines)


def test_float16_round_trip_loads_float32_close_to_the_original(pack, sources, monkeypatch):
    _, source = sources
    with safe_open(str(pack / "minilm" / "model.safetensors"), framework="pt") as handle:
        stored = {key: handle.get_tensor(key).dtype for key in handle.keys()}
    original = load_file(source / "model.safetensors")
    assert {key: dtype for key, dtype in stored.items() if original[key].dtype == torch.float32} == {
        key: torch.float16 for key, tensor in original.items() if tensor.dtype == torch.float32
    }
    assert json.loads((pack / "minilm" / "config.json").read_text())["dtype"] == "float32"

    reference = AutoModel.from_pretrained(source)
    loaded = AutoModel.from_pretrained(pack / "minilm")
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    for (name, expected), (_, actual) in zip(reference.state_dict().items(), loaded.state_dict().items()):
        assert actual.dtype == expected.dtype, name
        torch.testing.assert_close(actual, expected, rtol=FP16_RTOL, atol=FP16_ATOL, msg=name)
    assert not torch.equal(loaded.embeddings.word_embeddings.weight, reference.embeddings.word_embeddings.weight)

    # what pairzoo builds on `minilm` once the variable points at the pack (as run.sh sets it)
    monkeypatch.setenv(MINILM_DIR_ENV, str(pack / "minilm"))
    model = create_model("cross-encoder", backbone="minilm")
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    torch.testing.assert_close(
        model.backbone.embeddings.word_embeddings.weight,
        reference.embeddings.word_embeddings.weight,
        rtol=FP16_RTOL,
        atol=FP16_ATOL,
    )


def test_float16_conversion_refuses_values_it_cannot_hold(tmp_path):
    from safetensors.torch import save_file

    save_file({"ok": torch.ones(2), "huge": torch.tensor([1.0, 7e4])}, str(tmp_path / "in.safetensors"))
    with pytest.raises(device_pack.PackError, match="'huge'"):
        device_pack.convert_to_float16(tmp_path / "in.safetensors", tmp_path / "out.safetensors")


def test_run_sh_extracts_the_data_exports_the_pack_and_runs_the_command(pack, sources, tmp_path):
    pack = _copy_of(pack, tmp_path)
    env = _clean_env()
    assert not (pack / "data").exists()
    names = ("PAIRZOO_DATA_DIR", "PAIRZOO_MINILM_DIR", "HF_HOME", "HF_HUB_OFFLINE")
    show = f"import os; print('|'.join(os.environ[k] for k in {names!r}))"
    proc = subprocess.run(
        ["bash", str(pack / "run.sh"), sys.executable, "-c", show], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("devpack: torch ") and "transformers " in lines[0] and "datasets " in lines[0]
    assert lines[1] == f"devpack: minilm {pack / 'minilm'}, data {pack / 'data'}, mpnet not assembled"
    assert lines[2] == f"{pack / 'data'}|{pack / 'minilm'}|{REPO / '.hf_home'}|1"

    # the archive came out as data/ beside it, the named data sets' files as they are in the data folder, and loads
    data = pack / "data"
    assert _files_under(data) == PACKED_DATA_FILES
    assert all((data / rel).read_bytes() == (sources[0] / rel).read_bytes() for rel in PACKED_DATA_FILES)
    assert sorted(p.name for p in pack.iterdir()) == ["data", "data.tar.xz", "minilm", "pack.json", "run.sh", "wheels"]
    sick = load_dataset("sick-e", data_dir=data)
    assert {name: len(split) for name, split in sick.items()} == {"train": 2, "validation": 1, "test": 1}
    snli = load_dataset("snli", data_dir=data)
    assert snli["validation"]["explanation_3"] == ["preproc1_expl_3 one .", "preproc1_expl_3 two ."]
    assert len(load_dataset("wn18rr", data_dir=data)["train"]) == 2
    assert len(load_kg_entities(data)) == 3

    # an existing data/ is used as it is, not extracted again
    (data / "SICK" / "SICK.txt").write_text("edited\n")
    again = subprocess.run(["bash", str(pack / "run.sh"), "true"], cwd=REPO, env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert (data / "SICK" / "SICK.txt").read_text() == "edited\n"

    usage = subprocess.run(["bash", str(pack / "run.sh")], cwd=REPO, env=env, capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr
    # sourced: the environment stays in the calling shell (the WN18RR loop's form); a failed check returns non-zero
    script = f"source {pack / 'run.sh'} && echo $PAIRZOO_MINILM_DIR && source {pack / 'run.sh'} || echo failed $?"
    sourced = subprocess.run(
        ["bash", "-c", script], cwd=REPO, env={**env, "PYTHON": "false"}, capture_output=True, text=True
    )
    assert sourced.stdout.splitlines() == ["failed 1"] and "environment check failed" in sourced.stderr
    sourced = subprocess.run(
        ["bash", "-c", f"source {pack / 'run.sh'} && echo $PAIRZOO_MINILM_DIR"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
    )
    assert sourced.returncode == 0 and sourced.stdout.splitlines()[-1] == str(pack / "minilm")


def test_sourced_run_sh_extracts_the_data_before_the_environment_check(pack, tmp_path):
    pack = _copy_of(pack, tmp_path)
    script = f"source {pack / 'run.sh'} && echo $PAIRZOO_DATA_DIR"
    sourced = subprocess.run(["bash", "-c", script], cwd=REPO, env=_clean_env(), capture_output=True, text=True)
    assert sourced.returncode == 0, sourced.stderr
    assert sourced.stdout.splitlines()[-1] == str(pack / "data")
    assert _files_under(pack / "data") == PACKED_DATA_FILES


def test_run_sh_refuses_to_run_when_the_archive_does_not_extract(pack, tmp_path):
    pack = _copy_of(pack, tmp_path)
    (pack / "data.tar.xz").write_bytes(b"not an xz archive")
    marker = tmp_path / "ran"
    proc = subprocess.run(
        ["bash", str(pack / "run.sh"), "touch", str(marker)],
        cwd=REPO,
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "could not extract" in proc.stderr and "nothing was run" in proc.stderr
    assert not marker.exists()
    assert sorted(p.name for p in pack.iterdir()) == ["data.tar.xz", "minilm", "pack.json", "run.sh", "wheels"]


# --------------------------------------------------------------------------------------------- refusals


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_size_limit_fires_naming_the_sizes_and_leaves_nothing(sources, tmp_path, monkeypatch):
    monkeypatch.setattr(device_pack, "TRANSFER_LIMIT_BYTES", 200_000)
    with pytest.raises(device_pack.PackError) as raised:
        device_pack.main(["--datasets", "sick-e", *_pack_args(sources, tmp_path / "pack")])
    message = str(raised.value)
    assert "exceeds the 0.2 MiB" in message and "minilm " in message and "working tree " in message
    assert _listing(tmp_path) == []


def test_bad_input_names_it_and_leaves_nothing(sources, tmp_path, capsys):
    with pytest.raises(device_pack.PackError, match="unknown data set 'sick-x'"):
        device_pack.main(["--datasets", "sick-e", "sick-x", *_pack_args(sources, tmp_path / "pack")])
    # the command line: one line naming it, exit status 2
    argv = ["--datasets", "sick-x", *_pack_args(sources, tmp_path / "pack")]
    assert run_command("device_pack.py", device_pack.main, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("device_pack.py: error: unknown data set 'sick-x'") and err.count("\n") == 1
    # csts reads its own CSVs, not the data folder
    with pytest.raises(device_pack.PackError, match="unknown data set 'csts'"):
        device_pack.main(["--datasets", "csts", *_pack_args(sources, tmp_path / "pack")])
    with pytest.raises(device_pack.PackError, match="'stsb': none of its files"):  # not in the (fake) data folder
        device_pack.main(["--datasets", "stsb", *_pack_args(sources, tmp_path / "pack")])
    assert _listing(tmp_path) == []

    existing = tmp_path / "pack"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    with pytest.raises(device_pack.PackError, match=re.escape(f"output '{existing}' exists; pass --overwrite")):
        device_pack.main(["--datasets", "sick-e", *_pack_args(sources, existing)])
    assert _listing(tmp_path) == ["pack"] and _listing(existing) == ["keep.txt"]


def test_overwrite_replaces_the_pack_and_leaves_no_temporary_folder(sources, tmp_path, capsys):
    output = tmp_path / "pack"
    device_pack.main(["--datasets", "snli", *_pack_args(sources, output)])
    device_pack.main(["--datasets", "synthetic", "--overwrite", *_pack_args(sources, output)])
    assert _listing(tmp_path) == ["pack"]
    assert list(_archive_members(output)) == ["data"]  # synthetic reads no file: the archive holds an empty data/
    assert json.loads((output / "pack.json").read_text())["datasets"] == ["synthetic"]
    assert "total" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------- wheel requirements


def _fake_wheel(folder: Path, name: str, version: str, requires: "list[str]") -> Path:
    meta = email.message.Message()
    meta["Metadata-Version"], meta["Name"], meta["Version"] = "2.1", name, version
    for line in requires:
        meta["Requires-Dist"] = line
    wheel = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA", meta.as_string())
    return wheel


def test_the_packed_wheels_requirements_are_met_by_the_pack_or_the_device(tmp_path):
    """The installed packages' own metadata (what `pip download` fetches at the same versions) closes over the pack
    and the device's package list."""
    wheels = []
    for name in device_pack.WHEEL_PACKAGES:
        dist = importlib.metadata.distribution(name)
        wheels.append(_fake_wheel(tmp_path, name, dist.version, dist.requires or []))
    device_pack.check_wheel_requirements(wheels)


def test_a_requirement_the_device_lacks_or_excludes_is_refused(tmp_path):
    ok = _fake_wheel(tmp_path, "alpha", "1.0", ['importlib-metadata; python_version < "3.8"', "tox; extra == 'dev'"])
    device_pack.check_wheel_requirements([ok])
    missing = _fake_wheel(tmp_path, "beta", "1.0", ["left-pad>=1"])
    with pytest.raises(device_pack.PackError, match="beta needs 'left-pad>=1'"):
        device_pack.check_wheel_requirements([missing])
    too_new = _fake_wheel(tmp_path, "gamma", "1.0", ["huggingface_hub>=2"])
    with pytest.raises(device_pack.PackError, match="huggingface-hub 1.33.0 is on the device"):
        device_pack.check_wheel_requirements([too_new])
    needs_packed = _fake_wheel(tmp_path, "delta", "1.0", ["alpha>=2"])
    with pytest.raises(device_pack.PackError, match="alpha 1.0 is packed"):
        device_pack.check_wheel_requirements([ok, needs_packed])


def test_run_sh_extracts_the_packed_packages_ahead_of_the_devices_own(pack, tmp_path):
    pack = _copy_of(pack, tmp_path)
    wheel = _fake_wheel(tmp_path, "devpack_probe", "1.0", [])
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.writestr("devpack_probe.py", "VALUE = 42\n")
    device_pack.write_site_archive([wheel], pack / "wheels" / device_pack.SITE_ARCHIVE)
    site = tmp_path / "site"
    site.mkdir()
    (site / "stale.py").write_text("")  # an earlier extraction is replaced, not merged
    probe = "import devpack_probe; print(devpack_probe.__file__, devpack_probe.VALUE)"
    proc = subprocess.run(
        ["bash", str(pack / "run.sh"), sys.executable, "-c", probe],
        cwd=REPO,
        env={**_clean_env(), "DEVPACK_SITE": str(site)},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == f"{site / 'devpack_probe.py'} 42"
    assert sorted(p.name for p in site.iterdir()) == ["devpack_probe-1.0.dist-info", "devpack_probe.py"]


# --------------------------------------------------------------------------------------------- mpnet-base in parts


def make_tiny_mpnet(folder: Path) -> Path:
    """A tiny random MPNet saved like all-mpnet-base-v2: float32 safetensors, a config without `dtype`, its
    tokenizer and a sentence-transformers sub-folder."""
    torch.manual_seed(1)
    model = MPNetModel(tiny_backbone_config("tiny-mpnet"))
    with torch.no_grad():  # values across float16's range, as in make_tiny_minilm
        model.embeddings.word_embeddings.weight[0, :4] = torch.tensor([1234.5, -0.3333, 1e-6, -3e-7])
    model.save_pretrained(folder)
    load_tokenizer("tiny-mpnet").save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config.pop("dtype", None)
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text('{"pooling_mode_mean_tokens": true}\n')
    return folder


@pytest.fixture(scope="module")
def tiny_mpnet(tmp_path_factory) -> Path:
    return make_tiny_mpnet(tmp_path_factory.mktemp("mpnet") / "all-mpnet-base-v2")


PART_ROOM = 1_000_000  # what a call carrying one part has left in the tests below: the tiny MPNet takes 3 parts


def _limit_leaving(room: int) -> int:
    """A TRANSFER_LIMIT_BYTES that leaves `room` bytes to a part beside the working tree as it is now."""
    return device_pack.working_tree_bytes(REPO) + device_pack.CHUNK_MARGIN_BYTES + room


@pytest.fixture(scope="module")
def chunked(sources, tiny_mpnet, tmp_path_factory) -> "tuple[Path, Path, dict, list[str], int]":
    """The pack of sick-e without MiniLM and the tiny MPNet in parts, built under a call limit that leaves about
    PART_ROOM bytes to a part: (pack, parts folder, what `build_pack` returned, its lines, the limit)."""
    output, lines = tmp_path_factory.mktemp("chunked") / ".devpack", []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(device_pack, "TRANSFER_LIMIT_BYTES", _limit_leaving(PART_ROOM))
        sizes = device_pack.build_pack(
            output,
            ["sick-e"],
            data_dir=sources[0],
            wheels=False,
            log=lines.append,
            minilm=False,
            backbone_chunks="mpnet-base",
            backbone_dir=tiny_mpnet,
        )
        return output, output.parent / ".devpack-mpnet", sizes, lines, device_pack.TRANSFER_LIMIT_BYTES


def _assemble(parts: Path, number: int, target: Path) -> subprocess.CompletedProcess:
    """Part `number`'s assemble.sh, run as on the device (from the repository root), into `target`."""
    script = parts / f"part-{number}" / "assemble.sh"
    return subprocess.run(["bash", str(script)], cwd=REPO, env=_clean_env(target), capture_output=True, text=True)


def test_backbone_parts_each_fit_one_call_beside_the_working_tree(chunked, tiny_mpnet):
    pack, parts, sizes, lines, limit = chunked
    room = limit - sizes["working_tree"] - device_pack.CHUNK_MARGIN_BYTES
    count = len(sizes["parts"])
    assert count >= 3
    assert _listing(parts) == sorted(["pack.json", *(f"part-{k}" for k in range(1, count + 1))])
    joined = b""
    for k in range(1, count + 1):
        folder = parts / f"part-{k}"
        assert _listing(folder) == ["assemble.sh", f"part-{k}.bin"]
        chunk = (folder / f"part-{k}.bin").read_bytes()
        if k < count:  # full parts, the last one the rest
            assert len(chunk) == room - device_pack.PART_SCRIPT_RESERVE
        else:
            assert 0 < len(chunk) <= room - device_pack.PART_SCRIPT_RESERVE
        assert sizes["parts"][k - 1] == device_pack.folder_bytes(folder) <= room
        joined += chunk
    with tarfile.open(fileobj=io.BytesIO(joined)) as archive:  # the parts joined: a tar of the float16 folder
        members = sorted(m.name for m in archive.getmembers() if m.isfile())
    assert members == [f"model/{rel}" for rel in _files_under(tiny_mpnet)]
    assert _listing(pack) == ["data.tar.xz", "pack.json", "run.sh", "wheels"]  # no minilm/
    assert json.loads((pack / "pack.json").read_text())["minilm_source"] is None

    # one call a part; the last also carries the (small) pack and runs the benchmark
    calls = sizes["calls"]
    assert [call["carry"] for call in calls] == [
        *([str(parts / f"part-{k}")] for k in range(1, count)),
        [str(pack), str(parts / f"part-{count}")],
    ]
    assert [call["command"] for call in calls[:-1]] == [f"bash {parts}/part-{k}/assemble.sh" for k in range(1, count)]
    assert calls[-1]["command"] == (
        f"bash {parts}/part-{count}/assemble.sh && bash {pack}/run.sh {device_pack.BENCHMARK_COMMAND}"
    )
    assert all(call["bytes"] + device_pack.CHUNK_MARGIN_BYTES <= limit for call in calls)
    assert calls[-1]["bytes"] == sizes["working_tree"] + sizes["parts"][-1] + sizes["pack"]
    assert json.loads((parts / "pack.json").read_text())["calls"] == calls
    for k in range(1, count + 1):  # each script's usage line is its call's command, not the folder it was built in
        usage = (parts / f"part-{k}" / "assemble.sh").read_text().splitlines()[4]
        assert usage == f"#   {calls[k - 1]['command'].split(' && ')[0]}"
    for number, call in enumerate(calls, start=1):  # printed at the end, in order
        at = lines.index(
            f"call {number}: carry {json.dumps(call['carry'])} ({device_pack._fmt(call['bytes'])} with "
            "the working tree)"
        )
        assert lines[at + 1] == f"  {call['command']}"
    assert lines[-1] == f"  {calls[-1]['command']}"


def test_a_pack_too_large_to_ride_with_the_last_part_gets_a_call_of_its_own():
    mib = device_pack.MIB
    alongside = device_pack.device_calls(".devpack", ["p/part-1", "p/part-2"], [55 * mib, 44 * mib], 10 * mib, 5 * mib)
    assert [call["carry"] for call in alongside] == [["p/part-1"], [".devpack", "p/part-2"]]
    assert alongside[-1]["bytes"] == 59 * mib
    alone = device_pack.device_calls(".devpack", ["p/part-1", "p/part-2"], [55 * mib, 44 * mib], 12 * mib, 5 * mib)
    assert [call["carry"] for call in alone] == [["p/part-1"], ["p/part-2"], [".devpack"]]
    assert alone[-1] == {
        "carry": [".devpack"],
        "command": f"bash .devpack/run.sh {device_pack.BENCHMARK_COMMAND}",
        "bytes": 17 * mib,
    }
    assert alone[1]["command"] == "bash p/part-2/assemble.sh"


def test_the_parts_assemble_in_order_into_the_float16_backbone(chunked, tiny_mpnet, tmp_path, monkeypatch):
    pack, parts, sizes, _, _ = chunked
    count = len(sizes["parts"])
    target = tmp_path / "mpnet"
    for k in [1, 2, 2, *range(3, count)]:  # part 2's step twice
        proc = _assemble(parts, k, target)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"assemble.sh: part {k} of {count} staged in {tmp_path / 'mpnet.parts'}")
        assert not target.exists()
    assert sorted((tmp_path / "mpnet.parts").iterdir()) == [
        tmp_path / "mpnet.parts" / f"part-{k}.bin" for k in range(1, count)
    ]
    last = _assemble(parts, count, target)
    assert last.returncode == 0, last.stderr
    assert last.stdout.startswith(f"assemble.sh: mpnet-base assembled in {target}")
    assert _listing(tmp_path) == ["mpnet"]  # the staged parts and the unpacking folder are gone
    assert _files_under(target) == sorted([".devpack-id", *_files_under(tiny_mpnet)])
    assert json.loads((target / "config.json").read_text())["dtype"] == "float32"

    reference = AutoModel.from_pretrained(tiny_mpnet)
    loaded = AutoModel.from_pretrained(target)
    assert {p.dtype for p in loaded.parameters()} == {torch.float32}
    for (name, expected), (_, actual) in zip(reference.state_dict().items(), loaded.state_dict().items()):
        torch.testing.assert_close(actual, expected, rtol=FP16_RTOL, atol=FP16_ATOL, msg=name)
    assert not torch.equal(loaded.embeddings.word_embeddings.weight, reference.embeddings.word_embeddings.weight)
    monkeypatch.setenv(MPNET_DIR_ENV, str(target))
    model = create_model("cross-encoder", backbone="mpnet-base")
    torch.testing.assert_close(
        model.backbone.embeddings.word_embeddings.weight,
        reference.embeddings.word_embeddings.weight,
        rtol=FP16_RTOL,
        atol=FP16_ATOL,
    )

    # once assembled, any step again does nothing
    for k in (1, count):
        again = _assemble(parts, k, target)
        assert again.returncode == 0 and again.stdout.startswith(f"assemble.sh: {target} already holds mpnet-base")
    assert _listing(tmp_path) == ["mpnet"]

    # run.sh points the backbone name mpnet-base at the assembled folder (and MiniLM is not in this pack)
    copy = tmp_path / "copy"
    copy.mkdir()
    show = "from pairzoo.backbones import resolve_backbone; print(resolve_backbone('mpnet-base'))"
    proc = subprocess.run(
        ["bash", str(_copy_of(pack, copy) / "run.sh"), sys.executable, "-c", show],
        cwd=REPO,
        env=_clean_env(target),
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1] == f"devpack: minilm not in the pack, data {copy / '.devpack' / 'data'}, mpnet {target}"
    assert lines[2] == str(target)


def test_a_missing_or_damaged_part_stops_the_last_step_and_leaves_the_target_alone(chunked, tmp_path):
    _, parts, sizes, _, _ = chunked
    count = len(sizes["parts"])
    target, staging = tmp_path / "mpnet", tmp_path / "mpnet.parts"
    target.mkdir()
    (target / "config.json").write_text("{}")  # an older folder: it stays until a complete one replaces it
    for k in [1, *range(3, count)]:
        assert _assemble(parts, k, target).returncode == 0
    last = _assemble(parts, count, target)
    assert last.returncode == 1
    assert f"part(s) 2 of {count} are not in {staging}" in last.stderr and "nothing was assembled" in last.stderr
    assert _listing(tmp_path) == ["mpnet", "mpnet.parts"] and _listing(target) == ["config.json"]

    (staging / "part-1.bin").write_bytes(b"not part 1")  # a staged part damaged (or from another pack)
    assert _assemble(parts, 2, target).returncode == 0
    last = _assemble(parts, count, target)
    assert last.returncode == 1
    assert f"{staging / 'part-1.bin'} is not part 1 of this pack" in last.stderr
    assert _listing(tmp_path) == ["mpnet", "mpnet.parts"] and (target / "config.json").read_text() == "{}"

    assert _assemble(parts, 1, target).returncode == 0  # part 1's step again mends it
    last = _assemble(parts, count, target)
    assert last.returncode == 0, last.stderr
    assert _listing(tmp_path) == ["mpnet"] and (target / ".devpack-id").is_file()
    assert json.loads((target / "config.json").read_text())["model_type"] == "mpnet"


def test_a_damaged_part_is_refused_by_its_own_step(chunked, tmp_path):
    _, parts, _, _, _ = chunked
    part = Path(shutil.copytree(parts / "part-1", tmp_path / "carried" / "part-1"))
    data = bytearray((part / "part-1.bin").read_bytes())
    data[-1] ^= 0xFF
    (part / "part-1.bin").write_bytes(bytes(data))
    target = tmp_path / "mpnet"
    proc = subprocess.run(
        ["bash", str(part / "assemble.sh")], cwd=REPO, env=_clean_env(target), capture_output=True, text=True
    )
    assert proc.returncode == 1 and f"{part / 'part-1.bin'} is damaged" in proc.stderr
    assert _listing(tmp_path / "mpnet.parts") == [] and not target.exists()  # nothing staged, no half copy


def test_backbone_chunks_refusals_name_the_flag_and_leave_nothing(sources, tiny_mpnet, tmp_path, monkeypatch, capsys):
    output = tmp_path / ".devpack"
    args = ["--datasets", "sick-e", "--output", str(output), "--data_dir", str(sources[0]), "--no_wheels"]
    chunks = ["--no_minilm", "--backbone_chunks", "mpnet-base", "--backbone_dir", str(tiny_mpnet)]
    with pytest.raises(device_pack.PackError, match="--backbone_chunks 'roberta-base': only 'mpnet-base'"):
        device_pack.main([*args, "--backbone_chunks", "roberta-base"])
    with pytest.raises(device_pack.PackError, match="--backbone_dir names the folder of --backbone_chunks"):
        device_pack.main([*args, "--backbone_dir", str(tiny_mpnet)])
    with pytest.raises(device_pack.PackError, match="--minilm_dir names the MiniLM folder, which --no_minilm"):
        device_pack.main([*args, "--no_minilm", "--minilm_dir", str(sources[1])])
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    with pytest.raises(
        device_pack.PackError, match=re.escape(f"mpnet-base folder '{empty}' has no model.safetensors")
    ):
        device_pack.main([*args, *chunks[:-1], str(empty)])
    with monkeypatch.context() as patch:  # a working tree that leaves a call no room for a part
        patch.setattr(device_pack, "TRANSFER_LIMIT_BYTES", device_pack.MIB)
        with pytest.raises(device_pack.PackError, match=r"working tree .* MiB \+ margin 4.0 MiB leave no room"):
            device_pack.main([*args, *chunks])
    assert _listing(tmp_path) == ["empty"]

    (tmp_path / ".devpack-mpnet").mkdir()
    (tmp_path / ".devpack-mpnet" / "keep.txt").write_text("mine")
    with pytest.raises(device_pack.PackError, match=re.escape(f"output '{tmp_path / '.devpack-mpnet'}' exists")):
        device_pack.main([*args, *chunks])
    assert _listing(tmp_path) == [".devpack-mpnet", "empty"] and _listing(tmp_path / ".devpack-mpnet") == ["keep.txt"]

    assert run_command("device_pack.py", device_pack.main, [*args, "--backbone_chunks", "bert"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("device_pack.py: error: --backbone_chunks 'bert'") and err.count("\n") == 1


def test_overwrite_replaces_both_folders_and_a_failure_keeps_the_old_ones(sources, tiny_mpnet, tmp_path, monkeypatch):
    from safetensors.torch import save_file

    monkeypatch.setattr(device_pack, "TRANSFER_LIMIT_BYTES", _limit_leaving(PART_ROOM))
    output = tmp_path / ".devpack"
    args = ["--datasets", "sick-e", "--output", str(output), "--data_dir", str(sources[0]), "--no_wheels"]
    device_pack.main([*args, "--no_minilm", "--backbone_chunks", "mpnet-base", "--backbone_dir", str(tiny_mpnet)])
    recorded = (tmp_path / ".devpack-mpnet" / "pack.json").read_text()
    # a backbone whose weights float16 cannot hold fails after the pack was built: both old folders stay
    bad = Path(shutil.copytree(tiny_mpnet, tmp_path / "bad"))
    save_file({"huge": torch.tensor([7e4])}, str(bad / "model.safetensors"))
    bad_args = [*args, "--overwrite", "--no_minilm", "--backbone_chunks", "mpnet-base", "--backbone_dir", str(bad)]
    with pytest.raises(device_pack.PackError, match="'huge'"):
        device_pack.main(bad_args)
    assert _listing(tmp_path) == [".devpack", ".devpack-mpnet", "bad"]
    assert (tmp_path / ".devpack-mpnet" / "pack.json").read_text() == recorded
    assert _listing(output) == ["data.tar.xz", "pack.json", "run.sh", "wheels"]
    # --overwrite: both replaced, no temporary folder left
    minilm = ["--minilm_dir", str(sources[1])]
    device_pack.main(
        [*args, *minilm, "--overwrite", "--backbone_chunks", "mpnet-base", "--backbone_dir", str(tiny_mpnet)]
    )
    assert _listing(tmp_path) == [".devpack", ".devpack-mpnet", "bad"]
    assert "minilm" in _listing(output)
    calls = json.loads((tmp_path / ".devpack-mpnet" / "pack.json").read_text())["calls"]
    assert calls[-1]["carry"] == [str(output)]  # a pack with MiniLM does not fit beside a part: a call of its own

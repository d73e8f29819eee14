"""Benchmarks: quality runs write one complete JSON per run and resume; the report's numbers are exactly those of the
run files; speed ratios are measured against the baseline arm; README sections are regenerated between markers."""

import dataclasses
import json
import statistics
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import quality  # noqa: E402
import report  # noqa: E402
import speed  # noqa: E402


def _fake_run(comparison: str, arm: str, baseline: bool, dataset: str, seed: int, value: float) -> dict:
    metric = "validation_accuracy" if dataset != "stsb" else "validation_spearman"
    return {
        "comparison": comparison,
        "arm": arm,
        "baseline": baseline,
        "model": "m",
        "config_overrides": {"arm": arm},
        "dataset": dataset,
        "seed": seed,
        "profile": "cpu-small",
        "backbone": "tiny-bert",
        "train_args": {"max_train_samples": 8},
        "metrics": {metric: value, "validation_loss": 0.5},
        "wall_seconds": 1.0,
        "hardware": {"cuda": None, "cpu_count": 2, "torch_threads": 2},
        "git_commit": "0123456789abcdef",
    }


def _write_runs(folder: Path, runs: list[dict]) -> None:
    (folder / "runs").mkdir(parents=True)
    for i, run in enumerate(runs):
        (folder / "runs" / f"{i}.json").write_text(json.dumps(run))


def test_summary_statistics_come_from_the_run_files(tmp_path):
    base, method = [70.0, 72.0, 71.0], [75.0, 74.5, 76.0]
    runs = [_fake_run("c", "base", True, "mrpc", s, v) for s, v in enumerate(base)]
    runs += [_fake_run("c", "method", False, "mrpc", s, v) for s, v in enumerate(method)]
    runs += [_fake_run("c", "base", True, "stsb", s, v) for s, v in enumerate([80.0, 81.0, 79.0])]
    runs += [_fake_run("c", "method", False, "stsb", s, v) for s, v in enumerate([80.5, 79.0, 81.0])]
    _write_runs(tmp_path, runs)
    rows = {(r["dataset"], r["arm"]): r for r in report.summarise(report.load_runs(tmp_path))}
    assert rows["mrpc", "method"]["mean"] == pytest.approx(statistics.mean(method))
    assert rows["mrpc", "method"]["std"] == pytest.approx(statistics.stdev(method))
    assert rows["mrpc", "method"]["delta"] == pytest.approx(statistics.mean(method) - statistics.mean(base))
    assert rows["mrpc", "method"]["beyond_spread"] is True
    assert rows["stsb", "method"]["metric"] == "spearman" and rows["stsb", "method"]["beyond_spread"] is False
    assert rows["mrpc", "base"]["delta"] is None


def test_extra_metrics_get_their_own_rows_and_deltas_but_stay_out_of_model_cards(tmp_path):
    runs = []
    for arm, recall in (("base", [10.0, 12.0, 11.0]), ("m", [20.0, 21.0, 22.0])):
        for seed, value in enumerate(recall):
            run = _fake_run("c", arm, arm == "base", "sick-e", seed, 60.0 + seed)
            run["metrics"] |= {"validation_recall@20": value, "esnli_recall@20": value / 2}
            runs.append(run)
    _write_runs(tmp_path, runs)
    rows = report.summarise(report.load_runs(tmp_path))
    assert [(r["metric"], r["arm"]) for r in rows] == [
        ("accuracy", "base"), ("accuracy", "m"), ("recall@20", "base"), ("recall@20", "m"),
        ("esnli_recall@20", "base"), ("esnli_recall@20", "m"),
    ]  # fmt: skip
    by_metric = {r["metric"]: r for r in rows if r["arm"] == "m"}
    assert by_metric["recall@20"]["delta"] == pytest.approx(10.0) and by_metric["accuracy"]["delta"] == 0.0
    assert by_metric["esnli_recall@20"]["mean"] == pytest.approx(10.5)
    assert [r["main"] for r in rows] == [True, True, False, False, False, False]
    from pairzoo.hub_cards.results import eval_results_for

    expected = [{"dataset": "sick-e", "split": "validation", "metrics": {"validation_accuracy": 61.0}}]
    assert eval_results_for(tmp_path, "m", {"arm": "m", "num_labels": 3}) == expected
    assert eval_results_for(tmp_path, "m", {"arm": "m", "num_labels": 3}, backbone="tiny-bert") == expected
    assert eval_results_for(tmp_path, "m", {"arm": "m", "num_labels": 3}, backbone="minilm") == []  # other backbone
    assert eval_results_for(tmp_path, "m", {"arm": "m", "num_labels": 1}) == []  # a regressor gets no accuracy


def test_a_single_seed_row_says_so_instead_of_a_zero_spread():
    from pairzoo.hub_cards.results import summarise

    runs = [_fake_run("c", "base", True, "mrpc", s, 60.0 + s) for s in range(3)] + [
        _fake_run("c", "m", False, "mrpc", 0, 70)
    ]
    table = report.quality_markdown(summarise(runs))
    assert "| c | mrpc | base | accuracy | 61.00 ± 1.00 | baseline |  |" in table
    assert "| c | mrpc | m | accuracy | 70.00 (seed 0 only) | +9.00 | n/a (1 seed) |" in table


def test_the_table_header_names_every_torch_thread_count_its_runs_used():
    from pairzoo.hub_cards.results import summarise

    runs = [_fake_run("c", "base", True, "mrpc", s, 60.0) for s in range(2)]
    runs[1]["hardware"] = {**runs[1]["hardware"], "torch_threads": 1}
    assert "CPU (2 cores, 1 or 2 torch threads)" in report.quality_markdown(summarise(runs))


def test_run_files_record_whether_cuda_ran_float32_products_in_tf32_and_the_header_says_so(monkeypatch):
    monkeypatch.delenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert quality.float32_matmul() is None  # no CUDA: nothing to say
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    precision = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("highest")
        assert quality.float32_matmul() == "float32"
        monkeypatch.setenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "1")
        assert quality.float32_matmul() == "tf32"
        monkeypatch.delenv("TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")
        torch.set_float32_matmul_precision("high")
        assert quality.float32_matmul() == "tf32"
    finally:
        torch.set_float32_matmul_precision(precision)
    from pairzoo.hub_cards.results import summarise

    runs = [_fake_run("c", "base", True, "mrpc", s, 60.0) for s in range(2)]
    for run in runs:
        run["hardware"] = {**run["hardware"], "cuda": "NVIDIA H200", "float32_matmul": "tf32"}
    assert "backbone `tiny-bert`, NVIDIA H200 (float32 with TF32 matrix products), seeds" in report.quality_markdown(
        summarise(runs)
    )
    for run in runs:
        run["hardware"]["float32_matmul"] = "float32"
    assert "NVIDIA H200, seeds" in report.quality_markdown(summarise(runs))


def test_report_writes_files_and_replaces_only_the_readme_section(tmp_path):
    runs = [_fake_run("c", a, a == "base", "mrpc", s, 60.0 + s + (a == "m")) for a in ("base", "m") for s in range(3)]
    _write_runs(tmp_path / "res", runs)
    readme = tmp_path / "README.md"
    other = "<!-- results:other:start -->\nkept\n<!-- results:other:end -->\n"
    readme.write_text(f"# x\n\nbefore\n<!-- results:res:start -->\nold\n<!-- results:res:end -->\nafter\n{other}")
    markdown = report.build_report(tmp_path / "res", readme)
    text = readme.read_text()
    assert text.startswith("# x\n\nbefore\n<!-- results:res:start -->\n### Quality")
    assert text.endswith(f"<!-- results:res:end -->\nafter\n{other}")
    assert "old" not in text and "| c | mrpc | m | accuracy | 62.00 ± 1.00 | +1.00 | no |" in markdown
    assert "res/quality.png" in text
    assert (tmp_path / "res" / "quality.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(json.loads((tmp_path / "res" / "summary.json").read_text())) == 2
    readme.write_text("<!-- results:start -->\n<!-- results:end -->")
    with pytest.raises(ValueError, match="results:res:start"):
        report.build_report(tmp_path / "res", readme)
    with pytest.raises(FileNotFoundError, match="runs"):
        report.build_report(tmp_path / "missing")


def test_kg_table_comes_from_the_run_folders(tmp_path):
    args = {"backbone": "minilm", "max_steps": 5, "batch_size": 4, "max_length": 16, "eval_queries": 3}
    for arm, mrrs in (("bi", [0.10, 0.12]), ("bi-router", [0.20, 0.22])):
        for seed, mrr in enumerate(mrrs):
            folder = tmp_path / "kg" / f"{arm}__seed{seed}"
            folder.mkdir(parents=True)
            dev = {"mrr": mrr, "hits@1": mrr / 2, "hits@3": mrr, "hits@10": 2 * mrr, "num_entities": 9}
            (folder / "metrics.json").write_text(json.dumps({"args": args, "dev": dev}))
    _write_runs(tmp_path / "res", [_fake_run("c", "base", True, "mrpc", 0, 60.0)])
    report.build_report(tmp_path / "res", kg_dir=tmp_path / "kg")
    table = (tmp_path / "kg" / "RESULTS.md").read_text()
    assert "| bi | 2 | ? / ? | 11.00 ± 1.41 | 5.50 ± 0.71 | 11.00 ± 1.41 | 22.00 ± 2.83 |  |  |" in table
    assert "| bi-router | 2 | ? / ? | 21.00 ± 1.41 |" in table and "| +10.00 | yes |" in table
    assert "--max_steps 5" in table and "WN18RR" in (tmp_path / "res" / "RESULTS.md").read_text()
    (tmp_path / "kg" / "bi__seedX").mkdir()
    (tmp_path / "kg" / "bi__seedX" / "metrics.json").write_text("{}")
    with pytest.raises(ValueError, match="bi__seedX"):
        report.load_kg_runs(tmp_path / "kg")


def test_kg_table_of_time_budgeted_runs_alone(tmp_path, capsys):
    args = {"backbone": "minilm", "max_steps": 3000, "batch_size": 256, "learning_rate": 1e-4, "max_length": 64}
    args |= {"eval_queries": None, "max_train_seconds": 330.0, "bf16": True}
    for arm, steps, mrr in (("tri-hadamard", 1413, 0.40), ("tri-hadamard-router", 1397, 0.38)):
        folder = tmp_path / "kg" / f"{arm}__seed0"
        folder.mkdir(parents=True)
        dev = {"mrr": mrr, "hits@1": mrr, "hits@3": mrr, "hits@10": mrr, "num_entities": 9}
        run = {"args": args, "dev": dev, "train_steps": steps, "environment": {"device": "NVIDIA H200"}}
        (folder / "metrics.json").write_text(json.dumps(run))
    report.main(["--kg_dir", str(tmp_path / "kg")])  # no quality results folder: only the KG table
    table = (tmp_path / "kg" / "RESULTS.md").read_text()
    assert table.strip() == capsys.readouterr().out.strip()
    assert "--learning_rate 0.0001" in table and "--max_train_seconds 330 --bf16" in table
    assert "eval_queries" not in table and "NVIDIA H200" in table and "stopped after 330 s" in table
    assert "| tri-hadamard-router | 1 | 1397 | 38.00 ± 0.00 |" in table and "| -2.00 | one seed: no spread |" in table
    with pytest.raises(ValueError, match="give a results_dir, or --kg_dir alone"):
        report.main(["--kg_dir", str(tmp_path / "kg"), "--readme", str(tmp_path / "README.md")])


def test_quality_runs_train_in_pairzoo_train_subprocesses_write_complete_records_and_resume(tmp_path, monkeypatch):
    # two real tiny-bert runs side by side (`--workers 2`), each a `python -m pairzoo.train` subprocess
    args = {**quality.PROFILES["cpu-small"].args, "max_train_samples": 16, "max_eval_samples": 16}
    monkeypatch.setitem(quality.PROFILES, "cpu-small", dataclasses.replace(quality.PROFILES["cpu-small"], args=args))
    argv = ["--profile", "cpu-small", "--backbone", "tiny-bert", "--only", "seaver", "--seeds", "0"]
    argv += ["--arms", "cross-encoder", "seaver", "--workers", "2", "--output_dir", str(tmp_path)]
    quality.main(argv)
    files = sorted((tmp_path / "runs").iterdir())
    assert [f.name for f in files] == [
        "seaver__cross-encoder__synthetic__seed0.json",
        "seaver__seaver__synthetic__seed0.json",
    ]
    record = json.loads(files[1].read_text())
    assert list(record) == [
        "comparison", "arm", "baseline", "model", "config_overrides", "dataset", "split", "seed", "profile",
        "backbone", "train_args", "metrics", "wall_seconds", "hardware", "versions", "git_commit",
    ]  # fmt: skip
    assert record["baseline"] is False and record["model"] == "seaver" and record["seed"] == 0
    assert record["backbone"] == "tiny-bert" and record["train_args"] == args
    assert isinstance(record["metrics"]["validation_spearman"], float) and record["wall_seconds"] > 0
    mtimes = [f.stat().st_mtime_ns for f in files]
    quality.main(argv)  # resumes: nothing left to run
    assert [f.stat().st_mtime_ns for f in files] == mtimes


def test_neighbor_attention_runs_also_measure_mask_expressiveness(tmp_path, monkeypatch, data_dir):
    monkeypatch.setenv("PAIRZOO_DATA_DIR", str(data_dir))
    profile = quality.PROFILES["cpu-small"]
    args = {**profile.args, "max_train_samples": 8, "max_eval_samples": 8}
    monkeypatch.setitem(quality.PROFILES, "cpu-small", dataclasses.replace(profile, args=args, esnli_rows=6))
    arm = quality.Arm("neighbor attention", "neighbor-attention", {"neighbor_layers": [0]})
    comparison = quality.Comparison("na", (arm,), ("sick-e",), expressiveness=True)
    monkeypatch.setattr(quality, "COMPARISONS", [comparison])
    argv = ["--profile", "cpu-small", "--backbone", "tiny-bert", "--seeds", "0", "--output_dir", str(tmp_path)]
    quality.main(argv)
    metrics = json.loads((tmp_path / "runs" / "na__neighbor-attention__sick-e__seed0.json").read_text())["metrics"]
    assert metrics["validation_keyword_examples"] == 8 and 0 < metrics["esnli_keyword_examples"] <= 6
    for name in ("validation_recall@20", "validation_precision@20", "esnli_recall@20", "esnli_precision@20"):
        assert 0.0 <= metrics[name] <= 100.0
    assert "validation_accuracy" in metrics


def test_speed_ratios_are_against_the_baseline_arm(tmp_path):
    argv = ["--backbone", "tiny-bert", "--only", "csr-bi", "--lengths", "16", "--batch_sizes", "1", "2"]
    payload = speed.main([*argv, "--repeats", "1", "--no_csr_grid", "--no_siamese", "--output_dir", str(tmp_path)])
    result = payload["comparisons"]["csr-bi"]
    for row in result["latency"]:
        base = row["seconds"]["bi-encoder"]
        assert row["ratio"] == {k: pytest.approx(v / base) for k, v in row["seconds"].items()}
    assert result["latency"][-1]["peak_extra_mib"]["bi-encoder"] > 0
    assert result["trainable_fraction"] == {
        "bi-encoder": 1.0,
        "bi-encoder + router": 1.0,
        "bi-encoder (c-sts form)": 1.0,
    }
    assert json.loads((tmp_path / "speed.json").read_text())["comparisons"]["csr-bi"]["baseline"] == "bi-encoder"


def test_every_benchmark_arm_runs_on_the_speed_batch_of_its_input_format():
    from pairzoo import load_tokenizer

    tokenizer = load_tokenizer("tiny-bert")
    for comparison in quality.available_comparisons():
        for arm in comparison.arms:
            # defaults that need more than tiny-bert's 2 layers
            tiny = {"comateformer": {"combined_layers": [0], "combined_head_fraction": 0.5}}
            tiny["neighbor-attention"] = {"neighbor_layers": [0]}
            tiny["csr"] = {"router_layers": [1]} if "router_layers" in arm.overrides else {}
            tiny["seaver"] = {"reweight_heads": [0, 1]} if "reweight_heads" in arm.overrides else {}
            arm = dataclasses.replace(arm, overrides={**arm.overrides, **tiny.get(arm.model, {})})
            model = speed.build(arm, "tiny-bert")
            with torch.inference_mode():
                out = model(**speed.make_batch(model, tokenizer, 2, 24))
            assert out.logits.shape[0] == 2, (comparison.name, arm.label)


def test_targets_are_judged_from_the_measured_ratios():
    row = {"length": 128, "batch_size": 32, "ratio": {"comateformer": 1.6}, "memory_ratio": {"comateformer": 1.2}}
    csr = {"bi_over_cached_tri": 5.5, "router_overhead_direct": 1.2}
    found = speed.targets({"comateformer": {"latency": [row]}}, {"csr": csr})  # in the registry's order of methods
    assert [(t["method"], t["measured"], t["met"]) for t in found] == [
        ("csr", 5.5, True),
        ("csr", 1.2, False),
        ("comateformer", 1.6, False),
        ("comateformer", 1.2, True),
    ]
    # the Siamese hosts' ratios at every measured batch size ("*"), the BERT-base one at batch 32 only
    siamese = {
        "wall_ratios": {
            size: {"re2+sfa / bert-base cross-encoder": r, "esim+sfa / esim": 1.5, "re2+sfa / re2": e}
            for size, r, e in (("1", 0.4, 1.0), ("32", 0.08, 2.5))
        }
    }
    found = speed.targets({}, {"siamese-matcher": siamese})
    named = [(t["target"].split(" per-pair")[0], t["target"].rsplit(" ", 2)[-2:]) for t in found]
    assert [(*name, t["measured"], t["met"]) for name, t in zip(named, found)] == [
        ("RE2 + SFA", ["(batch", "32)"], 0.08, True),
        ("ESIM + SFA", ["(batch", "1)"], 1.5, True),
        ("ESIM + SFA", ["(batch", "32)"], 1.5, True),
        ("RE2 + SFA", ["(batch", "1)"], 1.0, True),
        ("RE2 + SFA", ["(batch", "32)"], 2.5, False),
    ]
    seaver = {"latency": [{**row, "batch_size": 1, "ratio": {"seaver": 1.0}}, {**row, "ratio": {"seaver": 1.12}}]}
    # every arm but the comparison's baseline is judged, each on its own row
    timed = {"length": 128, "batch_size": 32, "ratio": {"plain": 1.0, "mix": 1.4, "paper": 1.7}}
    arms = {"baseline": "plain", "latency": [timed]}
    found = speed.targets({"comateformer": arms}, {})
    assert [(t["target"].rsplit(": ", 1)[-1], t["measured"], t["met"]) for t in found] == [
        ("mix", 1.4, True),
        ("paper", 1.7, False),
    ]
    step = {"trainable_fraction_of_backbone": {"neighbor": 0.05, "full": 1.01}}
    found = speed.targets({"seaver": seaver}, {"neighbor-attention": step})
    assert [(t["method"], t["measured"], t["met"]) for t in found] == [
        ("seaver", 1.12, False),
        ("neighbor-attention", 0.05, True),
    ]


def test_neighbor_attention_step_benchmark_counts_the_added_parameters_and_times_the_search():
    import speed_neighbor_attention

    from pairzoo import create_model

    overrides = {"neighbor_layers": [0]}
    argv = ["--backbone", "tiny-bert", "--batch_size", "2", "--length", "24", "--repeats", "1"]
    result = speed_neighbor_attention.main([*argv, "--warmup", "0", "--overrides", json.dumps(overrides)])
    model = create_model("neighbor-attention", backbone="tiny-bert", num_labels=3, **overrides)
    added = [model.neighbor_projections, model.neighbor_transform, model.neighbor_layer_norm, model.classifier]
    backbone = sum(p.numel() for p in model.backbone.parameters())
    assert result["backbone_parameters"] == backbone
    expected = sum(p.numel() for module in added for p in module.parameters()) / backbone
    assert result["trainable_fraction_of_backbone"]["neighbor"] == pytest.approx(expected)
    head = sum(p.numel() for p in model.classifier.parameters())
    assert result["trainable_fraction_of_backbone"]["full"] == pytest.approx(1 + head / backbone)  # no neighbor layers
    assert 0 < result["neighbor_search_share_of_step_wall"] < 1
    assert 0 < result["neighbor_search_share_of_step_flops"] < 1
    text = report.speed_markdown({"device": "CPU", "repeats": 1, "targets": [], "neighbor_attention_step": result})
    assert f"{result['neighbor_search_share_of_step_wall']:.1%} of the step's wall time" in text


@pytest.mark.parametrize("grad_mode", [torch.inference_mode, torch.no_grad, torch.enable_grad])
@pytest.mark.parametrize("packed", [False, True])
def test_counted_flops_include_fused_lstms_in_every_grad_mode(grad_mode, packed):
    from benchmarks.timing import counted_flops

    lstm = torch.nn.LSTM(12, 5, num_layers=2, bidirectional=True, batch_first=True)
    inputs, lengths = torch.randn(3, 7, 12), [7, 4, 2]
    if packed:
        inputs = torch.nn.utils.rnn.pack_padded_sequence(inputs, lengths, batch_first=True)
    tokens = sum(lengths) if packed else 3 * 7
    # Every layer and direction: 4 gates x (input + hidden) weights per token; layer 2 reads both directions.
    expected = 2 * tokens * 2 * (4 * 5 * (12 + 5) + 4 * 5 * (10 + 5))
    with grad_mode():
        assert counted_flops(lambda: lstm(inputs)) == expected


def test_siamese_latency_benchmark_counts_the_cross_encoder_flops_and_renders_every_model():
    import speed_siamese_matcher

    argv = ["--matchers", "re2", "--batch_sizes", "1", "2", "--length", "8", "--repeats", "1", "--warmup", "0"]
    result = speed_siamese_matcher.main(argv)  # no --threads: it would change the thread count of later tests
    flops = result["flops_per_pair"]
    assert flops["re2+none"] < flops["re2+fa"] < flops["re2+sfa"]
    # The cross-encoder reads 2 * 8 - 1 tokens: its encoder's linear layers cost 2 * tokens * in * out each, its
    # attention at most 4 * tokens^2 * hidden per layer, its pooler and head read one position.
    from pairzoo import create_model

    cross = create_model("cross-encoder", backbone="minilm", num_labels=3)
    tokens, backbone = 15, cross.backbone.config

    def weights(module: torch.nn.Module) -> int:
        return sum(m.in_features * m.out_features for m in module.modules() if isinstance(m, torch.nn.Linear))

    linear = 2 * tokens * weights(cross.backbone.encoder) + 2 * (weights(cross) - weights(cross.backbone.encoder))
    attention = 4 * tokens**2 * backbone.hidden_size * backbone.num_hidden_layers
    assert linear <= flops["cross-encoder"] <= linear + attention
    assert result["flop_ratios"]["re2+sfa / cross-encoder"] == pytest.approx(flops["re2+sfa"] / flops["cross-encoder"])
    text = report.speed_markdown({"device": "CPU", "repeats": 1, "targets": [], "siamese_latency": result})
    for name in ("re2+none", "re2+fa", "re2+sfa", "cross-encoder"):
        row = next(line for line in text.splitlines() if line.startswith(f"| {name} |"))
        assert f"| {flops[name] / 1e6:.1f} |" in row
        assert f"| {result['parameters'][name] / 1e6:.2f} |" in row


def test_model_card_gets_the_results_of_the_most_specific_matching_arm(tmp_path):
    from pairzoo import create_model, load_tokenizer
    from pairzoo.hub_cards import export_model
    from pairzoo.hub_cards.__main__ import main as hub_cards_main

    runs = []
    for arm, overrides, values in (
        ("bi", {"architecture": "bi", "use_router": False}, [40.0, 42.0, 44.0]),
        ("bi+router", {"architecture": "bi"}, [50.0, 52.0, 54.0]),
    ):
        for seed, value in enumerate(values):
            run = _fake_run("csr-bi", arm, arm == "bi", "synthetic", seed, value)
            run["metrics"] = {"validation_spearman": value}
            runs.append({**run, "model": "csr", "config_overrides": overrides})
    _write_runs(tmp_path / "res", runs)
    model = create_model("csr", backbone="tiny-bert", architecture="bi", use_router=False)
    export = export_model(model, load_tokenizer("tiny-bert"), tmp_path / "export")
    assert hub_cards_main(["card", str(export), "--results", str(tmp_path / "res")]) == 0
    card = (export / "README.md").read_text()
    assert "value: 42.0" in card and "value: 52.0" not in card
    assert hub_cards_main(["card", str(tmp_path / "nowhere"), "--results", str(tmp_path / "res")]) == 2

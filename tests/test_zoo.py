"""The zoo (`pairzoo.zoo`): one module per method holds what pairzoo knows of it, and the model cards, `make zoo`, the
web demo and the benchmarks read it from there."""

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from test_make_zoo import _bench_run
from transformers import set_seed

from pairzoo import app_logic, create_model, get_model_spec, make_zoo, registry
from pairzoo.configuration.configuration_siamese_matcher import MATCHERS
from pairzoo.hub_cards import render_model_card
from pairzoo.hub_cards.results import baseline_comparison
from pairzoo.zoo import MODEL_SPECS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import quality  # noqa: E402
import report  # noqa: E402


def test_each_method_module_holds_its_card_benchmark_and_zoo_knowledge():
    names = [comparison.name for spec in MODEL_SPECS for comparison in spec.comparisons]
    assert len(names) == len(set(names))
    for spec in MODEL_SPECS:
        assert spec.card_title and spec.limitation, spec.name
        assert spec.zoo_entries and all(entry.model == spec.name for entry in spec.zoo_entries), spec.name
        assert spec.comparisons, spec.name
        for comparison in spec.comparisons:  # the baseline may be another method; the comparison tests this one
            assert any(arm.model == spec.name for arm in comparison.arms), comparison.name
    siamese = get_model_spec("siamese-matcher")
    assert siamese.host_option == "matcher" and set(siamese.host_citations) == set(MATCHERS)  # every host is cited
    assert not any(spec.host_option or spec.host_citations for spec in MODEL_SPECS if spec is not siamese)
    # the consumers hold no copy of their own: they list exactly what the method modules say, in their order
    assert quality.COMPARISONS == [c for spec in MODEL_SPECS for c in spec.comparisons]
    assert make_zoo.ZOO == tuple(entry for spec in MODEL_SPECS for entry in spec.zoo_entries)
    assert report.PAPER_NUMBERS == [row for spec in MODEL_SPECS for row in spec.paper_numbers]
    bundled = {spec.name: spec.demo_overrides for spec in MODEL_SPECS if spec.demo_overrides is not None}
    assert app_logic.BUNDLED_MODELS == bundled


def test_the_card_takes_title_limitation_and_host_citation_from_the_method_spec(monkeypatch):
    spec = get_model_spec("siamese-matcher")
    changed = dataclasses.replace(
        spec,
        card_title="Test matcher",
        limitation="Cannot read Latin.",
        host_citations={**spec.host_citations, "re2": "@misc{test2025host,\n  title = {A test host},\n}"},
    )
    monkeypatch.setitem(registry._MODELS, "siamese-matcher", changed)
    set_seed(0)
    model = create_model(
        "siamese-matcher", backbone="tiny-bert", hidden_size=64, max_sequence_length=32, matcher="re2"
    )
    card = render_model_card(model, None, "tiny-bert", "org/repo")
    assert "# Test matcher: pair classification on tiny-bert\n" in card
    assert "- Cannot read Latin.\n" in card
    assert "@misc{test2025host," in card and "yang2019re2" not in card


def test_the_cards_findings_come_from_the_method_spec(monkeypatch, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    for seed, (method, base) in enumerate([(40.0, 30.0), (42.0, 31.0)]):
        (runs / f"m{seed}.json").write_text(json.dumps(_bench_run("mean", False, {"pooling": "mean"}, seed, method)))
        (runs / f"b{seed}.json").write_text(json.dumps(_bench_run("cls", True, {"pooling": "cls"}, seed, base)))
    query = (tmp_path, "cross-encoder", {"pooling": "mean", "num_labels": 1}, "tiny-bert", "cpu-full")
    assert baseline_comparison(*query)["findings"] == []  # the cross-encoder's module has none

    def findings(every_row: list[dict], results_dir: Path, backbone: "str | None") -> list[str]:
        return [f"{len(every_row)} rows in {results_dir.name} on {backbone}"]

    changed = dataclasses.replace(get_model_spec("cross-encoder"), findings=findings)
    monkeypatch.setitem(registry._MODELS, "cross-encoder", changed)
    assert baseline_comparison(*query)["findings"] == [f"2 rows in {tmp_path.name} on tiny-bert"]


def test_arms_whose_run_files_would_coincide_are_refused():
    from pairzoo.zoo import Arm, Comparison

    arms = (Arm("re2 + sfa", "siamese-matcher"), Arm("re2 - sfa", "siamese-matcher", {"feature_attention": "fa"}))
    with pytest.raises(ValueError, match=r"arms 're2 \+ sfa' and 're2 - sfa' would share run files \('re2---sfa'\)"):
        Comparison("siamese-re2", arms, ("sick-e",))
    with pytest.raises(ValueError, match="would share run files"):
        Comparison("siamese-re2", (arms[0], arms[0]), ("sick-e",))
    assert Comparison("siamese-re2", (arms[0], Arm("re2 + fa", "siamese-matcher")), ("sick-e",)).baseline == arms[0]

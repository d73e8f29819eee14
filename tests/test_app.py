"""The web demo: `pairzoo.app_logic` on tiny random models, and `app.py` itself in headless Chromium (Playwright with
the system browser) on the bundled MiniLM models, with screenshots under tests/artifacts/."""

import copy
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import torch

from pairzoo import app_logic, load_tokenizer
from pairzoo.app_logic import DemoError, ModelStore, Panel
from pairzoo.hub_cards import export_model
from pairzoo.pipelines.pipeline_conditional_similarity import encode_conditional_inputs, encode_tri_inputs
from pairzoo.registry import create_model

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "tests" / "artifacts"
S1, S2 = "Two women in red jackets are walking in a park.", "Two men in blue coats are walking on a beach."
CONDITION = "The number of people."
# Comateformer's default combined layers (0, 1, 2) do not exist in the 2-layer tiny backbone.
TINY_OVERRIDES = {"comateformer": {"combined_layers": [0, 1], "combined_head_fraction": [0.5, 0.5]}}


@pytest.fixture(scope="module")
def store() -> ModelStore:
    store = ModelStore(app_logic.bundled_sources(backbone="tiny-bert", overrides=TINY_OVERRIDES))
    store.load()
    return store


def _is_picture(image) -> bool:
    """A non-empty image with more than one colour."""
    pixels = np.asarray(image)
    return pixels.size > 0 and len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 10


def test_check_text_names_the_field_for_empty_and_overlong_input():
    assert app_logic.check_text("Sentence 1", "  a cat  ") == "a cat"
    assert app_logic.check_text("Condition 2", "   ", required=False) is None
    with pytest.raises(DemoError, match="Sentence 1 is empty"):
        app_logic.check_text("Sentence 1", " \n ")
    with pytest.raises(DemoError, match="Condition is empty"):
        app_logic.check_text("Condition", None)
    too_long = "x" * (app_logic.MAX_CHARS + 1)
    with pytest.raises(DemoError, match=f"Sentence 2 is too long: {app_logic.MAX_CHARS + 1} characters"):
        app_logic.check_text("Sentence 2", too_long)


def test_store_loads_the_bundled_models_and_reports_them(store):
    assert [m.name for m in store.models] == list(app_logic.BUNDLED_MODELS)
    assert not store.failures and store.finished.is_set()
    status = store.status_markdown()
    assert "Models ready" in status and "4/4" in status and "untrained heads" in status
    assert [m.conditional for m in store.models] == [True, True, True, False]


def test_conditional_tab_scores_are_the_models_own(store):
    result = app_logic.conditional_similarity(store, S1, S2, CONDITION, ["The activity.", "  "])
    baseline, seaver, csr = (store.get(kind) for kind in ("cross-encoder", "seaver", "csr"))
    tokenizer = baseline.tokenizer
    with torch.no_grad():
        cross_inputs = encode_conditional_inputs(tokenizer, S1, S2, CONDITION)
        expected_baseline = baseline.model(**cross_inputs).scores[0]
        expected_seaver = seaver.model(**cross_inputs).scores[0]
        expected_csr = csr.model(**encode_tri_inputs(tokenizer, S1, S2, CONDITION)).scores[0]
    assert float(result.baseline_score) == pytest.approx(float(expected_baseline), abs=1e-3)
    assert float(result.seaver_score) == pytest.approx(float(expected_seaver), abs=1e-3)
    assert float(result.csr_score) == pytest.approx(float(expected_csr), abs=1e-3)
    assert result.notes == []
    for image in (result.baseline_attention, result.seaver_reweighting, result.router_weights):
        assert _is_picture(image)


def test_baseline_attention_is_the_last_layer_attention_on_the_sentence_part(store):
    baseline = store.get("cross-encoder")
    tokens, attention = app_logic.baseline_attention(baseline, S1, S2, CONDITION)
    inputs = encode_conditional_inputs(baseline.tokenizer, S1, S2, CONDITION)
    sentence_part = len(baseline.tokenizer(S1, S2)["input_ids"])  # [CLS] s1 [SEP] s2 [SEP]
    eager = copy.deepcopy(baseline.model.backbone)
    eager.set_attn_implementation("eager")
    with torch.no_grad():
        expected = eager(**inputs, output_attentions=True).attentions[-1][0].mean(0)
    assert len(tokens) == sentence_part and tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"
    torch.testing.assert_close(attention, expected[:sentence_part, :sentence_part], atol=1e-5, rtol=1e-4)


def test_conditional_tab_rejects_bad_input_before_running_a_model(store):
    with pytest.raises(DemoError, match="Sentence 2 is empty"):
        app_logic.conditional_similarity(store, S1, "", CONDITION, [])
    with pytest.raises(DemoError, match="Condition 3 is too long"):
        app_logic.conditional_similarity(store, S1, S2, CONDITION, ["ok", "y" * 500])


def test_sentence_pair_probabilities_and_head_choice(store):
    loaded = store.get("comateformer")
    assert store.head_choices()[0] == ("layer 0, head 0", "0:0")
    assert len(store.head_choices()) == 4  # 2 of 4 heads in each of the 2 combined layers
    pair = ("A man plays the guitar.", "A person makes music.")
    result = app_logic.sentence_pair(store, *pair, "1:1")
    with torch.no_grad():
        logits = loaded.model(**loaded.tokenizer(*pair, return_tensors="pt")).logits[0]
    expected = dict(zip(app_logic.BUNDLED_MODELS["comateformer"]["id2label"].values(), logits.softmax(-1).tolist()))
    assert result.prediction.probabilities == pytest.approx(expected, abs=1e-5)
    assert (result.layer, result.head) == (1, 1) and _is_picture(result.maps)
    assert app_logic.sentence_pair(store, *pair, None).layer == 0
    with pytest.raises(DemoError, match="does not exist"):
        app_logic.sentence_pair(store, *pair, "5:0")


def test_compare_runs_every_model_on_the_same_input(store):
    rows = app_logic.compare(store, S1, S2, CONDITION)
    assert [row[0] for row in rows] == [m.name for m in store.models]
    for row, loaded in zip(rows, store.models):
        assert row[3] == app_logic.predict(loaded, S1, S2, CONDITION).text()
        assert isinstance(row[4], float) and row[4] > 0
    assert rows[3][2] == "sentences (no condition)"
    with pytest.raises(DemoError, match="Condition is empty"):
        app_logic.compare(store, S1, S2, "")


def test_export_folders_load_and_a_bad_folder_is_reported(tmp_path):
    torch.manual_seed(0)
    model = create_model("seaver", backbone="tiny-bert")
    folder = export_model(model, load_tokenizer("tiny-bert"), tmp_path / "my-seaver")
    (tmp_path / "empty").mkdir()
    store = ModelStore(app_logic.export_sources([folder, tmp_path / "empty"]))
    store.load()
    assert [(m.name, m.kind, m.trained) for m in store.models] == [("seaver (my-seaver)", "seaver", True)]
    assert list(store.failures) == [str(tmp_path / "empty")]
    assert "Could not load" in store.status_markdown() and "untrained" not in store.status_markdown()
    result = app_logic.conditional_similarity(store, S1, S2, CONDITION, [])
    assert result.baseline_score is None and result.seaver_reweighting is not None
    assert "No cross-encoder (the baseline) is loaded." in result.notes


def test_render_heatmaps_checks_shapes_and_prints_dollar_signs_literally():
    panel = Panel("costs", torch.rand(2, 3), ["$5", "$6 and $7"], ["a", "b", "$c$"], gamma=0.5)
    assert _is_picture(app_logic.render_heatmaps([panel, panel], title="$x$", stacked=True))
    with pytest.raises(ValueError, match="column labels"):
        app_logic.render_heatmaps([Panel("bad", torch.rand(2, 2), ["a", "b"], ["a"])])


# ------------------------------------------------------------------------------------------------ the browser

CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Draws an <img> on a canvas: its natural size and the number of distinct colours among sampled pixels.
IMAGE_STATS_JS = """(root) => {
    const img = root.querySelector('img');
    if (!img || !img.complete || img.naturalWidth === 0) return null;
    const canvas = document.createElement('canvas');
    canvas.width = img.naturalWidth; canvas.height = img.naturalHeight;
    const context = canvas.getContext('2d');
    context.drawImage(img, 0, 0);
    const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
    const colours = new Set();
    for (let i = 0; i < data.length; i += 4 * 13) colours.add(data[i] + ',' + data[i + 1] + ',' + data[i + 2]);
    return {width: img.naturalWidth, height: img.naturalHeight, colours: colours.size, src: img.src};
}"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_page(url: str, process: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"app.py exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"app.py served nothing at {url} within {timeout:.0f} s:\n{log.read_text()[-3000:]}")


def _heatmap(page, selector: str) -> dict:
    """Wait for the image in `selector` to load and check it is a real picture (not empty, not one colour)."""
    page.wait_for_function(
        "(s) => { const i = document.querySelector(s + ' img'); return i && i.complete && i.naturalWidth > 0; }",
        arg=selector,
        timeout=60_000,
    )
    stats = page.eval_on_selector(selector, IMAGE_STATS_JS)
    assert stats and stats["width"] > 100 and stats["height"] > 100, (selector, stats)
    assert stats["colours"] > 20, (selector, stats)
    return stats


def _value(page, selector: str) -> str:
    return page.eval_on_selector(f"{selector} textarea", "e => e.value")


def _wait_text(page, selector: str, text: str, timeout: float = 60_000) -> str:
    page.wait_for_function(
        "([s, t]) => { const e = document.querySelector(s); return e && e.innerText.includes(t); }",
        arg=[selector, text],
        timeout=timeout,
    )
    return page.inner_text(selector)


@pytest.mark.integration
def test_app_in_headless_chromium():
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(chromium).is_file():
        pytest.fail("Chromium is not installed: `apt-get install -y chromium` (Debian's package; make test does it).")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("playwright is not installed: pip install -e '.[app]' (make install does it).")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / "app.log"
    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", "PYTHONUNBUFFERED": "1"}
    started = time.monotonic()
    with log.open("w") as log_file:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "app.py"), "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_page(url, process, log, timeout=60)
        page_seconds = time.monotonic() - started
        assert page_seconds < 30, f"the page took {page_seconds:.1f} s to come up"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(url)
            first_status = _wait_text(page, "#status", " ", timeout=30_000)
            # the page is served while torch and the models load in the background
            assert "Starting" in first_status or "Loading models" in first_status, first_status
            page.screenshot(path=ARTIFACTS / "app-0-loading.png")
            status = _wait_text(page, "#status", "Models ready", timeout=240_000)
            assert "4/4" in status and "untrained heads" in status, status

            # conditional similarity: scores side by side, the two attention maps, CSR's router weights
            page.fill("#cs-s1 textarea", "A chef in a white apron is cooking pasta.")
            page.fill("#cs-s2 textarea", "Two cooks are preparing noodles in a kitchen.")
            page.fill("#cs-c textarea", "The number of people.")
            page.fill("#cs-c2 textarea", "The food.")
            page.fill("#cs-c3 textarea", "The clothing.")
            page.click("#cs-run")
            page.wait_for_function(
                "() => ['#cs-base-score', '#cs-seaver-score', '#cs-csr-score'].every("
                "s => document.querySelector(s + ' textarea').value.length > 0)",
                timeout=120_000,
            )
            scores = {s: float(_value(page, s)) for s in ("#cs-base-score", "#cs-seaver-score", "#cs-csr-score")}
            assert all(np.isfinite(list(scores.values()))), scores
            for selector in ("#cs-base-img", "#cs-seaver-img", "#cs-router-img"):
                _heatmap(page, selector)
            page.screenshot(path=ARTIFACTS / "app-1-conditional.png", full_page=True)

            page.fill("#cs-s1 textarea", "   ")
            page.click("#cs-run")
            assert "Sentence 1 is empty" in _wait_text(page, "#cs-msg", "empty")
            page.wait_for_function("() => document.querySelector('#cs-base-score textarea').value === ''")
            page.fill("#cs-s1 textarea", "A chef is cooking.")
            page.fill("#cs-c textarea", "word " * 60)
            page.click("#cs-run")
            assert "Condition is too long: 299 characters" in _wait_text(page, "#cs-msg", "too long")
            page.screenshot(path=ARTIFACTS / "app-2-bad-input.png", full_page=True)

            # sentence pair: Comateformer's E, N, M of a chosen head and the class probabilities
            page.get_by_role("tab", name="Sentence pair").click()
            page.fill("#pair-s1 textarea", "A hardware engineer fixes the server.")
            page.fill("#pair-s2 textarea", "A software engineer fixes the code.")
            page.click("#pair-run")
            probabilities = _wait_text(page, "#pair-probs", "%")
            assert all(label in probabilities for label in ("entailment", "neutral", "contradiction")), probabilities
            first_head = _heatmap(page, "#pair-img")
            page.click("#pair-head input")
            page.get_by_role("option", name="layer 2, head 3").click()
            page.click("#pair-run")
            page.wait_for_function(
                "(src) => { const i = document.querySelector('#pair-img img'); return i && i.src !== src; }",
                arg=first_head["src"],
                timeout=60_000,
            )
            _heatmap(page, "#pair-img")
            assert page.eval_on_selector("#pair-head input", "e => e.value") == "layer 2, head 3"
            page.screenshot(path=ARTIFACTS / "app-3-pair.png", full_page=True)
            page.fill("#pair-s2 textarea", "")
            page.click("#pair-run")
            assert "Sentence 2 is empty" in _wait_text(page, "#pair-msg", "empty")

            # compare: every loaded model on the same input, with its latency
            page.get_by_role("tab", name="Compare").click()
            page.fill("#cmp-s1 textarea", "A dog runs on the beach.")
            page.fill("#cmp-s2 textarea", "A puppy plays in the sand.")
            page.fill("#cmp-c textarea", "The animal.")
            page.click("#cmp-run")
            _wait_text(page, "#cmp-table", "comateformer", timeout=120_000)
            rows = page.eval_on_selector_all(
                "#cmp-table [role=row]",
                "rows => rows.map(r => [...r.querySelectorAll('[role=gridcell]')].map(c => c.innerText.trim()))",
            )
            rows = [row for row in rows if row]  # the header row has column headers, not grid cells
            assert [row[0] for row in rows] == list(app_logic.BUNDLED_MODELS), rows
            for row in rows:
                assert float(row[-1]) > 0, row  # latency in ms
                assert any(ch.isdigit() for ch in row[3]), row  # a score or class probabilities
            page.screenshot(path=ARTIFACTS / "app-4-compare.png", full_page=True)
            assert "Traceback" not in page.content()
            browser.close()
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    (ARTIFACTS / "timing.txt").write_text(
        f"page served after {page_seconds:.1f} s; whole browser test {time.monotonic() - started:.1f} s\n"
    )

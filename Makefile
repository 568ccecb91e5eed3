PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo demo-services test dev lint bench clean install

export PIP_DISABLE_PIP_VERSION_CHECK = 1
comma := ,

# the package into the venv with extras $(1): by uv (PyPI `uv`, ~45 s from an empty cache,
# compiled to bytecode as pip does: where PYTHONDONTWRITEBYTECODE is set nothing else would),
# or by pip (~2 minutes) when uv cannot be installed or fails, e.g. behind a package index
# only pip is configured for
define install_package
	{ $(BIN)/pip install --quiet uv 2> $(VENV)/install.log \
		&& $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[$(1)]' \
			2>> $(VENV)/install.log; } \
	|| $(BIN)/pip install --quiet -e '.[$(1)]' 2>> $(VENV)/install.log \
	|| { grep -v '^WARNING: Location' $(VENV)/install.log; exit 1; }
endef

$(BIN)/cost-pipeline: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(call install_package,test)
	@touch $@

# the package's own modules as bytecode: an editable install leaves them as source, and where
# PYTHONDONTWRITEBYTECODE is set every `cost-pipeline` would compile them again (~0.13 s a
# command); run on every install so that an edited module is compiled again
install: $(BIN)/cost-pipeline
	@$(BIN)/python -m compileall -q cost_pipeline

demo: install
	$(BIN)/cost-pipeline demo

# the same quarter read through a local S3-compatible server that the script starts and stops
demo-services: install
	$(BIN)/python -m cost_pipeline.demo.services --out demo-services

# the suite on TEST_WORKERS processes (pytest-xdist), each test module on one of them: its
# module fixtures are built once; the session's (the demo quarter) once per worker
TEST_WORKERS ?= 2

test: install
	@mkdir -p $(DAGSTER_HOME)
	$(BIN)/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadscope

# the home the CLI makes (its dagster.yaml: one queued run per warehouse at a time), made
# absolute as the CLI makes it: Dagster refuses a relative DAGSTER_HOME
dev: install
	@home="$$($(BIN)/python -c "from cost_pipeline.cli.materialize import ensure_dagster_home as e; print(e())")" \
	&& echo "DAGSTER_HOME=$$home" >&2 \
	&& DAGSTER_HOME="$$home" COST_PIPELINE_CONFIG=$${COST_PIPELINE_CONFIG:-$(CURDIR)/demo/config.yaml} $(BIN)/dagster dev -w workspace.yaml

# the benchmark, not part of `make test`: months of $(SIZES) billing lines generated once into
# bench-data/, each measured as scan floor, DuckDB reference, pandas and the pipeline;
# the table goes to stdout, the numbers to bench-results.json (docs/performance.md)
SIZES ?= 1m 5m 20m

$(VENV)/bench.stamp: $(BIN)/cost-pipeline pyproject.toml
	$(call install_package,test$(comma)bench)
	@touch $@

bench: $(VENV)/bench.stamp install
	$(BIN)/python bench/run.py --sizes "$(SIZES)"

lint: install
	$(BIN)/ruff check cost_pipeline tests bench  # incl. the layers rule: dagster only in defs/ and cli/

clean:
	rm -rf $(VENV) demo demo-services .dagster_home .cache bench-data bench-results.json bench-mlflow.json

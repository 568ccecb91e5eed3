PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home

.PHONY: demo test dev lint bench clean

$(BIN)/cost-pipeline: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	@touch $@

install: $(BIN)/cost-pipeline

demo: install
	$(BIN)/cost-pipeline demo

test: install
	$(BIN)/python -m pytest -q

dev: install
	@mkdir -p $(DAGSTER_HOME)
	COST_PIPELINE_CONFIG=$${COST_PIPELINE_CONFIG:-$(CURDIR)/demo/config.yaml} $(BIN)/dagster dev -w workspace.yaml

lint: install
	$(BIN)/ruff check cost_pipeline tests

clean:
	rm -rf $(VENV) demo .dagster_home

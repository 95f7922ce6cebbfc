# Two entry points: `make demo` and `make test`. Both build .venv from nothing on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-long lint bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	# torch first and pinned, so that nothing later can pull the CUDA build.
	$(BIN)/pip install --quiet -c constraints.txt torch==2.13.0
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev,bench,poe,botorch,dask]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/gpexplain demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples

test: $(STAMP) lint
	MPLBACKEND=Agg $(BIN)/python -m pytest

# The checks over a minute each (whole example scripts); CI runs them after `make test`.
test-long: $(STAMP)
	MPLBACKEND=Agg $(BIN)/python -m pytest -m long

# Every benchmark in sequence (each writes benchmarks/results/<name>.json); about an hour.
BENCHMARKS := ig_exact_vs_numerical quadrature_rules quadrature_cost random_features_convergence sparse_scaling \
	boston_svgp shapley_speed feature_selection oak_accuracy gpx_accuracy gpx_explanations gpx_time \
	poe_fronts poe_inductive poe_speed gp_shap_speed gp_sensitivity_speed gp_interactions_speed \
	classifier_explanations multi_output_speed icm_fit_vs_botorch \
	fit_speed classifier_fit_speed exact_scaling dask_scaling import_time global_importance variance_attribution_speed ax_sensitivity
# The real data sets live outside the repository: ../shared/data when it exists (tests that need
# it are skipped otherwise, benchmarks stop); override GPEXPLAIN_DATA_DIR to use another copy.
GPEXPLAIN_DATA_DIR ?= $(wildcard $(abspath ../shared/data))
export GPEXPLAIN_DATA_DIR
bench: $(STAMP)
	for name in $(BENCHMARKS); do $(BIN)/python benchmarks/$$name.py || exit 1; done

clean:
	rm -rf $(VENV)

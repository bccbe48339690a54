# The course in two commands: `make lab` and `make test`. Both set everything up first.
PYTHON ?= python3
VENV   ?= .venv
# The torch build to install when the environment has none. The default is what CI uses;
# on a laptop, `make lab TORCH="torch --index-url https://download.pytorch.org/whl/cpu"`
# takes a small CPU build, and a GPU machine may keep the CUDA build it already has.
TORCH  ?= torch==2.13.0
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.course-installed
PORT   ?= 8888
LAB_ARGS ?=
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: setup lab test unit notebooks browser exercises bench clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "This course needs Python 3.11 or newer; found " + sys.version.split()[0] + ". Run: make PYTHON=python3.12 ...")'
	@test -x $(PY) || { echo "Creating the virtual environment in $(VENV)/"; $(PYTHON) -m venv $(VENV); }
	@$(PY) -c 'import torch' 2>/dev/null || { echo "Installing $(TORCH) (once)"; $(PY) -m pip install -q "$(TORCH)"; }
	@echo "Installing the course and its tools into $(VENV)/"
	@$(PY) -m pip install -q -e ".[dev]"
	@touch $(STAMP)

lab: setup
	@echo "Opening the course: JupyterLab on notebooks/ (Ctrl-C to stop)"
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks --ip=127.0.0.1 --port=$(PORT) $(ROOT_FLAG) $(LAB_ARGS)

test: setup unit notebooks

unit: setup
	$(PY) -m graphcourse.build_exercises --check
	$(PY) -m pytest -q tests

notebooks: setup
	$(PY) -m pytest -q -p no:randomly --nbval --nbval-current-env --nbval-sanitize-with nbval-sanitize.cfg notebooks solutions

browser: setup
	$(PY) -m pytest -q -m browser tests

exercises: setup
	$(PY) -m graphcourse.build_exercises --execute

bench: setup
	$(PY) -m graphcourse.bench --out data/gpu_reference.json

clean-venv:
	rm -rf $(VENV)

# The toy's default prices come from the recorded benchmark: regenerate them after `make bench`.
.PHONY: toy-prices
toy-prices: setup
	$(PY) -m graphcourse.toy_prices

# Self-check one exercise notebook (nbval runs it; each check is named exercise/check, with a summary):
#   make check NB=my-work/06_exercises.ipynb
NB ?= exercises/06_exercises.ipynb
.PHONY: check
check: setup
	$(PY) -m pytest -v --no-header -p graphcourse.selfcheck -p no:randomly -p no:cacheprovider --nbval-lax --nbval-current-env $(NB)

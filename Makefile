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

# ---- The class server (classroom/hub/README.md): JupyterHub, one Unix user per learner ----------
# Run as root on the workshop machine. `make hub-users LEARNERS="ada grace"` (or
# LEARNERS_FILE=roster.txt) makes accounts and a passwords sheet; `make hub` serves the class;
# `make grade-class` collects every learner's exercise notebooks into $(CLASS)/ and grades them.
HUB_NODE  := classroom/hub/node
HUB_PROXY := $(HUB_NODE)/node_modules/.bin/configurable-http-proxy
LEARNERS ?=
LEARNERS_FILE ?=
CLASS ?= grading-out/class-$(shell date +%Y%m%d-%H%M%S)

.PHONY: hub hub-setup hub-users hub-check collect grade-class

hub-setup: setup $(HUB_PROXY)
	@$(PY) -c 'import jupyterhub' 2>/dev/null || { echo "Installing JupyterHub into $(VENV)/"; $(PY) -m pip install -q -e ".[dev,hub]"; }

$(HUB_PROXY): $(HUB_NODE)/package.json $(HUB_NODE)/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: apt-get install nodejs npm (JupyterHub's proxy is a Node.js program)"; exit 1; }
	npm ci --prefix $(HUB_NODE) --no-audit --no-fund
	@touch $@

hub-users: hub-setup
	$(PY) classroom/hub/coursehub.py add-users $(if $(LEARNERS_FILE),--from-file $(LEARNERS_FILE)) $(LEARNERS)

hub-check: hub-setup
	$(PY) classroom/hub/coursehub.py check

hub: hub-setup
	$(PY) -m jupyterhub -f classroom/hub/jupyterhub_config.py

collect: setup
	$(PY) -m graphcourse.collect --out $(CLASS)

grade-class: setup
	$(PY) -m graphcourse.collect --out $(CLASS) --grade

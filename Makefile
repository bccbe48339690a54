# The course in two commands: `make lab` and `make test`. Both set everything up first.
# The set-up itself is bootstrap.py (Python's standard library only), so that
# `python3 bootstrap.py lab` does the same where `make` is missing (Windows without WSL).
PYTHON ?= python3
VENV   ?= .venv
# The torch to install when the environment has none, as pip arguments. Empty: bootstrap.py
# chooses (the CPU build on Linux without an NVIDIA GPU, PyPI's build elsewhere);
# `python3 bootstrap.py which-torch` says what it would take here.
TORCH  ?=
# Empty: 8888, or the next free port when 8888 is taken. Given: that port, or a clear error.
PORT   ?=
# A folder of wheels to install from without network (`make wheelhouse` builds ./wheelhouse,
# which is used by default when present).
WHEELHOUSE ?=
PY     := $(VENV)/bin/python
# Two stamps: everything with the test tools (make test), or what a learner needs (make lab).
STAMP  := $(VENV)/.course-installed
# A full set-up (make test's, or the class server's) holds everything make lab needs: then that one stands for both,
# so neither make lab after make test nor a learner's make check on the class server (VENV: the course's environment,
# which learners cannot write) installs anything.
LAB_STAMP := $(if $(wildcard $(STAMP)),$(STAMP),$(VENV)/.course-installed-lab)
LAB_ARGS ?=
BOOT   = $(PYTHON) bootstrap.py --venv $(VENV) $(if $(TORCH),--torch "$(TORCH)") \
         $(if $(WHEELHOUSE),--wheelhouse "$(WHEELHOUSE)")

.PHONY: setup lab test test-fast test-tools grade unit notebooks browser exercises my-exercises wheelhouse slides instructor \
        instructor-timings nav bench clean-venv

setup: $(STAMP)

$(STAMP): pyproject.toml $(wildcard requirements.lock)
	@$(BOOT) setup

ifneq ($(LAB_STAMP),$(STAMP))
$(LAB_STAMP): pyproject.toml $(wildcard requirements.lock)
	@$(BOOT) setup-lab
endif

lab: $(LAB_STAMP)
	@$(BOOT) $(if $(PORT),--port $(PORT)) --no-setup lab -- $(LAB_ARGS)

# Every test and every stored notebook in one pytest session on TEST_WORKERS workers (what `make unit` and
# `make notebooks` run one after the other), so the workers share out the notebooks too.
test: setup test-tools
	$(PY) -m graphcourse.authoring.build_exercises --check
	$(PY) -m pytest -q $(XDIST) tests $(NBVAL) notebooks solutions

# How many pytest workers make test and make test-fast use (pytest-xdist). Each test module runs whole on one worker
# (--dist loadfile), so a graded class, a built site or a JupyterLab is made once; tests/conftest.py starts the
# longest modules first. TEST_WORKERS=0 runs everything in one process, in order.
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile)

# The fast tier, for your own loop: every unit and property test, without the grader's class runs, pytest over
# notebooks, JupyterLab, browsers or the class server (tests/conftest.py marks those slow by the fixtures they use).
test-fast: setup
	$(PY) -m graphcourse.authoring.build_exercises --check
	$(PY) -m pytest -q $(XDIST) -m "not slow and not browser" tests

# What the class-server test needs beyond Python: JupyterHub's proxy, from npm. Without npm the
# test says it is skipped and why.
test-tools: setup
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory $(HUB_PROXY); \
	else echo "npm not found: the class-server test will be skipped (apt-get install nodejs npm)"; fi

unit: setup
	$(PY) -m graphcourse.authoring.build_exercises --check
	$(PY) -m pytest -q $(XDIST) tests

NBVAL = --nbval --nbval-current-env --nbval-sanitize-with nbval-sanitize.cfg
notebooks: setup
	$(PY) -m pytest -q $(NBVAL) notebooks solutions

browser: setup
	$(PY) -m pytest -q -m browser tests

exercises: setup
	$(PY) -m graphcourse.authoring.build_exercises --execute

# Your own copy of every exercise notebook in my-work/ of the course you open (made once, never overwritten;
# new exercises merged in). In the authored repository that course is the release in build/release.
my-exercises: $(LAB_STAMP)
	@$(BOOT) my-exercises

# Update a course you got with git (git pull --ff-only): each lesson or exercise notebook you changed (JupyterLab saves
# your runs in it) that the update changes is first moved to my-work/kept-from-update/<date>/; refused, with nothing
# changed, when the pull cannot go through (it says why and what to do). Needs git and Python, not the set-up.
.PHONY: update
update:
	@$(PYTHON) bootstrap.py update

# The course learners get, built from the sources into $(RELEASE): lessons, exercises and their self-check
# data, toygraph, graphcourse, the recorded figures, the learner's docs and the set-up; no solutions, tests
# or instructor kit (the build refuses if an answer would get out). Rebuilding keeps my-work/ and any file
# the learner changed (moved to my-work/kept-from-update/). Publish this folder, not the repository.
RELEASE ?= build/release
.PHONY: release
release: setup
	$(PY) -m graphcourse.authoring.release --out $(RELEASE)

# The Gradescope autograder (docs/grading.md, "On Gradescope"): setup.sh, run_autograder, the grader and solutions/
# (Gradescope never shows an autograder's files to students) in one zip to upload under Configure Autograder.
# Where the container cannot confine learners' kernels (no bubblewrap or user namespaces), the zip grades nothing and
# says why; UNCONFINED=1 builds one that grades there anyway, as root beside solutions/, and labels each result.
AUTOGRADER ?= build/autograder.zip
UNCONFINED ?=
.PHONY: autograder
autograder: setup
	$(PY) -m graphcourse.grading.gradescope_bundle --out $(AUTOGRADER) $(if $(filter 1 yes true,$(UNCONFINED)),--allow-unconfined)

# Every wheel the course needs, for a room without network: copy the course folder with
# wheelhouse/ to each laptop; `make lab` there installs from it.
wheelhouse:
	@$(PYTHON) bootstrap.py $(if $(TORCH),--torch "$(TORCH)") --wheelhouse $(or $(WHEELHOUSE),wheelhouse) wheelhouse

# Present a lesson as slides: the course in JupyterLab, as `make lab`, opened on the lesson's RISE slideshow (its
# own cells, live, offline). make slides LESSON=03_real_cuda_graphs; docs/instructor/README.md, "Slides".
LESSON ?= 01_the_big_idea
slides: $(LAB_STAMP)
	@test -f notebooks/$(LESSON).ipynb || { echo "no lesson notebooks/$(LESSON).ipynb: LESSON is a name like 03_real_cuda_graphs"; exit 2; }
	@$(BOOT) $(if $(PORT),--port $(PORT)) --no-setup lab -- --LabApp.default_url=/rise/notebooks/$(LESSON).ipynb $(LAB_ARGS)

# The instructor kit in docs/instructor/, regenerated from the lessons.
instructor: setup
	$(PY) -m graphcourse.authoring.instructor

# Re-measure how long each lesson takes to run (CPU, nbclient), then regenerate the kit.
instructor-timings: setup
	$(PY) -m graphcourse.authoring.instructor --measure

# The authored lessons hold no navigation, Colab cells or slide marks (the release makes them): this removes any
# (a lesson copied back from a release). The check is part of make test.
nav: setup
	$(PY) -m graphcourse.authoring.nav

bench: setup
	$(PY) -m graphcourse.gpulib.bench --out data/gpu_reference.json

clean-venv:
	rm -rf $(VENV)

# requirements.lock, the exact versions make lab and make test install (pip constraints), from this environment.
.PHONY: lock
lock: setup
	@$(BOOT) lock

# The toy's default prices come from the recorded benchmark: regenerate them after `make bench`.
.PHONY: toy-prices
toy-prices: setup
	$(PY) -m graphcourse.authoring.toy_prices
# ---- The class server (classroom/hub/README.md): JupyterHub, one Unix user per learner ----------
# Run as root on the workshop machine. `make hub-users LEARNERS="ada grace"` (or
# LEARNERS_FILE=roster.txt) makes accounts and a passwords sheet; `make hub` serves the class;
# `make grade-class` collects every learner's exercise notebooks into $(CLASS)/ and grades them.
HUB_NODE  := classroom/hub/node
HUB_PROXY := $(HUB_NODE)/node_modules/.bin/configurable-http-proxy
LEARNERS ?=
LEARNERS_FILE ?=
CLASS ?= grading-out/class-$(shell date +%Y%m%d-%H%M%S)

.PHONY: hub hub-setup hub-users hub-remove-users hub-list hub-check collect grade-class

hub-setup: setup $(HUB_PROXY)
	@$(PY) -c 'import jupyterhub' 2>/dev/null || { echo "Installing JupyterHub into $(VENV)/"; $(PY) -m pip install -q -e ".[dev,hub]"; }

$(HUB_PROXY): $(HUB_NODE)/package.json $(HUB_NODE)/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: apt-get install nodejs npm (JupyterHub's proxy is a Node.js program)"; exit 1; }
	npm ci --prefix $(HUB_NODE) --no-audit --no-fund
	@touch $@

hub-users: hub-setup
	$(PY) classroom/hub/coursehub.py add-users $(if $(LEARNERS_FILE),--from-file $(LEARNERS_FILE)) $(LEARNERS)

# `make hub-remove-users LEARNERS="ada grace"` (or LEARNERS=all; DELETE_HOMES=1 deletes their homes too).
DELETE_HOMES ?=
hub-remove-users: hub-setup
	@test -n "$(strip $(LEARNERS))" || { echo 'say whom: make hub-remove-users LEARNERS="ada grace" (or LEARNERS=all)'; exit 2; }
	$(PY) classroom/hub/coursehub.py remove-users $(if $(filter all,$(LEARNERS)),--all,$(LEARNERS)) $(if $(filter 1 yes true,$(DELETE_HOMES)),--delete-homes)

hub-list: hub-setup
	$(PY) classroom/hub/coursehub.py list

hub-check: hub-setup
	$(PY) classroom/hub/coursehub.py check

hub: hub-setup
	$(PY) -m jupyterhub -f classroom/hub/jupyterhub_config.py

collect: setup
	$(PY) -m graphcourse.grading.collect --out $(CLASS)

grade-class: setup
	$(PY) -m graphcourse.grading.collect --out $(CLASS) --grade
# ---- the published site and the browser build (issue 14; owner: site) ----
SITE_STAMP := $(VENV)/.site-installed

$(SITE_STAMP): pyproject.toml | $(STAMP)
	@echo "Installing Sphinx, myst-nb and the book theme into $(VENV)/ (once)"
	@$(PY) -m pip install -q -e ".[site]"
	@touch $(SITE_STAMP)

.PHONY: site
site: $(STAMP) $(SITE_STAMP)
	$(PY) -m graphcourse.authoring.site --out build/site
	@echo "Open build/site/index.html in a browser (it needs no server and no network)."

LITE_STAMP := $(VENV)/.lite-installed
LITE_PORT  ?= 8000

$(LITE_STAMP): pyproject.toml | $(STAMP)
	@echo "Installing JupyterLite and its Pyodide kernel into $(VENV)/ (once)"
	@$(PY) -m pip install -q -e ".[lite]"
	@touch $(LITE_STAMP)

.PHONY: lite lite-build
lite-build: $(STAMP) $(LITE_STAMP)
	$(PY) -m graphcourse.authoring.lite --out build/lite

# Builds the toy lessons for the browser, then serves them on http://127.0.0.1:$(LITE_PORT)/ (Ctrl-C to stop).
lite: lite-build
	$(PY) -m graphcourse.authoring.lite --out build/lite --no-build --port $(LITE_PORT)

# Self-check your exercise notebooks (nbval runs each in its own kernel; each check is named exercise/check,
# with a summary): `make check` checks every copy `make my-exercises` made (my-work/06_exercises.ipynb,
# my-work/07_compile_and_control_flow.ipynb, ...); one of them: make check NB=my-work/06_exercises.ipynb
NB ?= $(wildcard $(patsubst exercises/%,my-work/%,$(wildcard exercises/*.ipynb)))
.PHONY: check
check: setup
	@if [ -z "$(strip $(NB))" ]; then echo "no exercise notebooks in my-work/: run make my-exercises first (or give NB=path/to/notebook.ipynb)"; exit 2; fi
	$(PY) -m pytest -v --no-header -p graphcourse.authoring.selfcheck -p no:randomly -p no:cacheprovider --nbval-lax --nbval-current-env $(NB)

# Grade your own copies in my-work/ as the instructor will (every check, the hidden ones too, against the model
# answers in solutions/) into my_grades.json, with a table in the terminal; no root or bubblewrap needed: your own
# notebooks run as you, not confined (a class is graded confined: make grade). The course as published to learners
# has no solutions/: there it says so and points to make check. Spelled out:
#   .venv/bin/python -m graphcourse.grading my-work/ --own-work --report my_grades.json
MY_WORK ?= my-work
MY_GRADES ?= my_grades.json
GRADE_ARGS ?=
.PHONY: grade-me
grade-me: $(LAB_STAMP)
	@if [ -z "$(strip $(wildcard $(patsubst exercises/%,$(MY_WORK)/%,$(wildcard exercises/*.ipynb))))" ]; then echo "no exercise notebooks in $(MY_WORK)/: run make my-exercises first (it makes your own copies there)"; exit 2; fi
	@if [ -z "$(wildcard solutions/*.ipynb)" ]; then echo "grading needs the model answers in solutions/, which this copy of the course leaves out: self-check with make check (or check(\"ex03\") in a notebook); your instructor grades with the hidden checks"; exit 2; fi
	$(PY) -m graphcourse.grading $(MY_WORK)/ --own-work --report $(MY_GRADES) $(GRADE_ARGS)

# Grade a class, each learner confined (bubblewrap; see docs/grading.md): sudo make grade CLASS=path/to/class
# On many machines: DASK=tcp://HOST:8786 (a Dask scheduler whose workers grade; docs/grading.md, "On many machines").
DASK ?=
grade: setup
	$(PY) -m graphcourse.grading $(CLASS) --report grades.json --csv grades.csv --feedback feedback/ --junit grades.xml $(if $(filter 1 yes true,$(UNCONFINED)),--allow-unconfined) $(if $(DASK),--dask $(DASK))

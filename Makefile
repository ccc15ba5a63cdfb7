PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# The test suite runs in two legs, each from its own lock (requirements/, made by tools/make_locks):
#   .venv        Python 3.11 with JAX 0.10.2, the oldest JAX supported (also the demo's environment);
#   .venv-py312  Python 3.12 with the newest JAX the range allows.
LOCK      := requirements/py311.txt
VENV312   := .venv-py312
PY312     := $(VENV312)/bin/python
LOCK312   := requirements/py312.txt
PYTHON312 ?=
# TensorFlow (CPU) for the benchmarks' tf.data rows only: pyproject's `bench` extra. It lives in its
# own venv, driven as a subprocess, because tensorflow-cpu 2.21 pins h5py<3.15 and would downgrade
# the test extras' h5py in .venv (jax, keras and protobuf versions would be unchanged).
TFVENV := .venv-tf
TF_SPEC := tensorflow-cpu>=2.21,<2.22

.PHONY: test test-py311 test-py312 test-one-device demo bench lint typecheck lock clean

$(VENV)/.installed-base: pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(LOCK) -e ".[demo]"
	touch $@

$(VENV)/.installed-test: pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(LOCK) -e ".[test]"
	touch $(VENV)/.installed-base $@

# A missing Python 3.12 stops here with tools/find_python's message (never a silent skip).
$(VENV312)/.installed-test: pyproject.toml $(LOCK312)
	@test -x $(PY312) || { py="$(PYTHON312)"; [ -n "$$py" ] || py="$$(tools/find_python 3.12)" || exit 1; \
	  echo "$$py -m venv $(VENV312)"; "$$py" -m venv $(VENV312); }
	$(PY312) -m pip install --quiet --upgrade pip
	$(PY312) -m pip install --quiet -c $(LOCK312) -e ".[test]"
	touch $@

LEG = -c 'import platform, jax; print(f"== Python {platform.python_version()}, JAX {jax.__version__} ==", flush=True)'

# Every leg runs even when one before it fails; the target fails if any did.
test:
	@status=0; $(MAKE) --no-print-directory test-py311 || status=1; \
	$(MAKE) --no-print-directory test-py312 || status=1; \
	$(MAKE) --no-print-directory test-one-device || status=1; exit $$status

test-py311: $(VENV)/.installed-test
	@$(PY) $(LEG)
	$(PY) -m pytest -q --durations=15 tests

test-py312: $(VENV312)/.installed-test
	@$(PY312) $(LEG)
	$(PY312) -m pytest -q --durations=15 tests

# One device, one replica (a one-GPU user, a laptop): the packages a single-device program
# touches; tests that need several devices are skipped by their devices(n) marker.
ONE_DEVICE_TESTS := tests/strategy tests/input tests/variables tests/values tests/execution \
  tests/keras tests/checkpoint tests/demo tests/examples tests/tf_ports tests/optimizers \
  tests/metrics tests/misuse

test-one-device: $(VENV)/.installed-test
	@echo "== one device =="
	$(PY) -m pytest -q --devices 1 $(ONE_DEVICE_TESTS)

demo: $(VENV)/.installed-base
	$(PY) -m tpustrategy.demo

# Re-resolves both legs' locks from scratch (see tools/make_locks); commit them with the change.
lock:
	tools/make_locks

$(TFVENV)/.installed: pyproject.toml
	test -x $(TFVENV)/bin/python || $(PYTHON) -m venv $(TFVENV)
	$(TFVENV)/bin/python -m pip install --quiet --upgrade pip
	$(TFVENV)/bin/python -m pip install --quiet "$(TF_SPEC)"
	touch $@

bench: $(VENV)/.installed-test $(TFVENV)/.installed
	$(PY) benchmarks/run_all.py --tf-python $(TFVENV)/bin/python

lint: $(VENV)/.installed-test typecheck
	$(PY) -m ruff check tpustrategy tests benchmarks examples

# Strict type checking (settings in pyproject.toml [tool.mypy]) of the packages that pass it.
TYPECHECKED := tpustrategy/_src/context tpustrategy/_src/values tpustrategy/_src/execution tpustrategy/_src/variables

typecheck: $(VENV)/.installed-test
	$(PY) -m mypy $(TYPECHECKED)

# The docs site (docs/, Sphinx + MyST; see docs/about.md), built with warnings as errors into
# docs/_build/html. Its tools are pyproject's `docs` extra, installed into .venv beside the rest.
.PHONY: docs docs-check browser docs-clean
DOCS_BUILD := docs/_build
SPHINX := $(PY) -m sphinx -b html -W --keep-going -q -d $(DOCS_BUILD)/doctrees docs $(DOCS_BUILD)/html

$(VENV)/.installed-docs: pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c $(LOCK) -e ".[docs]"
	touch $@

docs: $(VENV)/.installed-docs
	$(SPHINX)
	@echo "docs: $(DOCS_BUILD)/html/index.html"

# The built site opened in headless Chromium (tests/docs/test_docs_site.py); a missing browser
# fails here (TPS_REQUIRE_BROWSER) instead of skipping. The examples' test runs in `make test`.
docs-check: $(VENV)/.installed-test docs browser
	TPS_REQUIRE_BROWSER=1 $(PY) -m pytest -q tests/docs/test_docs_site.py tests/docs/test_docs_coverage.py

# What `make docs` made (the site, the generated API pages and plots).
docs-clean:
	rm -rf $(DOCS_BUILD) docs/api docs/_generated

# Debian's chromium + chromedriver, installed when missing (root, or sudo without a password).
browser:
	@if command -v chromedriver >/dev/null && { command -v chromium >/dev/null || command -v chromium-browser >/dev/null; }; then :; \
	else sudo=; [ "$$(id -u)" = 0 ] || sudo="sudo -n"; \
	  echo "installing chromium and chromium-driver with apt-get"; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium chromium-driver >/dev/null; fi

clean:
	rm -rf $(VENV) $(VENV312) $(TFVENV) build *.egg-info .pytest_cache

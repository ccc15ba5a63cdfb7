PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python

.PHONY: test demo bench lint clean

$(VENV)/.installed-base: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[demo]"
	touch $@

$(VENV)/.installed-test: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	touch $(VENV)/.installed-base $@

test: $(VENV)/.installed-test
	$(PY) -m pytest -q tests

demo: $(VENV)/.installed-base
	$(PY) -m tpustrategy.demo

bench: $(VENV)/.installed-test
	$(PY) benchmarks/run_all.py

lint: $(VENV)/.installed-test
	$(PY) -m ruff check tpustrategy tests benchmarks examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache

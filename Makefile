PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
# TensorFlow (CPU) for the benchmarks' tf.data rows only: pyproject's `bench` extra. It lives in its
# own venv, driven as a subprocess, because tensorflow-cpu 2.21 pins h5py<3.15 and would downgrade
# the test extras' h5py in .venv (jax, keras and protobuf versions would be unchanged).
TFVENV := .venv-tf
TF_SPEC := tensorflow-cpu>=2.21,<2.22

.PHONY: test demo bench lint typecheck clean

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

clean:
	rm -rf $(VENV) $(TFVENV) build *.egg-info .pytest_cache

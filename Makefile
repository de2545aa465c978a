# torchboost developer targets. `make test` and `make demo` work on a fresh machine:
# they create .venv with plain pip (torch/torchvision pinned in constraints.txt).
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: venv test demo lint docs bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt torch torchvision
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

test: venv
	$(PY) -m pytest -q

demo: venv
	$(VENV)/bin/torchboost demo

lint: venv
	$(VENV)/bin/ruff check .

docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet -d build/site

bench: venv
	$(PY) benchmarks/throughput.py

clean:
	rm -rf $(VENV) build *.egg-info

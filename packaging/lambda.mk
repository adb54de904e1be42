# Build targets `sam build` runs for the layer and the functions (BuildMethod: makefile).
#
# template.yaml points each resource's ContextPath at packaging/<Architecture>/, whose Makefile
# sets LAMBDA_ARCH and includes this file, so the wheels match the functions' instruction set.
# SAM copies the resource's CodeUri/ContentUri into a scratch directory, runs
# `make build-<LogicalId>` there with ARTIFACTS_DIR set, and ships what lands in ARTIFACTS_DIR.
#
# Each target does what BuildMethod: python3.13 does (copy the source without caches, pip-install
# requirements.txt for the Lambda platform), then compiles every .py to CPython 3.13 bytecode:
# Lambda's code filesystem is read-only, so without shipped .pyc files every cold start compiles
# every imported module again. Hash-based, unchecked .pyc files (PEP 552) are used because the
# deployed code never changes under them and Lambda does not keep the source files' timestamps,
# which a timestamp-based .pyc is validated against.

# The interpreter, resolved from the repository root: make runs in a scratch directory where a
# pyenv shim would not see the repository's .python-version.
REPO_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))..)
PYTHON ?= $(shell cd "$(REPO_ROOT)" && python3.13 -c 'import sys; print(sys.executable)' 2>/dev/null)
ifeq ($(PYTHON),)
$(error python3.13 was not found on PATH (sam build needs the functions' runtime version))
endif
LAMBDA_PYTHON_VERSION := 3.13
ifndef LAMBDA_ARCH
$(error LAMBDA_ARCH is not set: run through packaging/<arm64|x86_64>/Makefile)
endif

# The manylinux tags the Lambda runtime's glibc (2.34, Amazon Linux 2023) accepts, newest last,
# as aws-lambda-builders uses them.
PLATFORMS := manylinux2014_$(LAMBDA_ARCH) manylinux_2_17_$(LAMBDA_ARCH) \
             manylinux_2_28_$(LAMBDA_ARCH) manylinux_2_34_$(LAMBDA_ARCH)
PIP_INSTALL = $(PYTHON) -m pip install --quiet --no-compile --no-warn-script-location \
              --only-binary=:all: --implementation cp --python-version $(LAMBDA_PYTHON_VERSION) \
              $(addprefix --platform ,$(PLATFORMS)) --target
COMPILE = $(PYTHON) -m compileall -q -f -j 0 --invalidation-mode unchecked-hash
# What BuildMethod: python3.13 leaves out of the copied source (stale host caches above all).
COPY_SOURCE = $(PYTHON) -c 'import shutil, sys; shutil.copytree(".", sys.argv[1], \
              dirs_exist_ok=True, ignore=shutil.ignore_patterns(*sys.argv[2:]))'
EXCLUDE := '__pycache__' '*.pyc' '*.so' '.aws-sam' '.git' '.gitignore' '.venv' '.mypy_cache' \
           '.pytest_cache' '.ruff_cache' '*.egg-info' '.python-version'

.PHONY: check-python build-CommonLayer build-IngestFunction build-ProcessorFunction \
        build-ReplayFunction build-ArchiverFunction

check-python:
	@$(PYTHON) -c 'import sys; v = "%d.%d" % sys.version_info[:2]; \
	  sys.exit(0 if v == "$(LAMBDA_PYTHON_VERSION)" else f"$(PYTHON) is Python {v}, not $(LAMBDA_PYTHON_VERSION)")'

# The layer: its folder becomes python/ (on sys.path in Lambda as /opt/python).
build-CommonLayer: check-python
	mkdir -p "$(ARTIFACTS_DIR)/python"
	$(COPY_SOURCE) "$(ARTIFACTS_DIR)/python" $(EXCLUDE)
	$(PIP_INSTALL) "$(ARTIFACTS_DIR)/python" -r requirements.txt
	rm -rf "$(ARTIFACTS_DIR)/python/bin"  # console scripts with the build host's shebang
	$(COMPILE) "$(ARTIFACTS_DIR)/python"

# A function: its folder is the code root (/var/task); its own requirements.txt, if any.
build-IngestFunction build-ProcessorFunction build-ReplayFunction build-ArchiverFunction: check-python
	mkdir -p "$(ARTIFACTS_DIR)"
	$(COPY_SOURCE) "$(ARTIFACTS_DIR)" $(EXCLUDE)
	if [ -f requirements.txt ]; then $(PIP_INSTALL) "$(ARTIFACTS_DIR)" -r requirements.txt; fi
	$(COMPILE) "$(ARTIFACTS_DIR)"

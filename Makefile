# Two commands on a fresh machine: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3
BOOT   := .venv-tools
NOX    := $(BOOT)/bin/nox

.PHONY: demo demo-synthetic test lint test-core test-trainer test-verl test-openrlhf clean

$(NOX):
	$(PYTHON) -m venv $(BOOT)
	$(BOOT)/bin/python -m pip install -qq "nox>=2024.4"  # -qq: errors only (no index-location warnings)

demo: $(NOX)
	$(NOX) -s demo

demo-synthetic: $(NOX)
	$(NOX) -s demo-synthetic

test: $(NOX)
	$(NOX) -s lint core trainer verl openrlhf

lint: $(NOX)
	$(NOX) -s lint

test-core: $(NOX)
	$(NOX) -s core

test-trainer: $(NOX)
	$(NOX) -s trainer

test-verl: $(NOX)
	$(NOX) -s verl

test-openrlhf: $(NOX)
	$(NOX) -s openrlhf

clean:
	rm -rf $(BOOT) .nox build *.egg-info src/*.egg-info

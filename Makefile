# The README's two set-up commands: `make demo` (install, then run pragma on a bundled example)
# and `make test` (install, then every test). Both create .venv on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# Every pip package of the repository, installed editable. Plugins and the knowledge builder join
# this list as they arrive.
PACKAGES := .[test,docs]
STAMP  := $(VENV)/.installed

.PHONY: demo test install clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt $(foreach p,$(PACKAGES),-e "$(p)")
	touch $@

demo: $(STAMP)
	$(BIN)/pragma plugins
	$(BIN)/pragma tasks examples/tasks

test: $(STAMP)
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) site .pytest_cache

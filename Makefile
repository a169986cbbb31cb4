# The README's two set-up commands: `make demo` (install, then run pragma on a bundled example)
# and `make test` (install, then every test). Both create .venv on first use. Maintainers rebuild
# the shipped metric compendium from the docs mirror with `make compendium`.

PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
PIP     := -m pip install --quiet --disable-pip-version-check -c constraints.txt
# Every pip package of the repository: core with its test and docs tools, each profiler plugin.
PLUGINS := $(patsubst plugins/%/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))
STAMP   := $(VENV)/.installed
# One more environment per plugin, holding only core and that plugin: a plugin must not lean on
# another being installed.
PLUGIN_STAMPS := $(foreach p,$(PLUGINS),.venvs/$(p)/.installed)

.PHONY: demo test test-core test-plugins test-builder install compendium clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile $(wildcard plugins/*/pyproject.toml) knowledge_builder/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python $(PIP) -e ".[test,docs,bench]" $(foreach p,$(PLUGINS),-e plugins/$(p)) -e knowledge_builder
	touch $@

.venvs/%/.installed: plugins/%/pyproject.toml pyproject.toml constraints.txt
	$(PYTHON) -m venv .venvs/$*
	.venvs/$*/bin/python $(PIP) -e ".[test]" -e plugins/$*
	touch $@

# The demo: pragma optimizes a bundled example with the offline agents (no model, no key, no
# network), printing each attempt and the final table, then the Conductor's reasoning.
DEMO_TASK := examples/tasks/level1/1_GELUTanh.py
DEMO_RUNS := runs/demo

demo: $(STAMP)
	$(BIN)/pragma optimize $(DEMO_TASK) --set batch_size=256 --max-attempts 6 --reps 30 --runs-dir $(DEMO_RUNS)
	$(BIN)/pragma trace $$(ls -td $(DEMO_RUNS)/*/ | head -1)

test: test-plugins test-builder test-core

test-core: $(STAMP)
	$(BIN)/python -m pytest

# Each plugin's tests twice: alone with core, then beside every other plugin (in .venv).
test-plugins: $(STAMP) $(PLUGIN_STAMPS)
	@set -e; for p in $(PLUGINS); do \
	  echo "== pragma-$$p alone with core"; .venvs/$$p/bin/python -m pytest -q -p no:cacheprovider plugins/$$p/tests; \
	  echo "== pragma-$$p with every plugin"; $(BIN)/python -m pytest -q -p no:cacheprovider plugins/$$p/tests; \
	done

# The knowledge builder's tests, beside every profiler plugin (it reads their doc sources).
test-builder: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider knowledge_builder/tests

# The compendium pragma-core ships, rebuilt offline from the profilers' documentation mirror.
DOCS_MIRROR ?= ../shared/docs-mirror
compendium: $(STAMP)
	$(BIN)/pragma-kb build --offline-mirror $(DOCS_MIRROR) --out build/knowledge --no-index
	cp build/knowledge/compendium/*.json pragma_core/knowledge/data/

clean:
	rm -rf $(VENV) .venvs site .pytest_cache build

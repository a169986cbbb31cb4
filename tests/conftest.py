"""Shared fixtures: one cache per test run, the bundled example tasks, a clean plugin registry, fake
installed plugins."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
from pathlib import Path

import pytest

from pragma_core.plugin_api.registry import reset_registry

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "tasks"
KERNELBENCH = Path(os.environ.get("PRAGMA_KERNELBENCH") or REPO.parent / "shared" / "kernelbench")
"""The real KernelBench task files (``shared/kernelbench`` beside the clone, or ``$PRAGMA_KERNELBENCH``):
read there, never copied into the repository."""

# One knowledge index for the whole session, child processes included: tests that give each run a
# cache folder of its own would otherwise embed the compendium again for every run.
os.environ.setdefault("PRAGMA_KNOWLEDGE_DIR", str(REPO / "build" / "test-knowledge"))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """``--dist loadgroup`` sends every test marked ``xdist_group("name")`` to one worker by the
    ``@name`` that pytest-xdist appends to its node id. xdist 3.8 appends it to ``item._nodeid``,
    which pytest 9 no longer reads (a node's id is ``item._id``): the groups were silently ignored
    and each worker made the group's module fixture itself. Appended here where xdist did not."""
    if not getattr(config.option, "loadgroup", False):
        return
    for item in items:
        groups = sorted(
            {
                str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
                for mark in item.iter_markers("xdist_group")
            }
        )
        suffix = f"@{'_'.join(groups)}"
        if groups and not item.nodeid.endswith(suffix):
            from _pytest.nodeid import NodeId  # pytest 9's node ids; earlier ones take xdist's suffix

            item._id = NodeId.parse(item.nodeid + suffix)


def _run_folder(tmp_path_factory) -> Path:
    """The test run's own folder: each xdist worker's base folder sits in it."""
    run_folder = tmp_path_factory.getbasetemp()
    return run_folder.parent if os.environ.get("PYTEST_XDIST_WORKER") else run_folder


TEST_CACHE_VARIABLE = "PRAGMA_TEST_CACHE_DIR"
"""A folder for the run's pragma cache instead of one in the run's own folder: ``make test-core``
gives its two runs (the tests two at a time, then the serial ones) one, emptied first."""


@pytest.fixture(scope="session", autouse=True)
def _one_cache_per_run(tmp_path_factory):
    """One pragma cache folder for the whole run, child processes and both xdist workers included,
    never the user's: a kernel built by one test is reused by every later one, and the machine's
    peaks are measured once per thread count (before the first test, or on first need:
    ``_machine_peaks_measured_first``), not once per test, module or worker. The workers share it
    as two pragma processes share a user's cache (its writers lock and rename). With
    ``$PRAGMA_TEST_CACHE_DIR`` the folder is that one, which ``make test-core`` empties and hands
    to both of its runs: the serial tests, run alone after the others, find the peaks measured and
    the kernels built (measuring the peaks took 44 s of their 167 on a loaded machine). Tests about
    the cache itself give themselves a folder of their own."""
    patch = pytest.MonkeyPatch()
    shared = os.environ.get(TEST_CACHE_VARIABLE)
    cache = Path(shared) if shared else _run_folder(tmp_path_factory) / "pragma-cache"
    cache.mkdir(parents=True, exist_ok=True)
    patch.setenv("PRAGMA_CACHE_DIR", str(cache))
    yield cache
    patch.undo()


@pytest.fixture(scope="session", autouse=True)
def _machine_peaks_measured_first(tmp_path_factory, _one_cache_per_run, _one_timing_slot_per_test_process):
    """With two test workers (``-n 2``), the machine's peaks at one thread and at all of them are
    measured into the run's cache before any test, by the first worker while the other waits for
    it: on a quiet machine. Measured on first need instead, they were measured beside the other
    worker's tests, low, and a later process's quick check read 15% above them and measured them
    again (seven times in one run of the core tests, 6-13 s each). One process alone (``make
    check``, one file) measures them on first need, as a user's pragma does."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import fcntl

    from pragma_core.machine.roofline import machine_peaks, peaks_cache_path

    with open(_run_folder(tmp_path_factory) / "peaks-measured-first.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        for threads in sorted({1, len(os.sched_getaffinity(0))}):
            if not peaks_cache_path(threads).exists():  # measured by the other worker meanwhile
                machine_peaks(threads)


@pytest.fixture(scope="session", autouse=True)
def _one_timing_slot_per_test_process(tmp_path_factory):
    """The timing slot of each test process (and the processes its tests start) is its own: in use
    in every test, never making a neighbouring test process wait (those time nothing that is
    checked; the tests that do run alone, marked serial)."""
    patch = pytest.MonkeyPatch()
    patch.setenv("PRAGMA_TIMING_SLOT", str(tmp_path_factory.mktemp("timing-slot") / "slot.lock"))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _fresh_registry(monkeypatch):
    """Each test sees plugins loaded anew, with no plugin switches from the caller's shell."""
    for variable in ("PRAGMA_STRICT_PLUGINS", "PRAGMA_LOAD_PLUGINS", "PRAGMA_DISABLE_PLUGINS", "PRAGMA_DEBUG"):
        monkeypatch.delenv(variable, raising=False)
    reset_registry()
    yield
    reset_registry()


@pytest.fixture(scope="session")
def kernelbench() -> Path:
    """The KernelBench tree; the tests that read it are skipped, saying where it was looked for, without it."""
    if not (KERNELBENCH / "level1").is_dir():
        pytest.skip(f"the KernelBench task files are not at {KERNELBENCH}; set PRAGMA_KERNELBENCH")
    return KERNELBENCH


@pytest.fixture
def examples() -> Path:
    return EXAMPLES


class PluginSite:
    """A folder on sys.path holding plugin modules and their ``.dist-info`` metadata.

    importlib.metadata finds these exactly as it finds pip-installed distributions, so the registry
    is tested against real entry points, not mocks.
    """

    def __init__(self, root: Path):
        self.root = root

    def entry_points(self) -> list:
        """The pragma entry points of the distributions in this folder only (not the installed ones)."""
        from importlib import metadata

        return [
            ep
            for dist in metadata.distributions(path=[str(self.root)])
            for ep in dist.entry_points
            if ep.group == "pragma"
        ]

    def add(
        self,
        module: str,
        source: str,
        *,
        entry_point: str | None = None,
        distribution: str | None = None,
        version: str = "1.0",
    ) -> None:
        (self.root / f"{module}.py").write_text(textwrap.dedent(source))
        distribution = distribution or module.replace("_", "-")
        info = self.root / f"{distribution.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(f"[pragma]\n{entry_point or module} = {module}\n")


@pytest.fixture
def plugin_site(tmp_path, monkeypatch) -> PluginSite:
    root = tmp_path / "site"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    site = PluginSite(root)
    yield site
    for name in [
        name
        for name, module in sys.modules.items()
        if getattr(module, "__file__", None) and str(root) in str(module.__file__)
    ]:
        del sys.modules[name]


def pytest_ignore_collect(collection_path, config):
    """The tests of a real local model (``test_local_model.py``, marked ``model``) are collected only
    when asked for by marker (``make test-model``: ``-m model``): they need a model server whose
    build takes many minutes, and take minutes themselves."""
    if collection_path.name == "test_local_model.py" and "model" not in (config.getoption("markexpr") or ""):
        return True
    return None

"""The conformance suite for profiler plugins: subclass it in your plugin's tests.

    # plugins/myprof/tests/test_conformance.py
    from pathlib import Path
    from pragma_core.testing import ProfilerPluginTests

    class TestMyProf(ProfilerPluginTests):
        profiler_name = "myprof"
        fixtures = sorted((Path(__file__).parent / "data").glob("*.txt"))   # real tool output

pytest collects the inherited tests: the plugin is installed and registers the profiler through its
entry point; the record is complete; the probe answers fast and says why when it cannot run; every
real output parses into finite metrics of that profiler; output it cannot read raises
:class:`~pragma_core.errors.ProfileParseError`.

Where the tool runs here (the probe says so; elsewhere these skip with the probe's reason),
:class:`ProfilerContractTests`, which the suite includes, checks the contract of ``collect``: a
program that hangs is stopped at the target's ``timeout_s`` and reported as timed out, with no
process of the run left alive; the target's ``env`` is exactly the program's environment; and every
requested metric, one the tool does not know included, is collected or in ``not_collected`` with
a reason. Subclass :class:`ProfilerContractTests` alone to run those checks against a stand-in for
a tool this machine lacks. The helpers below (:func:`hanging_program`, :func:`environment_program`,
:func:`survivors`) serve plugin tests of their own too.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from ..errors import ProfileParseError, ProfilerUnavailable
from ..plugin_api.components import DEVICE_KINDS, Availability, Profiler, ProfileTarget
from ..plugin_api.registry import PluginRegistry
from ..records import Metric, Task

__all__ = [
    "ENV_ABSENT",
    "ENV_PROBE",
    "RUN_MARKER",
    "UNREADABLE_OUTPUTS",
    "ProfilerContractTests",
    "ProfilerPluginTests",
    "environment_program",
    "hanging_program",
    "survivors",
]

UNREADABLE_OUTPUTS = ("", "this is not the output of any profiler\n", "\x00\x01\x02 binary junk")
"""Inputs no parser should mistake for its tool's output."""

RUN_MARKER = "PRAGMA_CONTRACT_RUN"
"""Set in a target's ``env`` so that :func:`survivors` finds every process of that run."""

ENV_PROBE = "PRAGMA_CONTRACT_PROBE"
"""A variable the contract puts in the target's ``env``: the program must see it."""

ENV_ABSENT = "PRAGMA_CONTRACT_ABSENT"
"""A variable the contract puts in ``os.environ`` only: the program must not see it."""

_CONTRACT_TASK = Task(name="contract", source="# the profiler contract's stand-in task\n", category="other")


def _shell() -> str:
    return shutil.which("sh") or "/bin/sh"


def hanging_program(pid_file: Path) -> tuple[str, ...]:
    """A program that never ends: a shell that writes its PID to ``pid_file``, starts a ``sleep``
    child (a grandchild of the tool that runs the shell) and writes its PID too, then waits."""
    pids = shlex.quote(str(pid_file))
    return (_shell(), "-c", f"echo $$ > {pids}; sleep 300 & echo $! >> {pids}; wait")


def environment_program(out_file: Path) -> tuple[str, ...]:
    """A program that writes the values of :data:`ENV_PROBE` and :data:`ENV_ABSENT` to ``out_file``,
    one a line, ``<unset>`` for a variable its environment lacks."""
    out = shlex.quote(str(out_file))
    return (_shell(), "-c", f'printf \'%s\\n%s\\n\' "${{{ENV_PROBE}-<unset>}}" "${{{ENV_ABSENT}-<unset>}}" > {out}')


def survivors(marker: str, *, within_s: float = 2.0) -> list[int]:
    """PIDs of live processes whose environment holds ``RUN_MARKER=marker``, once SIGKILLs sent
    before the call have had ``within_s`` seconds to land (zombies count as gone)."""
    wanted = f"{RUN_MARKER}={marker}".encode()
    deadline = time.monotonic() + within_s
    while True:
        found = [pid for pid in _live_pids() if wanted in _environment_of(pid)]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _live_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state not in ("Z", "X"):
                pids.append(int(entry.name))
    return pids


def _environment_of(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


class ProfilerContractTests:
    """Checks of ``collect`` against the profiler contract, run where the tool runs.

    ``contract_target`` builds the target the checks profile; override it when your tool needs
    more than a plain program (its device is the profiler's first).
    """

    profiler_name: ClassVar[str]
    contract_timeout_s: ClassVar[float] = 2.0
    """The ``timeout_s`` given with the hanging program."""
    contract_slack_s: ClassVar[float] = 10.0
    """How much longer than ``contract_timeout_s`` collect may take to come back."""

    @pytest.fixture
    def profiler(self) -> Profiler:
        return PluginRegistry().profiler(self.profiler_name)

    @pytest.fixture
    def runnable(self, profiler: Profiler) -> Profiler:
        """The profiler, where its probe says it runs here; the test skips with the reason otherwise."""
        availability = profiler.probe()
        if not availability.available:
            pytest.skip(f"{self.profiler_name} cannot run here: {availability.reason}")
        return profiler

    def contract_target(
        self, profiler: Profiler, out_dir: Path, program: tuple[str, ...], env: Mapping[str, str], timeout_s: float
    ) -> ProfileTarget:
        """``program`` as both the replay and the Python command, on the profiler's first device."""
        return ProfileTarget(
            task=_CONTRACT_TASK,
            candidate=None,
            out_dir=out_dir,
            device=profiler.devices[0],
            python_argv=program,
            replay_argv=program,
            env=env,
            timeout_s=timeout_s,
        )

    @pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finding survivors needs /proc")
    def test_a_hanging_program_is_stopped_at_the_timeout(self, runnable: Profiler, tmp_path: Path) -> None:
        marker = uuid.uuid4().hex
        timeout = self.contract_timeout_s
        program = hanging_program(tmp_path / "pids.txt")
        env = {**os.environ, RUN_MARKER: marker}
        target = self.contract_target(runnable, tmp_path / "out", program, env, timeout)
        started = time.monotonic()
        try:
            profile = runnable.collect(target, runnable.default_metrics)
        except ProfilerUnavailable as error:
            said = [str(error)]
        else:
            assert profile.metrics == (), "a run killed at its timeout has nothing to report"
            missing = set(runnable.default_metrics) - set(profile.not_collected)
            assert not missing, f"requested, neither collected nor explained: {missing}"
            said = [*profile.notes, *profile.not_collected.values()]
        elapsed = time.monotonic() - started
        assert elapsed < timeout + self.contract_slack_s, f"collect came back after {elapsed:.1f} s"
        phrase = f"did not finish within {timeout:g} s"
        assert any(phrase in text for text in said), f"no {phrase!r} in {said}"
        assert survivors(marker) == [], "processes of the run outlived collect"

    def test_the_targets_environment_is_the_programs(
        self, runnable: Profiler, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(ENV_ABSENT, "only in the environment of the process calling collect")
        probe = uuid.uuid4().hex
        env = {**{k: v for k, v in os.environ.items() if k != ENV_ABSENT}, ENV_PROBE: probe}
        seen = tmp_path / "out" / "environment.txt"  # a profiled program may write only its out_dir
        target = self.contract_target(runnable, tmp_path / "out", environment_program(seen), env, 300.0)
        runnable.collect(target, runnable.default_metrics)
        assert seen.read_text().splitlines() == [probe, "<unset>"]

    def test_every_requested_metric_is_collected_or_explained(self, runnable: Profiler, tmp_path: Path) -> None:
        unknown = "pragma_contract_no_such_metric"
        requested = [*runnable.default_metrics, unknown]
        program = (_shell(), "-c", "exit 0")
        target = self.contract_target(runnable, tmp_path / "out", program, dict(os.environ), 300.0)
        profile = runnable.collect(target, requested)
        collected = {metric.name for metric in profile.metrics}
        unexplained = [name for name in requested if name not in collected and not profile.not_collected.get(name)]
        assert not unexplained, f"requested, neither collected nor explained: {unexplained}"
        assert unknown not in collected


class ProfilerPluginTests(ProfilerContractTests):
    """Inherit, set ``profiler_name`` and ``fixtures`` (real outputs of the tool)."""

    profiler_name: ClassVar[str]
    fixtures: ClassVar[list[Path]] = []
    probe_seconds: ClassVar[float] = 10.0

    def test_registered_through_an_entry_point(self) -> None:
        registry = PluginRegistry()
        owners = [p for p in registry.plugins() if self.profiler_name in p.registers.get("profilers", ())]
        assert owners, f"no installed plugin registers a profiler named {self.profiler_name!r}"
        assert not owners[0].builtin and owners[0].distribution, "register it from an installed distribution"
        failures = [f for f in registry.failures() if f.name == owners[0].name]
        assert not failures, failures

    def test_record_is_complete(self, profiler: Profiler) -> None:
        assert profiler.name == self.profiler_name
        assert profiler.devices and set(profiler.devices) <= set(DEVICE_KINDS)
        assert profiler.default_metrics, "say which metrics to collect by default"
        assert profiler.description
        assert profiler.doc_sources and all(url.startswith("https://") for url in profiler.doc_sources)
        for name, formula in profiler.formulas.items():  # the compendium documents these by formula
            assert name.strip() and isinstance(formula, str) and formula.strip(), (name, formula)

    def test_probe_is_fast_and_explains_itself(self, profiler: Profiler) -> None:
        started = time.monotonic()
        availability = profiler.probe()
        assert time.monotonic() - started < self.probe_seconds
        assert isinstance(availability, Availability)
        if not availability.available:
            assert len(availability.reason) > 10 and "\n" not in availability.reason

    def test_fixtures_exist(self) -> None:
        assert self.fixtures, "give at least one real output of the tool"
        assert all(Path(path).is_file() for path in self.fixtures)

    def test_every_fixture_parses(self, profiler: Profiler) -> None:
        for path in self.fixtures:
            metrics = profiler.parse(Path(path).read_text(encoding="utf-8", errors="replace"))
            assert metrics, f"{path.name}: no metrics"
            for metric in metrics:
                assert isinstance(metric, Metric) and metric.profiler == self.profiler_name
                assert math.isfinite(metric.value), f"{path.name}: {metric}"

    def test_unreadable_output_is_a_clear_error(self, profiler: Profiler) -> None:
        for junk in UNREADABLE_OUTPUTS:
            with pytest.raises(ProfileParseError):
                profiler.parse(junk)

"""The conformance suite for backend plugins: subclass it in your plugin's tests.

    # my-backend/tests/test_conformance.py
    from pathlib import Path
    from pragma_core.testing import BackendPluginTests

    HERE = Path(__file__).parent

    class TestMyBackend(BackendPluginTests):
        backend_name = "my-backend"
        task_path = HERE / "tasks" / "relu.py"            # a KernelBench-format task
        sizes = {"batch_size": 4}                         # small: the suite runs it several times
        candidate_path = HERE / "candidates" / "relu.py"  # a correct candidate for it
        broken_path = HERE / "candidates" / "broken.py"   # one whose kernel does not build

pytest collects the inherited tests: the backend is registered from an installed distribution
through its entry point; the record is complete (a guide that shows a ``ModelNew``, a kernel hint,
an execution device, an environment of strings); the probe answers fast and says why when it
cannot run; it recognizes its own candidate. Where the probe says it runs here (elsewhere these
skip with its reason): in a child process, the backend's own loader builds the candidate and its
evidence counts the kernels a forward launches, and nothing when no forward runs; the verifier
finds the candidate correct (timed, unless the backend refuses timing here, and then the verdict
says so); the same module with a forward that runs the reference's PyTorch code instead of its
kernels is rejected; a candidate that does not build is a ``compile_error``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from ..plugin_api.components import DEVICE_KINDS, Availability, Backend
from ..plugin_api.registry import PluginRegistry
from ..records import Candidate, VerdictStatus

__all__ = ["BackendPluginTests"]


class BackendPluginTests:
    """Inherit, set ``backend_name``, ``task_path``, ``sizes``, ``candidate_path`` and ``broken_path``."""

    backend_name: ClassVar[str]
    task_path: ClassVar[Path]
    sizes: ClassVar[dict[str, Any]] = {}
    candidate_path: ClassVar[Path]
    broken_path: ClassVar[Path | None] = None
    probe_seconds: ClassVar[float] = 10.0
    child_timeout_s: ClassVar[float] = 600.0
    builtin: ClassVar[bool] = False
    """True only for pragma-core's own backends, which register as built-in plugins."""

    @pytest.fixture
    def backend(self) -> Backend:
        return PluginRegistry().backend(self.backend_name)

    @pytest.fixture
    def runnable(self, backend: Backend) -> Backend:
        """The backend, where its probe says it runs here; the test skips with the reason otherwise."""
        availability = backend.probe()
        if not availability.available:
            pytest.skip(f"{self.backend_name} cannot run here: {availability.reason}")
        return backend

    def _candidate(self, path: Path | None = None) -> Candidate:
        return Candidate(
            source=Path(path or self.candidate_path).read_text(encoding="utf-8"), backend=self.backend_name
        )

    def _task(self) -> Any:
        from ..tasks.loading import load_task

        return load_task(self.task_path, dict(self.sizes))

    def test_registered_through_an_entry_point(self) -> None:
        registry = PluginRegistry()
        owners = [p for p in registry.plugins() if self.backend_name in p.registers.get("backends", ())]
        assert owners, f"no installed plugin registers a backend named {self.backend_name!r}"
        if self.builtin:
            assert owners[0].builtin
        else:
            assert not owners[0].builtin and owners[0].distribution, "register it from an installed distribution"
        failures = [f for f in registry.failures() if f.name == owners[0].name]
        assert not failures, failures

    def test_record_is_complete(self, backend: Backend) -> None:
        assert backend.name == self.backend_name
        assert backend.description, "say in one line what kernels it runs"
        assert "ModelNew" in backend.guide and "```" in backend.guide, "the guide shows a whole candidate"
        assert len(backend.kernel_hint) > 10, "say how this backend's kernels are run (the rejection message)"
        assert backend.execution_device() in DEVICE_KINDS
        environment = backend.child_environment(Path("/nonexistent/build"))
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in environment.items())
        assert isinstance(backend.timing_refusal(), str)

    def test_probe_is_fast_and_explains_itself(self, backend: Backend) -> None:
        started = time.monotonic()
        availability = backend.probe()
        assert time.monotonic() - started < self.probe_seconds
        assert isinstance(availability, Availability)
        if not availability.available:
            assert len(availability.reason) > 10 and "\n" not in availability.reason

    def test_recognizes_its_own_candidate(self, backend: Backend) -> None:
        assert backend.recognizes(self._candidate().source)

    def test_evidence_counts_the_kernels_a_forward_runs(self, runnable: Backend, tmp_path: Path) -> None:
        # In a child process: candidate code never runs in the test's own process.
        report = tmp_path / "report.json"
        script = textwrap.dedent(
            f"""
            import json, os, sys
            from pathlib import Path
            from pragma_core.backends import torch_device
            from pragma_core.plugin_api.registry import get_registry
            from pragma_core.records import Candidate
            from pragma_core.tasks.loading import load_task
            from pragma_core.verifier.inputs import construct, make_inputs

            backend = get_registry().backend({self.backend_name!r})
            os.environ.update(backend.child_environment(Path({str(tmp_path)!r})))
            evidence = backend.evidence()
            evidence.install()
            task = load_task(Path({str(self.task_path)!r}), {dict(self.sizes)!r})
            namespace = {{"__name__": "pragma_task"}}
            exec(compile(task.source, "task.py", "exec"), namespace)
            work = Path({str(tmp_path)!r}) / "work"
            work.mkdir()
            source = Path({str(self.candidate_path)!r}).read_text()
            model_new = backend.load(Candidate(source=source, backend={self.backend_name!r}), work)
            device = torch_device(backend.execution_device())
            model = construct(namespace, model_new).to(device)
            inputs = [x.to(device) if hasattr(x, "to") else x for x in make_inputs(namespace, 1)]
            idle_before = evidence.count()
            idle_after = evidence.count()
            model(*inputs)
            Path({str(report)!r}).write_text(json.dumps([idle_before, idle_after, evidence.count()]))
            """
        )
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=self.child_timeout_s
        )
        assert done.returncode == 0, done.stderr[-3000:]
        idle_before, idle_after, after_forward = json.loads(report.read_text())
        assert idle_after == idle_before, "the count moved with no forward"
        assert after_forward > idle_before, "a forward that ran the candidate's kernels counted none"

    def test_a_correct_candidate_is_correct(self, runnable: Backend) -> None:
        from ..verifier import VerifySettings, verify

        verdict = verify(self._task(), self._candidate(), VerifySettings(reps=10, warmup=1, timing_budget_s=10))
        assert verdict.status is VerdictStatus.CORRECT, verdict.message
        refusal = runnable.timing_refusal()
        if refusal:
            assert verdict.speedup is None and any(refusal in note for note in verdict.notes)
        else:
            assert verdict.speedup is not None

    def test_a_forward_running_pytorch_instead_is_rejected(self, runnable: Backend) -> None:
        from ..verifier import VerifySettings, verify

        # The same module, whose forward runs the reference's own code: no kernel of the backend.
        source = self._candidate().source + textwrap.dedent(
            """

            def _without_kernels(self, *args):
                return _REFERENCE.forward(self, *args)


            ModelNew.forward = _without_kernels
            """
        )
        task = self._task()
        source += f"\n_REFERENCE_SOURCE = {task.source!r}\n" + textwrap.dedent(
            """
            _namespace = {"__name__": "reference"}
            exec(compile(_REFERENCE_SOURCE, "reference.py", "exec"), _namespace)
            _REFERENCE = _namespace["Model"]
            """
        )
        verdict = verify(task, Candidate(source=source, backend=self.backend_name), VerifySettings(time=False))
        assert verdict.status is VerdictStatus.REJECTED, verdict.message

    def test_a_broken_kernel_is_a_compile_error(self, runnable: Backend) -> None:
        if self.broken_path is None:
            pytest.skip("no broken candidate given (broken_path)")
        from ..verifier import VerifySettings, verify

        verdict = verify(self._task(), self._candidate(self.broken_path), VerifySettings(time=False))
        assert verdict.status is VerdictStatus.COMPILE_ERROR, verdict.message

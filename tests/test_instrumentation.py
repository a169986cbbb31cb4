"""The sandbox child's monitors, in process: the operator recorder sees PyTorch work the dispatch
modes are blind to, and the audit hook blames the candidate's own code, not pragma's or torch's."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time

import torch
from torch.utils._python_dispatch import _disable_current_modes

from pragma_core.verifier.instrumentation import (
    POISON_VALUES,
    IdentityGuard,
    OperatorRecorder,
    background_activity,
    child_processes,
    hooks_added,
)

from .conftest import REPO


def test_a_hook_left_on_every_module_or_a_mode_left_on_the_stack_is_named_by_the_recorder():
    """Global module hooks and torch-function modes run inside the harness's reference calls
    (catalogue 28): the recorder names one left in place after a candidate's call, and removing it
    clears the finding."""
    from torch.overrides import TorchFunctionMode

    assert hooks_added() == []
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, output: None)
    try:
        assert hooks_added() == ["torch.nn.modules.module._global_forward_hooks"]
        recorder = OperatorRecorder()
        with recorder:
            pass
        assert "_global_forward_hooks" in recorder.disabled
    finally:
        handle.remove()
    mode = TorchFunctionMode()
    mode.__enter__()
    try:
        assert hooks_added() == ["a torch-function mode"]
    finally:
        mode.__exit__(None, None, None)
    assert hooks_added() == []


def test_the_recorder_counts_compute_but_not_allocation_views_or_reads():
    recorder = OperatorRecorder()
    x = torch.randn(64)
    with recorder:
        out = torch.empty_like(x)
        out.copy_(x)
        out.view(8, 8).t().contiguous()
        x[3].item()
    assert recorder.compute_ops == {}
    with recorder:
        torch.nn.functional.gelu(x)
    assert recorder.compute_ops == {"gelu": 1}


def test_the_recorder_sees_through_disabled_dispatch_modes():
    recorder = OperatorRecorder()
    x = torch.randn(8)
    with recorder:
        with _disable_current_modes():
            torch.relu(x)
    assert recorder.compute_ops == {"relu": 1}


def test_stopping_the_profiler_inside_a_block_is_noticed():
    recorder = OperatorRecorder()
    with recorder:
        torch.autograd.profiler._disable_profiler()
    assert "switched off" in recorder.disabled


def test_the_audit_hook_blames_the_candidate_and_not_the_machinery(tmp_path):
    """Run in a child: an audit hook cannot be removed from the process that installs it."""
    allowed = tmp_path / "work"
    allowed.mkdir()
    outside = tmp_path / "outside.txt"
    candidate = "\n".join(
        [
            "import gc",
            "from pathlib import Path",
            f"Path({str(allowed / 'scratch.txt')!r}).write_text('mine')",
            "gc.get_objects()",
            "try:",
            f"    Path({str(outside)!r}).write_text('escaped')",
            "except OSError:",
            "    pass",
        ]
    )
    code = f"""
        import json
        from pathlib import Path
        from pragma_core.verifier.instrumentation import CandidateAudit
        audit = CandidateAudit(writable=[Path({str(allowed)!r})])
        audit.install()
        exec(compile({candidate!r}, "candidate.py", "exec"), {{}})
        Path({str(tmp_path / "pragma_wrote_this.txt")!r}).write_text("not the candidate")  # not blamed
        print(json.dumps(audit.take()))
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    findings = json.loads(done.stdout.strip().splitlines()[-1])
    assert [f["check"] for f in findings] == ["forbidden-construct", "sandbox-escape"]
    assert "line 4" in findings[0]["message"] and "gc.get_objects" in findings[0]["message"]
    assert str(outside) in findings[1]["message"] and "line 6" in findings[1]["message"]


def test_torchs_own_wrapping_of_a_function_is_not_a_patch_but_a_lookalike_wrapper_is():
    import functools

    original = torch.random.manual_seed
    namespace = {"manual_seed": original}
    guard = IdentityGuard({"torch": namespace})
    namespace["manual_seed"] = torch._disable_dynamo(original)  # what importing torch._dynamo does
    assert guard.changes() == []

    @functools.wraps(original)
    def lookalike(seed):
        return original(0)  # every input predictable

    namespace["manual_seed"] = lookalike
    assert guard.changes() == ["torch.manual_seed"]


def test_an_output_written_late_is_background_work_even_past_the_settle_window():
    """A kernel that returns at once and fills its output from a thread the machine delays past the
    settle window is caught writing late, not taken for one that never writes: outputs that still
    hold the poison are watched longer."""
    for poison in POISON_VALUES:
        out = torch.full((1000,), poison)

        def write_later(out=out):
            time.sleep(0.15)
            out.fill_(1.0)

        writer = threading.Thread(target=write_later)
        threads, children = threading.active_count(), child_processes()  # a test worker may have its own
        writer.start()
        found = background_activity(
            [out], threads_before=threads, children_before=children, settle_s=0.02, poison=poison
        )
        writer.join()
        assert found is not None and found[0] == "background-work" and "output 0 changed" in found[1], found

    written = torch.ones(1000)  # finished when forward returned: nothing found
    quiet = background_activity(
        [written],
        threads_before=threading.active_count(),
        children_before=child_processes(),
        settle_s=0.02,
        poison=POISON_VALUES[0],
    )
    assert quiet is None

"""Building a round's candidates ahead of their verifications: at once, each in a sandboxed child,
into the candidate's own build folder, where its verification finds the kernels built."""

from __future__ import annotations

import time
import uuid

from pragma_core import Candidate, VerdictStatus, load_task
from pragma_core.sandbox.child_run import candidate_build_dir
from pragma_core.verifier import VerifySettings, verify
from pragma_core.verifier.build_ahead import BuildsAhead

from .conftest import EXAMPLES

GELU = load_task(EXAMPLES / "level1" / "1_GELUTanh.py", sizes={"batch_size": 16, "dim": 1024})
FAST = (EXAMPLES.parent / "candidates" / "1_GELUTanh_fast.py").read_text()
SETTINGS = VerifySettings(reps=10, threads=1).with_threads()[0]


def unique(source: str) -> str:
    """The candidate with a kernel no cache holds yet, so it must be compiled."""
    return source.replace("#include <cmath>", f"#include <cmath>\n// {uuid.uuid4()}", 1)


def built(source: str) -> dict[str, int]:
    """The libraries in the candidate's build folder, with their modification times."""
    folder = candidate_build_dir(Candidate(source=source, backend="cpu-cpp"))
    return {str(path): path.stat().st_mtime_ns for path in folder.rglob("*.so")}


def test_two_candidates_build_at_once_and_their_verifications_find_them_built():
    sources = [unique(FAST), unique(FAST)]
    builds = BuildsAhead(GELU, SETTINGS, backend="cpu-cpp")
    try:
        futures = [builds.submit(source) for source in sources]
        (start_a, end_a), (start_b, end_b) = (future.result(timeout=300) for future in futures)
    finally:
        builds.close()
    assert start_a < end_b and start_b < end_a  # the two builds overlapped in time
    libraries = built(sources[0])
    assert libraries and built(sources[1])
    verdict = verify(GELU, Candidate(source=sources[0], backend="cpu-cpp"), SETTINGS)
    assert verdict.status is VerdictStatus.CORRECT, verdict.message
    assert built(sources[0]) == libraries  # nothing compiled again


def test_what_cannot_build_is_left_to_the_verification_to_report():
    broken = unique(FAST).replace("const float k0", "const float k0 = undefined_name, unused", 1)
    builds = BuildsAhead(GELU, SETTINGS, backend="cpu-cpp")
    try:
        assert builds.submit(broken).result(timeout=300) is None
        assert builds.submit("class ModelNew(:\n").result(timeout=60) is None  # no child for a syntax error
        assert builds.submit(lambda: None).result(timeout=60) is None  # a reply that held no module
    finally:
        builds.close()
    verdict = verify(GELU, Candidate(source=broken, backend="cpu-cpp"), SETTINGS)
    assert verdict.status is VerdictStatus.COMPILE_ERROR and "undefined_name" in verdict.message


def test_closing_ends_a_build_still_running():
    """What a Ctrl-C of the loop does: a candidate that takes minutes to import is not waited for."""
    slow = FAST.replace("lib = load_library(", "import time\n\ntime.sleep(300)\nlib = load_library(", 1)
    builds = BuildsAhead(GELU, SETTINGS, backend="cpu-cpp")
    future = builds.submit(slow)
    time.sleep(3)  # its child has started (or is starting) and sleeps in the candidate's import
    builds.close()
    assert future.result(timeout=60) is None  # not the five minutes of its import

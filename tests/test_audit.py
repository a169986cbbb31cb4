"""The verifier's audit: the manifest is whole, and every candidate gets the verdict it must.

Every candidate is a test item of its own (each a sandboxed verification), so the test workers
share them out; a row that differs prints the candidate's verdict beside the expected one.
"""

from __future__ import annotations

import json
import re

import pytest

from pragma_core import VerdictStatus
from pragma_core.audit import CASES, CPU_ENTRIES, KNOWN_CHECKS, AuditCase, AuditError, audit_case, audit_cases
from pragma_core.audit.runner import CANDIDATES, TASKS

from .conftest import REPO


def test_every_case_names_existing_files_and_known_checks():
    names = [case.candidate for case in CASES]
    assert len(names) == len(set(names)), "a candidate is listed twice"
    for case in CASES:
        assert (CANDIDATES / f"{case.candidate}.py").is_file(), case.candidate
        assert (TASKS / f"{case.task}.py").is_file(), case.task
        if case.expected is VerdictStatus.REJECTED:
            assert case.check in KNOWN_CHECKS, (case.candidate, case.check)
        else:
            assert case.check is None, case.candidate
        assert case.honest == (case.expected is VerdictStatus.CORRECT and case.entry is None)
    listed = {path.stem for path in CANDIDATES.glob("*.py")}
    assert listed == set(names), f"candidate files without a case: {sorted(listed - set(names))}"


def test_every_cpu_entry_of_the_catalogue_has_a_cheat_and_there_are_twelve_honest_candidates():
    catalogue = (REPO / "docs" / "integrity.md").read_text()
    numbered = {int(n) for n in re.findall(r"^\| (\d+) \|", catalogue, flags=re.MULTILINE)}
    assert set(CPU_ENTRIES) <= numbered
    cheats = [case for case in CASES if not case.honest]
    assert {case.entry for case in cheats} == set(CPU_ENTRIES)
    for entry in range(20, 28):
        assert sum(case.entry == entry for case in cheats) >= 2, f"entry {entry} needs several cheats"
    assert sum(case.honest for case in CASES) >= 12


def test_honest_candidates_run_no_pytorch_compute_in_forward():
    from pragma_core.verifier.static_checks import read_candidate

    for case in CASES:
        if case.honest:
            findings = read_candidate((CANDIDATES / f"{case.candidate}.py").read_text())
            assert findings.flagged_calls == () and findings.reference_reuse is None, case.candidate


def test_a_filter_that_matches_nothing_is_one_clear_error():
    assert [case.candidate for case in audit_cases("26")] == [c.candidate for c in CASES if c.entry == 26]
    with pytest.raises(AuditError, match="no audit candidate matches 'nothing-like-this'"):
        audit_cases("nothing-like-this")


def _builds_against_torch(case: AuditCase) -> bool:
    source = (CANDIDATES / f"{case.candidate}.py").read_text()
    return "torch/extension.h" in source or "load_inline" in source or "torch=True" in source


BUILDS_FIRST = sorted(CASES, key=lambda case: not _builds_against_torch(case))
"""The candidates that build against torch's headers (tens of seconds each) are handed out first,
so no worker starts one while the other has nothing left to do."""


@pytest.mark.slow
@pytest.mark.parametrize("case", BUILDS_FIRST, ids=lambda case: case.candidate)
def test_every_candidate_gets_its_expected_verdict(case):
    row = audit_case(case)
    assert row.ok, (
        f"{row.candidate} (entry {row.entry or '-'}): expected {row.expected.value}/{row.expected_check or '-'}, "
        f"got {row.status.value if row.status else 'verify() raised'}/{row.check or '-'} in {row.seconds:.1f}s: "
        f"{row.message[:300]}"
    )


def test_pragma_audit_verifies_the_chosen_candidates_side_by_side_and_prints_their_rows(capsys):
    """``pragma audit`` with two workers: a row per chosen candidate, in the manifest's order, and
    exit code 0 when every verdict is as expected."""
    from pragma_core.cli import main

    try:
        main(["audit", "--only", "numpy_matmul", "--workers", "2", "--json"])
        code = 0
    except SystemExit as exit:
        code = int(exit.code or 0)
    rows = json.loads(capsys.readouterr().out)
    assert [row["candidate"] for row in rows] == ["numpy_matmul", "numpy_matmul_helper"]
    assert all(row["ok"] and row["check"] == "library-fallback" for row in rows), rows
    assert code == 0

"""The verifier's audit: the manifest is whole, and every candidate gets the verdict it must.

The whole audit runs once (about 70 candidates, each a sandboxed verification); its table is
printed when a row differs, so a failure names the candidates.
"""

from __future__ import annotations

import re

import pytest

from pragma_core import VerdictStatus
from pragma_core.audit import CASES, CPU_ENTRIES, KNOWN_CHECKS, AuditError, audit_cases, run_audit
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


@pytest.mark.slow
def test_every_candidate_gets_its_expected_verdict():
    rows = run_audit(workers=2)
    wrong = [row for row in rows if not row.ok]
    table = "\n".join(
        f"{row.candidate:34} entry {row.entry or '-':>2}  expected {row.expected.value}/{row.expected_check or '-'}"
        f"  got {row.status.value if row.status else 'verify() raised'}/{row.check or '-'}"
        f"  {row.seconds:5.1f}s  {row.message[:160]}"
        for row in rows
    )
    assert not wrong, f"{len(wrong)} of {len(rows)} rows differ:\n{table}"

"""The verifier's audit: cheating and honest candidates, each with the verdict it must get.

``candidates/`` holds modules written the way an adversarial Coder writes them, one or more for
every CPU-testable entry of the catalogue of ways to fool a harness (``docs/integrity.md``), and
honest but unusual candidates that must pass; ``tasks/`` holds the small KernelBench-format tasks
they run against; :mod:`.manifest` pairs them with the expected status and integrity check;
:func:`run_audit` verifies them all (``pragma audit`` on the command line)::

    from pragma_core.audit import run_audit

    rows = run_audit(only="honest")
    [row.candidate for row in rows if not row.ok]
"""

from __future__ import annotations

from .manifest import CASES, CPU_ENTRIES, KNOWN_CHECKS, AuditCase
from .runner import AUDIT_SETTINGS, AuditError, AuditRow, audit_case, audit_cases, run_audit

__all__ = [
    "AUDIT_SETTINGS",
    "CASES",
    "CPU_ENTRIES",
    "KNOWN_CHECKS",
    "AuditCase",
    "AuditError",
    "AuditRow",
    "audit_case",
    "audit_cases",
    "run_audit",
]

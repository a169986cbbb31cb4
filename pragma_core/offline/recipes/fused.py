"""Level-2 fusion: a GEMM followed by a chain of operators, written as one ``cpu-cpp`` module from
the fusion planner's plan (:mod:`~pragma_core.offline.recipes.fusion`).

The product is the matmul recipe's kernel; with ``fusion`` ``epilogue`` the plan's elementwise DAG
runs in its store (the matmul epilogue). Each stage after it (a reduction over rows, a row-wise
norm or softmax, batch norm over columns, a pool over rows) is one pass over the product's output,
parallel over rows, its tail applied as it stores. With ``fusion`` ``passes`` the product stores
plain (its bias only) and the epilogue and each tail run as their own pass: the simple version a
measured move can return to when the fused one is slower.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..graph import NotRecognized, OpGraph
from ..modules import candidate_module, forward_argument, param_expr
from ..recipe import GenerationContext, Knob, Match
from ._fused_kernels import pointwise_source, stage_source
from .fusion import FusionPlan, Segment, Stage, plan_fusion
from .matmul import MatmulRecipe, epilogue_lines, operand_expression, product_sizes, product_source

__all__ = ["FusedRecipe"]


class FusedRecipe:
    """A GEMM with its epilogue and the stages after it (KernelBench level 2)."""

    family = "fused_gemm"
    knobs: Mapping[str, Knob] = {
        **MatmulRecipe.knobs,
        "fusion": Knob(default="passes", values=("passes", "epilogue"), start="epilogue"),
    }

    def match(self, graph: OpGraph) -> Match | None:
        try:
            plan = plan_fusion(graph)
        except NotRecognized:
            return None
        return Match(family=self.family, summary=f"fused GEMM ({plan.describe()})", facts={"plan": plan.describe()})

    def generate(self, match: Match, knobs: Mapping[str, Any], context: GenerationContext) -> str:
        plan = plan_fusion(context.graph)
        graph = context.graph
        fused = knobs["fusion"] == "epilogue"
        parallel, simd, fast = bool(knobs["parallel"]), bool(knobs["simd"]), bool(knobs["fast_math"])
        facts = dict(plan.main.facts, steps=list(plan.epilogue.steps) if fused else [], extras=[], triangle=None)
        epilogue_extras = list(plan.epilogue.extras) if fused else []
        gemm_extras = ([{**facts["bias"], "broadcast": "column"}] if facts["bias"] else []) + epilogue_extras
        parts = [
            product_source(
                facts,
                gemm_extras,
                graph,
                fast=fast,
                parallel=parallel,
                simd=simd,
                accumulators=int(knobs["accumulators"]),
                block=int(knobs["block"]),
            )
        ]
        if not fused and plan.epilogue.steps:
            parts.append(_tail_function("tail_e", plan.epilogue, graph, fast))
            parts.append(
                pointwise_source(
                    "pointwise_e", _call("tail_e", plan.epilogue), _extra_parameters(plan.epilogue), parallel, simd
                )
            )
        for index, stage in enumerate(plan.stages):
            name = f"tail{index}"
            parts.append(_tail_function(name, stage.tail, graph, fast))
            if fused or not stage.tail.steps:
                parts.append(
                    stage_source(index, stage, _call(name, stage.tail), _extra_parameters(stage.tail), parallel, simd)
                )
            else:
                parts.append(stage_source(index, stage, "v", "", parallel, simd))
                parts.append(
                    pointwise_source(
                        f"pointwise{index}", _call(name, stage.tail), _extra_parameters(stage.tail), parallel, simd
                    )
                )
        flags = (["-ffast-math"] if fast else []) + ([] if simd else ["-fno-tree-vectorize"])
        arguments = [forward_argument(context, i) for i in range(len(graph.inputs))]
        return candidate_module(
            match=match,
            knobs=knobs,
            context=context,
            cpp="\n".join(parts),
            forward_body=_forward(plan, facts, gemm_extras, fused, arguments),
            flags=flags,
        )


def _extra_parameters(segment: Segment) -> str:
    return "".join(f", const float* __restrict__ e{i}" for i in range(len(segment.extras)))


def _call(name: str, segment: Segment) -> str:
    return f"{name}(v, u, j, x" + "".join(f", e{i}" for i in range(len(segment.extras))) + ")"


def _tail_function(name: str, segment: Segment, graph: OpGraph, fast: bool) -> str:
    """The C function applying ``segment`` to one element: value ``v``, stage input ``u``, output
    column ``j``, flat index ``x``."""
    lines = epilogue_lines(segment.steps, list(segment.extras), graph, fast, 0)
    body = "\n".join("    " + line for line in [*lines, "return v;"])
    return f"""static inline __attribute__((always_inline)) float {name}(float v, [[maybe_unused]] float u,
        [[maybe_unused]] int64_t j, [[maybe_unused]] int64_t x{_extra_parameters(segment)}) {{
{body}
}}
"""


def _stage_arguments(stage: Stage) -> str:
    """The stage's own arguments after ``R, N`` (see :func:`stage_source`)."""
    options = stage.options
    if stage.kind == "row_pool":
        return f", {stage.n_out}"
    values = [f"{param_expr(options[name])}.contiguous()" for name in ("weight", "bias") if options.get(name)]
    if stage.kind == "column_norm":
        module = param_expr(options["module"])
        values += [
            f"{module}.running_mean",
            f"{module}.running_var",
            f"{module}.num_batches_tracked",
            f"{module}.training",
            f"-1.0 if {module}.momentum is None else float({module}.momentum)",
        ]
    return "".join(f", {value}" for value in values)


def _forward(
    plan: FusionPlan, facts: Mapping[str, Any], extras: list[dict[str, Any]], fused: bool, arguments: list[str]
) -> str:
    lines = product_sizes(facts, extras, arguments)
    lines.append("R = batch * M")
    stages = plan.stages
    final = str(tuple(plan.out_shape))
    first = "(R, N)" if stages else final
    extra_arguments = "".join(f", e{i}_" for i in range(len(extras)))
    lines += [
        f"h0 = torch.empty({first}, dtype=torch.float32)",
        f"lib.matmul(a_, b_, h0{extra_arguments}, batch, M, N, K)",
    ]
    if not fused and plan.epilogue.steps:
        lines += [
            f"p = torch.empty({first}, dtype=torch.float32)",
            f"lib.pointwise_e(h0, h0, p, h0.numel(), N{_segment_arguments(plan.epilogue, arguments)})",
            "h0 = p",
        ]
    width = "N"
    for index, stage in enumerate(stages):
        shape = final if index == len(stages) - 1 else f"(R, {stage.n_out})"
        tail = _segment_arguments(stage.tail, arguments)
        separate = not fused and stage.tail.steps
        lines.append(f"h{index + 1} = torch.empty({shape}, dtype=torch.float32)")
        own = _stage_arguments(stage)
        lines.append(f"lib.stage{index}(h{index}, h{index + 1}, R, {width}{own}{'' if separate else tail})")
        if separate:
            lines += [
                f"p = torch.empty({shape}, dtype=torch.float32)",
                f"lib.pointwise{index}(h{index + 1}, h{index}, p, p.numel(), {stage.n_out}{tail})",
                f"h{index + 1} = p",
            ]
        width = str(stage.n_out)
    lines.append(f"return h{len(stages)}")
    return "\n".join(lines)


def _segment_arguments(segment: Segment, arguments: list[str]) -> str:
    return "".join(f", {operand_expression(extra, arguments)}.contiguous()" for extra in segment.extras)

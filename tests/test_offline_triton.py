"""The offline Coder's triton backend: for real KernelBench level-1 tasks (and every activation the
elementwise recipe knows) the generated Triton module computes the reference's result.

Generated code never runs in the test process: every module is written to a folder with its task
program, and one child process runs them all under the Triton interpreter (``TRITON_INTERPRET=1``,
CPU tensors) on the task's own inputs, both models built from the same seed and their parameters
drawn alike; the forward runs under the verifier's :class:`ForwardMonitor` (no PyTorch compute,
fresh memory poisoned). A second child, at the same time, compiles a kernel of every shape for an
NVIDIA and an AMD GPU, which needs no GPU. Sizes are small: the interpreter runs each program in
Python.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from pragma_core import load_task
from pragma_core.offline.coder import recognized
from pragma_core.offline.graph import NotRecognized
from pragma_core.offline.knobs import defaults, starting
from pragma_core.offline.modules import read_marker
from pragma_core.offline.recipe import GenerationContext, Match
from pragma_core.offline.recipes.elementwise import UNARY
from pragma_core.offline.triton import TRITON_KNOBS, generate_triton
from pragma_core.offline.triton.elementwise import TL_UNARY
from pragma_core.tasks.loading import task_program
from pragma_core.verifier.static_checks import read_candidate

from .conftest import EXAMPLES, KERNELBENCH, REPO

# One xdist worker runs the whole module (`make test-core`: --dist loadgroup): the module's fixture
# `generated` (every case's module run in a child, some 20 s) is then made once, not once per worker.
pytestmark = pytest.mark.xdist_group("offline_triton")

LEVEL1 = KERNELBENCH / "level1"
DATA = REPO / "tests" / "data" / "offline_tasks"
ROWS = {"batch_size": 4, "dim": 300}  # 300: not a power of two, longer than the smallest block
IMAGES = {"batch_size": 3, "features": 5, "dim1": 12, "dim2": 20}
CUBE = {"batch_size": 4, "dim1": 33, "dim2": 20}

# (case name, task file, size overrides, family): real KernelBench tasks first, then the bundled ones
# that reach the variants KernelBench does not (last-dim reductions, keepdim, prod, learned weights).
FILES: list[tuple[str, Path, dict[str, Any], str]] = [
    *(
        (name, LEVEL1 / f"{name}.py", ROWS, "elementwise")
        for name in (
            "19_ReLU",
            "20_LeakyReLU",
            "21_Sigmoid",
            "22_Tanh",
            "25_Swish",
            "26_GELU_",
            "27_SELU_",
            "28_HardSigmoid",
            "29_Softplus",
            "30_Softsign",
            "31_ELU",
            "32_HardTanh",
            "88_MinGPTNewGelu",
        )
    ),
    ("5_Matrix_scalar_multiplication", LEVEL1 / "5_Matrix_scalar_multiplication.py", {"M": 30, "N": 41}, "elementwise"),
    ("23_Softmax", LEVEL1 / "23_Softmax.py", ROWS, "softmax"),
    ("24_LogSoftmax", LEVEL1 / "24_LogSoftmax.py", ROWS, "softmax"),
    ("34_InstanceNorm", LEVEL1 / "34_InstanceNorm.py", IMAGES, "norm"),
    ("36_RMSNorm_", LEVEL1 / "36_RMSNorm_.py", IMAGES, "norm"),
    ("37_FrobeniusNorm_", LEVEL1 / "37_FrobeniusNorm_.py", IMAGES, "norm"),
    ("38_L1Norm_", LEVEL1 / "38_L1Norm_.py", ROWS, "norm"),
    ("39_L2Norm_", LEVEL1 / "39_L2Norm_.py", ROWS, "norm"),
    ("40_LayerNorm", LEVEL1 / "40_LayerNorm.py", IMAGES, "norm"),
    *(
        (name, LEVEL1 / f"{name}.py", CUBE, "reduction")
        for name in (
            "47_Sum_reduction_over_a_dimension",
            "48_Mean_reduction_over_a_dimension",
            "49_Max_reduction_over_a_dimension",
            "51_Argmax_over_a_dimension",
            "52_Argmin_over_a_dimension",
            "53_Min_reduction_over_a_dimension",
        )
    ),
    (
        "softmax_middle",
        DATA / "softmax" / "softmax_middle.py",
        {"batch_size": 2, "channels": 300, "length": 7},
        "softmax",
    ),
    (
        "argmin_lastdim",
        DATA / "reduction" / "argmin_lastdim.py",
        {"batch_size": 2, "dim1": 3, "dim2": 300},
        "reduction",
    ),
    ("prod_dim", DATA / "reduction" / "prod_dim.py", {"batch_size": 2, "dim1": 16, "dim2": 30}, "reduction"),
    ("amax_first_keepdim", DATA / "reduction" / "amax_first_keepdim.py", {"rows": 300, "cols": 9}, "reduction"),
    ("sum_lastdim", DATA / "reduction" / "sum_lastdim.py", {"rows": 5, "cols": 300}, "reduction"),
    ("rms_weight", EXAMPLES / "level1" / "5_RMSNorm.py", ROWS, "norm"),
    ("layer_norm_weight", EXAMPLES / "level1" / "4_LayerNorm.py", ROWS, "norm"),
]

# (case name, statement in __init__, forward expression, input expression): every op of the
# elementwise recipe's table and its binary ops, on inputs in each op's domain.
_RANDN, _POSITIVE = "torch.randn(batch_size, dim)", "torch.rand(batch_size, dim) + 0.1"
INLINE: list[tuple[str, str, str, str]] = [
    ("relu6", "pass", "F.relu6(x * 4.0)", _RANDN),
    ("leaky_relu", "pass", "F.leaky_relu(x, 0.2)", _RANDN),
    ("gelu_erf", "pass", "F.gelu(x)", _RANDN),
    ("gelu_tanh", "pass", "F.gelu(x, approximate='tanh')", _RANDN),
    ("tanh", "pass", "torch.tanh(x * 3.0)", _RANDN),
    ("silu", "pass", "F.silu(x)", _RANDN),
    ("mish", "pass", "F.mish(x * 8.0)", _RANDN),
    ("softplus_beta", "pass", "F.softplus(x * 4.0, beta=2.0, threshold=5.0)", _RANDN),
    ("elu_alpha", "pass", "F.elu(x, alpha=0.7)", _RANDN),
    ("selu", "pass", "torch.selu(x)", _RANDN),
    ("celu", "pass", "F.celu(x, alpha=1.3)", _RANDN),
    ("hardtanh", "pass", "F.hardtanh(x, -0.5, 0.8)", _RANDN),
    ("hardsigmoid", "pass", "F.hardsigmoid(x * 4.0)", _RANDN),
    ("hardswish", "pass", "F.hardswish(x * 4.0)", _RANDN),
    ("tanhshrink", "pass", "F.tanhshrink(x)", _RANDN),
    ("softshrink", "pass", "F.softshrink(x, 0.3)", _RANDN),
    ("hardshrink", "pass", "F.hardshrink(x, 0.3)", _RANDN),
    ("logsigmoid", "self.act = nn.LogSigmoid()", "self.act(x * 8.0)", _RANDN),
    ("softsign", "pass", "F.softsign(x)", _RANDN),
    ("exp_expm1", "pass", "torch.exp(x) + torch.expm1(x)", _RANDN),
    ("log_log1p", "pass", "torch.log(x) + torch.log1p(x)", _POSITIVE),
    ("roots", "pass", "torch.sqrt(x) + torch.rsqrt(x) + torch.reciprocal(x)", _POSITIVE),
    ("trigonometry", "pass", "torch.sin(x) * torch.cos(x) + torch.erf(x)", _RANDN),
    ("abs_neg_square", "pass", "-torch.abs(x) + torch.square(x)", _RANDN),
    ("clamp", "pass", "torch.clamp(x, -0.5, 0.5) + torch.clamp(x, min=0.2)", _RANDN),
    ("identity_contiguous", "self.same = nn.Identity()", "self.same(x).contiguous() * 2.0", _RANDN),
    ("relu_sigmoid", "pass", "torch.sigmoid(torch.relu(x))", _RANDN),
    (
        "arithmetic",
        "pass",
        "(x * 2.0 + 1.0 - x / 3.0) / (1.0 + x * x) + torch.rsub(x, 2.0) + 3.0 / (2.0 + x.abs())",
        _RANDN,
    ),
    ("powers", "pass", "x ** 5 + x ** 6 + x ** -2 + torch.pow(x.abs(), 1.5) + x ** 0.5", _POSITIVE),
    ("odd_power_negative", "pass", "x ** 7 + x ** 3", _RANDN),
    ("two_inputs", "pass", "torch.maximum(x, y) * torch.minimum(x, y) + x * y", f"{_RANDN}, {_RANDN}"),
    ("argmax_ties", "pass", "torch.argmax(x, dim=1)", "torch.randint(0, 3, (batch_size, dim)).float()"),
    ("argmin_ties_columns", "pass", "torch.argmin(x, dim=0)", "torch.randint(0, 3, (batch_size, dim)).float()"),
    (
        "instance_norm_affine",
        "self.n = nn.InstanceNorm2d(5, affine=True)",
        "self.n(x)",
        "torch.randn(batch_size, 5, 6, 50) * 3.0 + 2.0",
    ),
    ("normalize", "pass", "F.normalize(x, p=2.0, dim=1)", _RANDN),
    ("log_softmax_columns", "pass", "torch.log_softmax(x, dim=0)", "torch.randn(batch_size, dim) * 10.0"),
]
INLINE_FAMILY = {
    "argmax_ties": "reduction",
    "argmin_ties_columns": "reduction",
    "instance_norm_affine": "norm",
    "normalize": "norm",
    "log_softmax_columns": "softmax",
}

_TASK_TEMPLATE = """\
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, {arguments}):
        return {forward}


batch_size = 4
dim = 300


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
"""

# Run in the child: each candidate against its task program, under the Triton interpreter.
_CHILD = """
import importlib.util, json, sys, traceback
import torch
from pragma_core.verifier.instrumentation import ForwardMonitor

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

def drawn_parameters(model):
    torch.manual_seed(1)
    with torch.no_grad():
        for _, parameter in sorted(model.named_parameters()):
            parameter.uniform_(-1.0, 2.0)

def check(number, case):
    task = load(case["task"], f"task_{number}")
    candidate = load(case["candidate"], f"candidate_{number}")
    init = task.get_init_inputs()
    torch.manual_seed(42)
    reference = task.Model(*init)
    torch.manual_seed(42)
    model = candidate.ModelNew(*init)
    drawn_parameters(reference)
    drawn_parameters(model)
    torch.manual_seed(7)
    inputs = task.get_inputs()
    before = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    with torch.no_grad():
        want = reference(*inputs)
        monitor = ForwardMonitor(float("nan"))
        with monitor:
            got = model(*inputs)
    if monitor.compute_ops:
        return f"the forward ran PyTorch compute: {monitor.compute_ops}"
    if not all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(inputs, before)):
        return "the forward changed its inputs"
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"got {tuple(got.shape)} {got.dtype}, want {tuple(want.shape)} {want.dtype}"
    if not want.is_floating_point():
        wrong = (got != want).sum().item()
        return "ok" if wrong == 0 else f"{wrong} of {want.numel()} values differ"
    if torch.allclose(got, want, atol=1e-4, rtol=1e-4, equal_nan=True):
        return "ok"
    error = (got - want).abs().nan_to_num(float("inf")).max().item()
    return f"max abs error {error:.3g}"

results = {}
for number, case in enumerate(json.loads(open(sys.argv[1]).read())):
    try:
        results[case["name"]] = check(number, case)
    except Exception:
        results[case["name"]] = traceback.format_exc(limit=-3)
print(json.dumps(results))
"""


# Compiled for GPUs without one: the launches the forward makes are caught (JITFunction.run replaced),
# and each kernel is compiled with those arguments for an NVIDIA and an AMD target.
_COMPILE_CHILD = """
import importlib.util, json, sys, traceback
import torch
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

launches = []
JITFunction.run = lambda self, *args, grid, warmup, **kwargs: launches.append((self, args, kwargs))
POINTERS = {torch.float32: "*fp32", torch.int64: "*i64"}
TARGETS = (GPUTarget("cuda", 80, 32), GPUTarget("hip", "gfx90a", 64))

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module

def argument_type(value):
    if isinstance(value, torch.Tensor):
        return POINTERS[value.dtype]
    if isinstance(value, float):
        return "fp32"
    return "i32" if -2**31 <= value < 2**31 else "i64"

def compile_launches(number, case):
    task = load(case["task"], f"task_{number}")
    candidate = load(case["candidate"], f"candidate_{number}")
    model = candidate.ModelNew(*task.get_init_inputs())
    launches.clear()
    with torch.no_grad():
        model(*task.get_inputs())
    if not launches:
        return "the forward launched no kernel"
    for kernel, args, kwargs in launches:
        values = {**dict(zip(kernel.arg_names, args)), **kwargs}
        constants = {p.name: values[p.name] for p in kernel.params if p.is_constexpr}
        signature = {
            name: "constexpr" if name in constants else argument_type(values[name]) for name in kernel.arg_names
        }
        for target in TARGETS:
            source = ASTSource(fn=kernel, signature=signature, constexprs=constants)
            triton.compile(source, target=target, options={"num_warps": kwargs.get("num_warps", 4)})
    return "ok"

results = {}
for number, case in enumerate(json.loads(open(sys.argv[1]).read())):
    try:
        results[case["name"]] = compile_launches(number, case)
    except Exception:
        results[case["name"]] = traceback.format_exc(limit=-3)
print(json.dumps(results))
"""

COMPILED = (
    "88_MinGPTNewGelu-start",
    "two_inputs-start",
    "5_Matrix_scalar_multiplication-start",
    "23_Softmax-start",
    "24_LogSoftmax-small",
    "40_LayerNorm-start",
    "40_LayerNorm-small",
    "instance_norm_affine-small",
    "36_RMSNorm_-small",
    "rms_weight-start",
    "normalize-start",
    "38_L1Norm_-small",
    "48_Mean_reduction_over_a_dimension-start",
    "49_Max_reduction_over_a_dimension-start",
    "51_Argmax_over_a_dimension-small",
    "prod_dim-start",
)
"""Cases compiled for GPUs: every kernel shape of every family (each compile costs ~0.2 s)."""

SMALL_ELEMENTWISE = ("88_MinGPTNewGelu", "two_inputs")
"""Elementwise cases also run with the smallest block (the rest run where attempt 1 starts)."""


def _settings(name: str, family: str) -> dict[str, dict[str, Any]]:
    """The knob settings a case runs with: where attempt 1 starts and, for row-wise families, the
    smallest block (rows longer than one tile: the looped passes)."""
    knobs = TRITON_KNOBS[family]
    if family == "elementwise" and name not in SMALL_ELEMENTWISE:
        return {"start": starting(knobs)}
    return {"start": starting(knobs), "small": {**starting(knobs), "block": knobs["block"].values[0]}}


def _inline_task(folder: Path, name: str, init: str, forward: str, inputs: str) -> Path:
    listed = ast.parse(f"[{inputs}]", mode="eval").body
    arguments = ", ".join("xy"[: len(listed.elts) if isinstance(listed, ast.List) else 1])
    path = folder / f"{name}.py"
    path.write_text(_TASK_TEMPLATE.format(init=init, forward=forward, arguments=arguments, inputs=inputs))
    return path


def _case_names() -> list[str]:
    families = [(name, family) for name, _, _, family in FILES]
    families += [(name, INLINE_FAMILY.get(name, "elementwise")) for name, *_ in INLINE]
    return [f"{name}-{setting}" for name, family in families for setting in _settings(name, family)]


class Generated(NamedTuple):
    """One case's module and what the children said of it ("ok" or why not)."""

    family: str
    source: str
    verdict: str
    compiled: str | None  # None: not among the cases compiled for GPUs


@pytest.fixture(scope="module")
def generated(tmp_path_factory, kernelbench) -> dict[str, Generated]:
    """Every case's module, by case name, run under the interpreter in one child while another
    compiles those of :data:`COMPILED` for GPUs."""
    folder = tmp_path_factory.mktemp("triton")
    tasks = [(name, path, sizes, family) for name, path, sizes, family in FILES]
    for name, init, forward, inputs in INLINE:
        tasks.append(
            (name, _inline_task(folder, name, init, forward, inputs), {}, INLINE_FAMILY.get(name, "elementwise"))
        )
    manifest, modules = [], {}
    for name, path, sizes, family in tasks:
        task = load_task(path, sizes)
        recipe, match, graph = recognized(task)
        assert match.family == family, f"{name}: {match.summary}"
        context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
        program = folder / f"{name}_task.py"
        program.write_text(task_program(task))
        for setting, knobs in _settings(name, family).items():
            case = f"{name}-{setting}"
            source = generate_triton(recipe, match, knobs, context)
            candidate = folder / f"{case}.py"
            candidate.write_text(source)
            manifest.append({"name": case, "task": str(program), "candidate": str(candidate)})
            modules[case] = (family, source)
    assert set(COMPILED) <= set(modules)
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    children = {}
    for kind, script, cases, extra in (
        ("run", _CHILD, manifest, {"TRITON_INTERPRET": "1"}),
        ("compile", _COMPILE_CHILD, [case for case in manifest if case["name"] in COMPILED], {}),
    ):
        (folder / f"{kind}.json").write_text(json.dumps(cases))
        (folder / f"{kind}.py").write_text(script)
        children[kind] = subprocess.Popen(
            [sys.executable, str(folder / f"{kind}.py"), str(folder / f"{kind}.json")],
            env={**environment, "TRITON_CACHE_DIR": str(folder / "cache"), **extra},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=folder,
        )
    verdicts = {}
    try:
        for kind, child in children.items():
            out, err = child.communicate(timeout=600)
            assert child.returncode == 0, f"{kind}: {err[-3000:]}"
            verdicts[kind] = json.loads(out.strip().splitlines()[-1])
    finally:
        for child in children.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    return {
        case: Generated(family, source, verdicts["run"].get(case, "not run"), verdicts["compile"].get(case))
        for case, (family, source) in modules.items()
    }


@pytest.mark.parametrize("case", _case_names())
def test_the_module_computes_the_reference(generated, case):
    family, source, verdict, _ = generated[case]
    assert verdict == "ok", f"{case} ({family}): {verdict}\n{source}"


@pytest.mark.parametrize("case", COMPILED)
def test_the_kernels_compile_for_nvidia_and_amd_gpus(generated, case):
    """What the interpreter lets pass and a GPU compiler would not (a loop-carried value changing
    type, a Python construct Triton does not lower) fails here: the kernels are compiled, with the
    arguments and launch options the forward gives them, for sm_80 and gfx90a."""
    assert generated[case].compiled == "ok", f"{case}: {generated[case].compiled}\n{generated[case].source}"


def test_the_modules_pass_the_verifiers_static_checks(generated):
    for case, (_, source, _, _) in generated.items():
        findings = read_candidate(source)
        assert not (findings.syntax_error or findings.missing_model_new or findings.reference_reuse), (case, findings)
        assert findings.rejection(float32_task=True) is None, (case, findings)
        assert not findings.flagged_calls, (case, findings.flagged_calls)


def test_the_marker_names_the_family_and_knobs(generated):
    source = generated["40_LayerNorm-small"].source
    assert read_marker(source) == {"family": "norm", "knobs": {"block": 256, "num_warps": 8}}
    assert "BLOCK = 256" in source and "num_warps=NUM_WARPS" in source and "NUM_WARPS = 8" in source
    assert source.splitlines()[0].startswith('"""layer norm') and "TRITON_INTERPRET" not in source


def test_every_op_of_the_elementwise_recipe_has_a_triton_expression():
    assert set(TL_UNARY) == set(UNARY)


def test_the_knobs_are_powers_of_two_with_a_start():
    assert set(TRITON_KNOBS) == {"elementwise", "reduction", "softmax", "norm"}
    for family, knobs in TRITON_KNOBS.items():
        assert set(knobs) == {"block", "num_warps"}, family
        for knob in knobs.values():
            assert all(value & (value - 1) == 0 for value in knob.values), (family, knob)
            assert knob.start in knob.values and knob.default in knob.values
        assert defaults(knobs)["num_warps"] == 4


def _context(path: Path, sizes: dict[str, Any]) -> tuple[Any, Match, GenerationContext]:
    task = load_task(path, sizes)
    recipe, match, graph = recognized(task)
    return recipe, match, GenerationContext(graph=graph, task_source=task.source, task_key=task.key)


def test_a_family_it_does_not_write_raises_not_recognized(kernelbench):
    recipe, match, context = _context(kernelbench / "level1" / "89_cumsum.py", {"batch_size": 4, "input_shape": (30,)})
    with pytest.raises(NotRecognized, match="writes no scan kernels.*it writes elementwise, reduction, softmax, norm"):
        generate_triton(recipe, match, starting(TRITON_KNOBS["elementwise"]), context)


def test_an_op_it_does_not_write_raises_not_recognized(tmp_path):
    path = _inline_task(tmp_path, "tensor_power", "pass", "torch.pow(x, y)", f"{_RANDN}, {_RANDN}")
    recipe, match, context = _context(path, {})
    assert match.family == "elementwise"
    with pytest.raises(NotRecognized, match="writes no elementwise 'pow'"):
        generate_triton(recipe, match, starting(TRITON_KNOBS["elementwise"]), context)
    median = Match(family="reduction", summary="median over dim 1", facts={"op": "median", "dim": 1, "keepdim": False})
    with pytest.raises(NotRecognized, match="writes no 'median' reduction"):
        generate_triton(recipe, median, starting(TRITON_KNOBS["reduction"]), context)


def test_a_knob_value_it_cannot_take_is_an_error(tmp_path):
    path = _inline_task(tmp_path, "relu", "pass", "torch.relu(x)", _RANDN)
    recipe, match, context = _context(path, {})
    with pytest.raises(ValueError, match="block=300"):
        generate_triton(recipe, match, {"block": 300}, context)
    with pytest.raises(ValueError, match="no triton knob simd"):
        generate_triton(recipe, match, {"simd": True}, context)
    assert "BLOCK = 1024" in generate_triton(recipe, match, {}, context)


def test_the_module_names_no_device(generated):
    for case, (_, source, _, _) in generated.items():
        assert "cuda" not in source and "device='cpu'" not in source and '"cpu"' not in source, case


def test_a_task_with_numbers_as_arguments_keeps_them_plain(generated):
    source = generated["5_Matrix_scalar_multiplication-start"].source
    assert "float(s)" in source and "A = A.contiguous()" in source

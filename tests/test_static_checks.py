"""Reading a candidate's source: what is fatal, what rejects (forbidden constructs, library
fallback, lower precision) and what is only noted; and that no honest candidate, hand-written or
written by the offline Coder's recipes, is rejected."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pragma_core import load_task
from pragma_core.offline.coder import recognized
from pragma_core.offline.graph import NotRecognized
from pragma_core.offline.recipe import GenerationContext
from pragma_core.offline.recipes import RECIPES
from pragma_core.tasks.loading import size_constants
from pragma_core.verifier.static_checks import StaticFindings, read_candidate

from .conftest import EXAMPLES, KERNELBENCH, REPO


def candidate(body: str, *, forward: str = "return x", imports: str = "import torch\nimport torch.nn as nn") -> str:
    """A module with ``imports``, module-level ``body`` and a ``ModelNew`` whose forward is ``forward``."""
    return (
        f"{imports}\n{textwrap.dedent(body)}\n\nclass ModelNew(nn.Module):\n"
        f"    def forward(self, x):\n{textwrap.indent(textwrap.dedent(forward), '        ')}\n"
    )


def rejected_by(findings: StaticFindings, *, float32_task: bool = True) -> str | None:
    """The check the findings reject with, or None."""
    rejection = findings.rejection(float32_task=float32_task)
    return rejection[0] if rejection else None


def test_fatal_findings():
    assert (read_candidate("def (:").syntax_error or "").startswith("candidate.py:1: syntax error")
    assert read_candidate("x = 1\n").missing_model_new
    inherits = read_candidate("class ModelNew(Model):\n    pass\n")
    assert inherits.reference_reuse == "ModelNew inherits from the reference Model"
    calls = read_candidate(candidate("", forward="return Model.forward(self, x)"))
    assert (calls.reference_reuse or "").startswith("line 7 uses the reference Model")


def test_pytorch_calls_and_the_matmul_operator_in_forward_are_notes():
    findings = read_candidate(
        candidate("", forward="y = torch.empty_like(x)\nz = x @ x\nreturn torch.relu(x)", imports="import torch")
    )
    assert findings.flagged_calls == ("torch.relu (line 8)", "@ (line 7)")
    assert not (findings.forbidden or findings.library_fallback or findings.precision)


FORBIDDEN = {
    "gc": [
        ("import gc\nobjects = gc.get_objects()", "gc"),
        ("import gc as g\nrefs = g.get_referrers", "gc"),
        ("from gc import get_objects as every", "gc.get_objects"),
        ("import torch.cuda.memory\nfinder = torch.cuda.memory.gc", "torch.cuda.memory.gc"),
    ],
    "frames": [
        ("import sys\nframe = sys._getframe(1)", "sys._getframe"),
        ("from sys import _getframe as f", "sys._getframe"),
        ("import inspect\ncaller = inspect.stack()[1]", "inspect.stack"),
        ("import inspect\nf = inspect.currentframe()", "inspect.currentframe"),
        ("def peek(e):\n    return e.__traceback__.tb_frame.f_back.f_globals", ".f_globals"),
        ("import sys\nf = getattr(sys, '_getframe')", "sys._getframe"),
        ("import traceback\nframes = traceback.walk_stack(None)", "traceback.walk_stack"),
    ],
    "interpreter hooks": [
        ("import sys\nsys.setprofile(print)", "sys.setprofile"),
        ("import sys as s\ns.settrace(print)", "sys.settrace"),
        ("import threading\nthreading.setprofile(print)", "threading.setprofile"),
        (
            "import torch.nn.modules.module as m\nm.register_module_forward_hook(print)",
            "torch.nn.modules.module.register_module_forward_hook",
        ),
    ],
    "the module table and builtins": [
        ("import sys\nmain = sys.modules['__main__']", "sys.modules"),
        ("import sys\nmodules = vars(sys)['modules']", "sys.modules"),
        ("import builtins\nbuiltins.print = len", "builtins"),
        ("__builtins__['len'] = max", "__builtins__"),
        ("g = globals()['__builtins__']", "'__builtins__'"),
    ],
    "code the check never read": [
        ("exec('x = 1')", "exec"),
        ("value = eval('1 + 1')", "eval"),
        ("code = compile('1', 'f', 'eval')", "compile"),
        ("gc = __import__('gc')", "__import__"),
        ("import importlib\nm = importlib.import_module('gc')", "importlib"),
        ("import pickle\nstate = pickle.loads(b'')", "pickle.loads"),
        ("from marshal import loads", "marshal.loads"),
    ],
    "objects reached without their names": [
        ("subclasses = nn.Module.__subclasses__()", "torch.nn.Module.__subclasses__"),
        ("def f():\n    pass\nharness = f.__globals__", ".__globals__"),
        ("def f():\n    pass\ncells = f.__closure__", ".__closure__"),
        ("def f():\n    pass\nbody = f.__code__", ".__code__"),
    ],
    "PyTorch's dispatch and profiler": [
        (
            "from torch.utils._python_dispatch import _disable_current_modes",
            "torch.utils._python_dispatch._disable_current_modes",
        ),
        ("import torch.utils._python_dispatch as pd\nmodes = pd._pop_mode", "torch.utils._python_dispatch._pop_mode"),
        ("guard = torch._C._DisableTorchDispatch", "torch._C._DisableTorchDispatch"),
        ("C = torch._C\noff = C._autograd._disable_profiler", "torch._C._autograd._disable_profiler"),
        ("pop = getattr(torch.utils, '_python_dispatch')", "torch.utils._python_dispatch"),
        ("import torch.profiler\nprofile = torch.profiler.profile", "torch.profiler"),
        ("from torch.autograd import profiler", "torch.autograd.profiler"),
        ("import operator\npop = operator.attrgetter('_pop_mode')", "'_pop_mode'"),
    ],
    "native code outside pragma_core.native": [
        ("import ctypes\nlib = ctypes.CDLL('libm.so.6')", "ctypes"),
        ("from cffi import FFI", "cffi.FFI"),
    ],
    "processes, signals and exit hooks": [
        ("import subprocess", "subprocess"),
        ("import os\nos.system('true')", "os.system"),
        ("import os\npid = os.fork()", "os.fork"),
        ("from os import setsid", "os.setsid"),
        ("import os\nos.execv('/bin/true', [])", "os.execv"),
        ("import os\nos.killpg(0, 9)", "os.killpg"),
        ("from multiprocessing import Process", "multiprocessing.Process"),
        ("import atexit\natexit.register(print)", "atexit"),
        ("import signal\nsignal.signal(signal.SIGTERM, print)", "signal"),
        ("import _thread\n_thread.start_new_thread(print, ())", "_thread"),
        ("from concurrent.futures import ProcessPoolExecutor", "concurrent.futures.ProcessPoolExecutor"),
    ],
    "files and descriptors": [
        ("import os\nos.write(1, b'correct')", "os.write"),
        ("import os\nos.dup2(3, 1)", "os.dup2"),
        ("import os\nos.remove('/tmp/x')", "os.remove"),
        ("import shutil\nshutil.rmtree('/tmp/x')", "shutil.rmtree"),
        ("from pathlib import Path\nPath('/tmp/x').unlink()", ".unlink()"),
    ],
    "the network": [
        ("import socket", "socket"),
        ("import urllib.request", "urllib.request"),
    ],
    "patching what the candidate did not define": [
        ("import time\ntime.perf_counter = lambda: 0.0", "time.perf_counter = ..."),
        ("torch.Tensor.add = torch.Tensor.sub", "torch.Tensor.add = ..."),
        ("setattr(torch, 'relu', abs)", "setattr(torch, ...)"),
        ("import torch.nn.functional as F\ndelattr(F, 'gelu')", "delattr(F, ...)"),
        ("object.__setattr__(nn.Module, 'forward', print)", "object.__setattr__"),
        ("def swap(t):\n    type(t).__add__ = None", "type(t).__add__ = ..."),
    ],
}


@pytest.mark.parametrize(
    ("source", "named"),
    [case for cases in FORBIDDEN.values() for case in cases],
    ids=[f"{family}-{number}" for family, cases in FORBIDDEN.items() for number in range(len(cases))],
)
def test_forbidden_constructs_are_found_under_any_spelling(source, named):
    findings = read_candidate(candidate(source))
    assert findings.forbidden, source
    assert any(finding.startswith(f"{named}, line ") for finding in findings.forbidden), findings.forbidden
    assert rejected_by(findings, float32_task=False) == "forbidden-construct"


def test_the_disabled_dispatch_mode_trick_inside_forward_is_rejected():
    """The adversarial trial's candidate: PyTorch work under ``_disable_current_modes``."""
    source = candidate(
        "",
        imports="import torch\nimport torch.nn as nn\nfrom torch.utils import _python_dispatch as dispatch",
        forward="with dispatch._disable_current_modes():\n    return torch.nn.functional.gelu(x)",
    )
    findings = read_candidate(source)
    assert "torch.utils._python_dispatch, line 3: reaches PyTorch's dispatch-mode stack" in findings.forbidden[0]
    assert any(
        finding.startswith("torch.utils._python_dispatch._disable_current_modes, line 8")
        for finding in findings.forbidden
    )
    assert findings.rejection(float32_task=True) == ("forbidden-construct", "; ".join(findings.forbidden))
    assert "line 8" in findings.forbidden[1]


HONEST_LOOKALIKES = [
    "import os\nthreads = os.environ.get('OMP_NUM_THREADS', '1')\nhere = os.path.dirname(__file__)",
    "import re\npattern = re.compile('x')",
    "from pathlib import Path\nsource = Path(__file__).with_suffix('.cpp')",
    "import math, functools, typing\nscale = math.sqrt(2.0)",
    "from torch.utils.cpp_extension import load_inline",
    "from pragma_core.native import load_library, load_extension",
    "import torch.signal",
    "code = r'''extern \"C\" void f() {}'''\nhalf = 2",
    "import inspect\nsignature = inspect.signature(print)",
    "import numpy as np\nTABLE = torch.from_numpy(np.linspace(0.0, 1.0, 64, dtype=np.float32))",
    "torch.backends.cudnn.benchmark = True",
    "torch.set_float32_matmul_precision('highest')",
]


@pytest.mark.parametrize("source", HONEST_LOOKALIKES)
def test_honest_lookalikes_are_not_rejected(source):
    findings = read_candidate(candidate(source, forward="self.eval()\nreturn x"))
    assert findings.rejection(float32_task=True) is None, findings


def test_threading_and_computed_names_are_notes():
    findings = read_candidate(candidate("import threading\nname = 'relu'\nf = getattr(torch, name)"))
    assert findings.rejection(float32_task=True) is None
    assert [note.split(",")[0] for note in findings.notes] == ["threading", "getattr with a computed name"]


LIBRARY_FALLBACK = [
    ("import numpy as np", "return torch.from_numpy(np.tanh(x.numpy()))", "numpy.tanh"),
    ("from numpy import matmul as mm", "return torch.as_tensor(mm(x, x))", "numpy.matmul"),
    ("import scipy.special", "return torch.as_tensor(scipy.special.erf(x))", "scipy.special.erf"),
    ("import numpy\ndef helper(t):\n    return numpy.exp(t)", "return helper(x)", "numpy.exp"),
    (
        "import numpy as np\ndef inner(t):\n    return np.sqrt(t)\ndef outer(t):\n    return inner(t)",
        "return outer(x)",
        "numpy.sqrt",
    ),
    ("import numba\n@numba.njit\ndef kernel(a):\n    return a", "return kernel(x)", "kernel (decorated by numba.njit)"),
    ("", "return torch.as_tensor(x.__array__())", ".__array__()"),
    ("fast = torch.compile(lambda t: t * 2)", "return fast(x)", "torch.compile"),
]


@pytest.mark.parametrize(("module", "forward", "named"), LIBRARY_FALLBACK)
def test_another_library_doing_the_work_in_forward_is_rejected(module, forward, named):
    findings = read_candidate(candidate(module, forward=forward))
    assert any(finding.startswith(f"{named}, line ") for finding in findings.library_fallback), findings
    assert rejected_by(findings, float32_task=True) == "library-fallback"


def test_numpy_stored_on_self_and_called_from_a_method_is_followed():
    source = (
        "import numpy as np\nimport torch\nimport torch.nn as nn\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.product = np.matmul\n"
        "    def forward(self, x):\n        return self.work(x)\n"
        "    def work(self, x):\n        return torch.as_tensor(self.product(x, x))\n"
    )
    assert read_candidate(source).library_fallback == (
        "numpy.matmul, line 12: does the work in another library instead of the candidate's kernel",
    )


def test_numpy_for_setup_dtypes_and_shapes_is_not_work():
    source = candidate(
        "import numpy as np\nSCALE = np.float32(np.sqrt(2.0 / np.pi))",
        forward="n = int(np.prod(x.shape))\neps = np.finfo(np.float32).eps\nreturn x",
    )
    assert read_candidate(source).library_fallback == ()


PRECISION = [
    ("", "return x.half().float()", ".half()"),
    ("", "return x.to(torch.bfloat16).float()", "torch.bfloat16"),
    ("DTYPE = torch.float16", "return x", "torch.float16"),
    ("", "return torch.empty(3, dtype='bfloat16')", "dtype='bfloat16'"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "return x", "torch.backends.cuda.matmul.allow_tf32 = ..."),
    ("torch.set_float32_matmul_precision('medium')", "return x", "torch.set_float32_matmul_precision"),
    ("", "with torch.autocast('cpu'):\n    return x", "torch.autocast"),
    ("import triton.language as tl", "return tl.zeros((1,), tl.float16)", "triton.language.float16"),
    ("SOURCE = '''\nfloat f(const float* x) {\n    __bf16 b = x[0];\n    return b;\n}'''", "return x", "__bf16"),
    ("SOURCE = 'float g(_Float16 h) { return h; }'", "return x", "_Float16"),
    ("SOURCE = '__m256i r = _mm512_cvtneps_pbh(v);'", "return x", "conversion to bf16 / fp16"),
    ("SOURCE = '__m128i h = _mm256_cvtps_ph(v, 0);'", "return x", "conversion to bf16 / fp16"),
    ("SOURCE = 'half* out = (half*)p;'", "return x", "half"),
    ("SOURCE = 'auto y = x.to(at::kBFloat16);'", "return x", "PyTorch's half / bfloat16 dtype"),
    ("SOURCE = 'at::Half* h = t.data_ptr<at::Half>();'", "return x", "PyTorch's Half / BFloat16 type"),
]


@pytest.mark.parametrize(("module", "forward", "named"), PRECISION)
def test_lower_precision_is_found_in_python_and_in_c(module, forward, named):
    findings = read_candidate(candidate(module, forward=forward))
    assert any(finding.startswith(named) for finding in findings.precision), findings.precision
    assert rejected_by(findings, float32_task=True) == "precision-downgrade"
    assert findings.rejection(float32_task=False) is None


def test_c_findings_give_the_line_in_the_module():
    source = candidate("SOURCE = r'''\n// __bf16 in a comment is not code\nvoid f() {\n    __fp16 h;\n}\n'''")
    assert read_candidate(source).precision == (
        "__fp16 in C/C++ source (__fp16), line 6: computes in a lower precision than float32",
    )


def test_honest_c_that_says_half_is_not_low_precision():
    source = candidate(
        'SOURCE = r"""\n// the upper half of the rows\nint half = n / 2;\nfor (int i = 0; i < half; ++i) {}\n'
        'AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "k", [&] { run<scalar_t>(); });\n'
        '"""'
    )
    assert read_candidate(source).precision == ()


HAND_WRITTEN_HONEST = sorted((REPO / "tests" / "candidates").glob("honest_*.py")) + sorted(
    (REPO / "examples" / "candidates").glob("*.py")
)


@pytest.mark.parametrize("path", HAND_WRITTEN_HONEST, ids=[path.stem for path in HAND_WRITTEN_HONEST])
def test_hand_written_honest_candidates_are_not_rejected(path):
    findings = read_candidate(path.read_text())
    assert not (findings.syntax_error or findings.missing_model_new or findings.reference_reuse)
    assert (findings.forbidden, findings.library_fallback, findings.precision) == ((), (), ())


# KernelBench's own files for the families no bundled task shows (diagonal and 4-D products, batch
# norm, group norm, a transposed convolution, attention; a GEMM fused with norm and softmax stages, a
# convolution with its chain, a transposed one with a softmax over channels), where the KernelBench
# tree is beside the clone.
_KERNELBENCH_ONLY = {"level1": ("11_", "12_", "33_", "35_", "64_", "97_"), "level2": ("84_", "1_", "13_")}
TASK_FILES = (
    sorted((REPO / "tests" / "data" / "offline_tasks").rglob("*.py"))
    + sorted(EXAMPLES.rglob("*.py"))
    + sorted(
        path
        for level, prefixes in _KERNELBENCH_ONLY.items()
        for path in (KERNELBENCH / level).glob("*.py")
        if path.name.startswith(prefixes)
    )
)


def _knob_settings(knobs) -> list[dict]:
    """The plain version, each knob at each of its values alone, and every knob at its last value."""
    plain = {name: knob.default for name, knob in knobs.items()}
    settings = [plain, {name: knob.values[-1] for name, knob in knobs.items()}]
    settings += [{**plain, name: value} for name, knob in knobs.items() for value in knob.values]
    return settings


def _recognized_small(path: Path):
    """The task at small sizes (tracing runs the reference), at its own sizes where small ones do not
    fit its shapes; raises NotRecognized."""
    small = {
        name: 8 for name, value in size_constants(path.read_text()).items() if isinstance(value, int) and value > 8
    }
    try:
        task = load_task(path, small)
        return task, recognized(task)
    except NotRecognized:
        raise
    except Exception:  # noqa: BLE001 - a shape the small sizes break: trace the task as written
        task = load_task(path)
        return task, recognized(task)


def test_every_recipe_writes_modules_with_no_rejecting_finding():
    """What the offline Coder writes, for every task its recipes recognize, at every knob value:
    nothing forbidden, no other library doing the work, no lower precision."""
    families: dict[str, int] = {}
    for path in TASK_FILES:
        try:
            task, (recipe, match, graph) = _recognized_small(path)
        except NotRecognized:
            continue
        context = GenerationContext(graph=graph, task_source=task.source, task_key=task.key)
        for knobs in _knob_settings(recipe.knobs):
            source = recipe.generate(match, knobs, context)
            findings = read_candidate(source)
            problems = (findings.forbidden, findings.library_fallback, findings.precision)
            assert problems == ((), (), ()), f"{path.name} {knobs}: {problems}"
            assert not (findings.syntax_error or findings.missing_model_new or findings.reference_reuse)
            families[recipe.family] = families.get(recipe.family, 0) + 1
    assert set(families) == {recipe.family for recipe in RECIPES}, families


def test_reading_a_candidate_takes_about_a_millisecond():
    import time

    source = (REPO / "tests" / "candidates" / "honest_layernorm_two_kernels.py").read_text()
    read_candidate(source)
    start = time.perf_counter()
    for _ in range(20):
        read_candidate(source)
    assert (time.perf_counter() - start) / 20 < 0.02


def test_cheats_in_the_test_candidates_are_rejected_from_the_source():
    folder = Path(REPO / "tests" / "candidates")
    assert rejected_by(read_candidate((folder / "cheat_spawn_process.py").read_text()), float32_task=True) == (
        "forbidden-construct"
    )
    assert rejected_by(read_candidate((folder / "probe_network.py").read_text()), float32_task=True) == (
        "forbidden-construct"
    )
    assert rejected_by(read_candidate((folder / "cheat_no_kernel.py").read_text()), float32_task=True) == (
        "library-fallback"
    )


def test_a_source_without_model_new_is_a_compile_error_found_before_running(examples):
    from pragma_core import Candidate, load_task
    from pragma_core.records import VerdictStatus
    from pragma_core.verifier import verify

    task = load_task(examples / "level1" / "2_LeakyReLU.py")
    source = "import torch\n\nclass Model2(torch.nn.Module):\n    pass\n"
    verdict = verify(task, Candidate(source=source, backend="cpu-cpp"))
    assert verdict.status is VerdictStatus.COMPILE_ERROR
    assert verdict.message.startswith("the candidate defines no class ModelNew(nn.Module)")
    assert verdict.reference is None and verdict.conditions is None  # nothing ran, nothing was timed

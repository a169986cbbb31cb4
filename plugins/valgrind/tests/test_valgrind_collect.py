"""collect: the command line, when it cannot run, and real cachegrind runs on small C programs.

The real runs compile a replay-like program with gcc in tmp_path: ``main`` in its own file fills
the input (the harness), then calls the kernels of ``kernel.c`` as many times as its first
argument says, as pragma's replay driver does. Each run takes well under a second.
"""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pragma_core.errors import ProfilerUnavailable
from pragma_core.plugin_api.components import ProfileTarget
from pragma_core.records import Task
from pragma_core.sizes.caches import CacheGeometry, SimulatedCaches, simulable, simulated_caches
from pragma_valgrind.collect import LOG_FILE, NO_REPLAY, OUT_FILE, cache_options, collect, command
from pragma_valgrind.metrics import DEFAULT_METRICS
from pragma_valgrind.outfile import read_outfile
from pragma_valgrind.parse import parse

N = 1 << 16
REPETITIONS = 3
TASK = Task(name="relu", source="# a task\n", category="activation")

KERNEL_C = r"""
void relu(const float *a, float *b, long n) {
    for (long i = 0; i < n; i++) b[i] = a[i] > 0.f ? a[i] : 0.f;
}
void scale(float *b, long n, float s) {
    for (long i = 0; i < n; i++) b[i] *= s;
}
"""

OPENMP_KERNEL_C = r"""
void relu(const float *a, float *b, long n) {
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) b[i] = a[i] > 0.f ? a[i] : 0.f;
}
void scale(float *b, long n, float s) {
    for (long i = 0; i < n; i++) b[i] *= s;
}
"""

MAIN_C = r"""
#include <stdio.h>
#include <stdlib.h>
void relu(const float *a, float *b, long n);
void scale(float *b, long n, float s);
int main(int argc, char **argv) {
    long repetitions = argc > 1 ? atol(argv[1]) : 1;
    long n = 1L << 16;
    float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    for (long i = 0; i < n; i++) a[i] = (float)((i * 2654435761u) % 1000) - 500.f;
    for (long r = 0; r < repetitions; r++) { relu(a, b, n); scale(b, n, 0.5f); }
    printf("%f\n", b[n / 3]);
    return 0;
}
"""

needs_tools = pytest.mark.skipif(
    shutil.which("valgrind") is None or shutil.which("gcc") is None, reason="needs valgrind and gcc"
)


def target_for(program: Path, out_dir: Path, **fields) -> ProfileTarget:
    return ProfileTarget(
        task=TASK,
        candidate=None,
        out_dir=out_dir,
        repetitions=REPETITIONS,
        replay_argv=(str(program), str(REPETITIONS)),
        **fields,
    )


def gcc(*arguments: str | Path) -> None:
    subprocess.run(["gcc", *map(str, arguments)], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> tuple[Path, Path]:
    """The replay-like program built with -g, and its kernel source (kernel.c)."""
    folder = tmp_path_factory.mktemp("relu")
    (folder / "kernel.c").write_text(KERNEL_C)
    (folder / "main.c").write_text(MAIN_C)
    # no vectorizing, so the count of stores is exact: one per element per call
    gcc("-g", "-O2", "-fno-tree-vectorize", "-o", folder / "replay", folder / "main.c", folder / "kernel.c")
    return folder / "replay", folder / "kernel.c"


# -- no run -------------------------------------------------------------------------------------


def test_command_line(tmp_path):
    target = ProfileTarget(task=TASK, candidate=None, out_dir=tmp_path, replay_argv=("/r/replay", "3"))
    caches = simulated_caches()
    assert command("/usr/bin/valgrind", target) == [
        "/usr/bin/valgrind",
        "--tool=cachegrind",
        "--cache-sim=yes",
        "--branch-sim=yes",
        *cache_options(caches),
        f"--cachegrind-out-file={tmp_path / OUT_FILE}",
        f"--log-file={tmp_path / LOG_FILE}",
        "/r/replay",
        "3",
    ]


def test_the_caches_are_given_to_cachegrind_as_size_ways_line():
    caches = SimulatedCaches(
        i1=None,  # unknown here: cachegrind's own choice
        d1=CacheGeometry(size_bytes=32768, ways=8, line_bytes=64),
        ll=CacheGeometry(size_bytes=1310720, ways=10, line_bytes=64),
        origin="simulated ...",
    )
    assert cache_options(caches) == ["--D1=32768,8,64", "--LL=1310720,10,64"]


def test_without_a_replay_program_it_points_to_perf(tmp_path):
    target = ProfileTarget(task=TASK, candidate=None, out_dir=tmp_path, python_argv=("python", "-m", "x"))
    with pytest.raises(ProfilerUnavailable) as raised:
        collect(target, DEFAULT_METRICS)
    message = str(raised.value)
    assert message == NO_REPLAY and "\n" not in message
    assert "load_library" in message and "torch" in message and "with perf" in message


def test_without_valgrind_it_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    target = ProfileTarget(task=TASK, candidate=None, out_dir=tmp_path, replay_argv=("/r/replay",))
    with pytest.raises(ProfilerUnavailable, match="valgrind is not installed"):
        collect(target, DEFAULT_METRICS)


# -- real runs ----------------------------------------------------------------------------------


@needs_tools
def test_counts_are_deterministic_and_only_the_kernels(program, tmp_path):
    replay, kernel_c = program
    profiles = [
        collect(
            target_for(
                replay, tmp_path / f"run{run}", kernel_functions=("relu", "scale"), kernel_sources=(str(kernel_c),)
            ),
            DEFAULT_METRICS,
        )
        for run in (1, 2)
    ]
    first, second = profiles
    assert first.metrics == second.metrics  # the same counts, to the last instruction
    assert not first.not_collected

    kernels = {metric.kernel for metric in first.metrics}
    assert kernels == {"relu+scale", "relu", "scale"}
    both, relu, scale = (first.get("Dw", kernel) for kernel in ("relu+scale", "relu", "scale"))
    # each call stores N floats; main's loop that fills the input (another N stores) is not there
    assert relu.value == REPETITIONS * N and scale.value == REPETITIONS * N
    assert both.value == 2 * REPETITIONS * N
    assert first.get("D1 miss rate", "relu+scale").value > 0
    assert first.get("D1 miss rate", "relu+scale").unit == "%"
    assert first.get("Ir", "relu+scale").value == first.get("Ir", "relu").value + first.get("Ir", "scale").value

    program_totals = {m.name: m.value for m in parse(Path(first.raw_paths[0]).read_text()) if m.kernel == ""}
    assert program_totals["Dw"] > both.value + N  # the harness wrote the input, and more
    assert program_totals["Ir"] > first.get("Ir", "relu+scale").value
    assert all(Path(path).is_file() for path in first.raw_paths)

    notes = " | ".join(first.notes)
    assert "valgrind-" in notes and "D1: " in notes  # the version, and the simulated caches in pragma's words
    assert f"totals over {REPETITIONS} replayed forward(s)" in notes
    assert f"whole program, replay harness included: Ir={program_totals['Ir']}" in notes
    assert f"source file {kernel_c}" in notes
    print(
        "Ir",
        first.get("Ir", "relu+scale").value,
        second.get("Ir", "relu+scale").value,
        "D1 miss rate",
        first.get("D1 miss rate", "relu+scale").value,
    )


@needs_tools
def test_without_debug_information_openmp_parts_are_found_by_name(tmp_path):
    (tmp_path / "kernel.c").write_text(OPENMP_KERNEL_C)
    (tmp_path / "main.c").write_text(MAIN_C)
    gcc(
        "-O2",
        "-fno-tree-vectorize",
        "-fopenmp",
        "-fPIC",
        "-shared",
        "-o",
        tmp_path / "libkernel.so",
        tmp_path / "kernel.c",
    )
    gcc("-O2", "-o", tmp_path / "replay", tmp_path / "main.c", f"-L{tmp_path}", "-lkernel", f"-Wl,-rpath,{tmp_path}")
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "2"}
    profile = collect(
        target_for(
            tmp_path / "replay",
            tmp_path / "out",
            kernel_functions=("relu",),
            kernel_sources=(str(tmp_path / "kernel.c"),),
            env=env,
        ),
        ["Dw", "D1 miss rate"],
    )
    notes = " | ".join(profile.notes)
    assert "function name relu, relu._omp_fn.0" in notes and "source file" not in notes
    # the outlined body stores N floats per call; relu itself only sets up the parallel region
    assert profile.get("Dw", "relu").value >= REPETITIONS * N
    assert profile.get("D1 miss rate", "relu").value > 0


@needs_tools
def test_unknown_metrics_are_reported_not_dropped(program, tmp_path):
    replay, kernel_c = program
    target = target_for(replay, tmp_path, kernel_functions=("relu",))
    profile = collect(target, ["D1 miss rate", "cycles", "I2mr"])
    assert [metric.name for metric in profile.metrics] == ["D1 miss rate"]
    assert "cachegrind has no metric 'cycles'" in profile.not_collected["cycles"]
    assert "ask for ILmr" in profile.not_collected["I2mr"]


@needs_tools
def test_no_kernel_code_found_is_said_and_nothing_is_passed_off_as_the_kernel(program, tmp_path):
    replay, _kernel_c = program
    profile = collect(target_for(replay, tmp_path, kernel_functions=("softmax",)), ["Ir", "D1 miss rate"])
    assert profile.metrics == ()
    assert set(profile.not_collected) == {"Ir", "D1 miss rate"}
    assert any("no kernel code found" in note for note in profile.notes)


@needs_tools
def test_a_failing_program_is_reported_with_its_message(tmp_path):
    (tmp_path / "fail.c").write_text(
        '#include <stdio.h>\nint main(void) { fprintf(stderr, "cannot load buffers/0.bin\\n"); return 2; }\n'
    )
    gcc("-O1", "-o", tmp_path / "fail", tmp_path / "fail.c")
    with pytest.raises(ProfilerUnavailable, match=r"failed \(exit code 2\): cannot load buffers/0.bin"):
        collect(target_for(tmp_path / "fail", tmp_path / "out", kernel_functions=("relu",)), ["Ir"])


@needs_tools
@pytest.mark.skipif(platform.machine() != "x86_64", reason="AVX-512 is x86-64")
def test_an_instruction_valgrind_cannot_decode_is_explained(tmp_path):
    (tmp_path / "wide.c").write_text(
        "#include <immintrin.h>\n"
        "__attribute__((noinline)) void wide(float *x) {\n"
        "    _mm512_storeu_ps(x, _mm512_add_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(x)));\n"
        "}\n"
        "int main(void) { float x[16] = {1}; wide(x); return (int)x[1]; }\n"
    )
    gcc("-O2", "-mavx512f", "-o", tmp_path / "wide", tmp_path / "wide.c")
    explained = "cannot decode an instruction in wide .*AVX-512.*-mno-avx512f"
    with pytest.raises(ProfilerUnavailable, match=explained):
        collect(target_for(tmp_path / "wide", tmp_path / "out", kernel_functions=("wide",)), ["Ir"])


@needs_tools
def test_cachegrind_simulates_the_caches_pragma_chose_and_says_so(program, tmp_path):
    replay, _kernel_c = program
    profile = collect(target_for(replay, tmp_path, kernel_functions=("relu",)), ["D1 miss rate"])
    caches = simulated_caches()
    desc = read_outfile((tmp_path / OUT_FILE).read_text()).desc
    ll = caches.ll
    assert f"LL cache: {ll.size_bytes} B, {ll.line_bytes} B, {ll.ways}-way associative" in desc
    if caches.d1 is not None:
        d1 = caches.d1
        assert f"D1 cache: {d1.size_bytes} B, {d1.line_bytes} B, {d1.ways}-way associative" in desc
    notes = " | ".join(profile.notes)
    assert caches.describe() in notes
    # valgrind warns that it sized the LL from the L3 it found even when --LL overrides that
    assert "using its data for the LL simulation" not in notes
    # valgrind simulated what pragma asked: its own description of the caches is not said again
    assert re.fullmatch(r"valgrind-[\d.]+ cachegrind", profile.notes[0])
    assert "associative" not in notes


@needs_tools
@pytest.mark.parametrize(
    ("size", "ways", "line"),
    [(30 * 2**20, 20, 64), (105 * 2**20, 15, 64), (1280 * 2**10, 10, 64), (48 * 2**10, 12, 64), (2**20, 16, 48)],
)
def test_a_simulable_geometry_is_one_cachegrind_accepts(size, ways, line, tmp_path):
    """Real valgrind on /bin/true: the geometry simulable() gives is accepted; the one it was given
    is refused exactly when simulable() had to change it."""

    def accepted(geometry: str) -> bool:
        run = subprocess.run(
            ["valgrind", "--tool=cachegrind", f"--LL={geometry}", f"--cachegrind-out-file={tmp_path / 'out'}", "true"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return run.returncode == 0

    geometry, change = simulable(size, ways, line)
    assert accepted(f"{geometry.size_bytes},{geometry.ways},{geometry.line_bytes}")
    assert geometry.size_bytes <= size and geometry.size_bytes > size // 2
    assert accepted(f"{size},{ways},{line}") == (change == "")

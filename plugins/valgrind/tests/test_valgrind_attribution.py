"""Which entries of a cachegrind.out count as the kernel's: by source file, by function name."""

from __future__ import annotations

from pathlib import Path

import pytest

from pragma_valgrind.attribution import attribute, is_part_of, same_source
from pragma_valgrind.outfile import read_outfile

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    "symbol",
    [
        "relu",
        "relu._omp_fn.0",
        "relu._omp_fn.12",
        "relu.cold",
        "relu.part.0",
        "relu.isra.0",
        "relu.constprop.0",
        "relu.omp_outlined",
        "relu(float const*, float*, long)",
    ],
)
def test_compiler_made_parts_of_a_kernel_function(symbol):
    assert is_part_of(symbol, "relu")


@pytest.mark.parametrize("symbol", ["relu6", "leaky_relu", "main", "???", "prelu._omp_fn.0", "GOMP_parallel"])
def test_other_functions_are_not_the_kernel(symbol):
    assert not is_part_of(symbol, "relu")


def test_source_paths_match_as_compiled(tmp_path):
    source = tmp_path / "cache" / "abc123.cpp"
    assert same_source(str(source), str(source))
    assert same_source(str(tmp_path / "cache" / "." / "abc123.cpp"), str(source))
    assert same_source("cache/abc123.cpp", str(source))  # relative, compiled from tmp_path
    assert same_source("./abc123.cpp", str(source))
    assert not same_source("???", str(source))
    assert not same_source("bc123.cpp", str(source))
    assert not same_source(str(tmp_path / "other" / "abc123.cpp"), str(source))


def test_source_paths_through_a_link(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (real / "k.c").write_text("")
    (tmp_path / "link").symlink_to(real)
    assert same_source(str(tmp_path / "link" / "k.c"), str(real / "k.c"))


def test_kernel_inlined_into_main_is_found_by_its_source_file():
    # small.c defines relu and main; gcc inlined relu into main, so there is no fn=relu at all
    out = read_outfile((DATA / "cachegrind.out.small-c-relu-branchsim-valgrind3.19").read_text())
    by_name = attribute(out, ["relu"], [])
    assert by_name.keys == ()
    by_source = attribute(out, ["relu"], ["/tmp/cc/small.c"])
    assert by_source.keys == (("/tmp/cc/small.c", "main"),)
    assert by_source.by_source == {"/tmp/cc/small.c"} and not by_source.by_function
    assert out.add_up(by_source.keys)["Ir"] == 27263021  # the file's total in cg_annotate


def test_functions_without_debug_information_are_found_by_name():
    # valgrind 3.5 run without -g: everything outside loop.c is fl=???
    out = read_outfile((DATA / "cachegrind.out.23497-valgrind-3.5-L2-legacy").read_text())
    found = attribute(out, ["vfprintf"], [])
    assert found.keys == (("???", "vfprintf"),) and found.by_function == {"vfprintf"}
    assert out.add_up(found.keys)["Ir"] == 4474

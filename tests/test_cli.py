"""The `pragma` command line: listings, JSON, and one clear line with exit code 2 for bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pragma_core.cli import main

from .test_tasks import GOOD, write

BROKEN_PLUGIN = "raise ImportError('built against pragma 9')\n"


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_help_lists_the_commands(capsys):
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "plugins" in out and "tasks" in out


def test_tasks_table_shows_every_example_and_all_categories(capsys, examples):
    code, out, err = run(capsys, "tasks", str(examples))
    assert code == 0, err
    assert "18 tasks" in out and "level1/10_Matmul" in out and "2.15 GFLOP" in out
    for category in ("matmul", "activation", "normalization", "pooling_reduction", "conv", "other"):
        assert category in out


def test_tasks_json_has_sizes_flops_and_bytes(capsys, examples):
    code, out, _ = run(
        capsys,
        "tasks",
        str(examples / "level1" / "10_Matmul.py"),
        "--set",
        "M=32",
        "--set",
        "N=8",
        "--set",
        "K=4",
        "--json",
    )
    assert code == 0
    listing = json.loads(out)
    assert listing["errors"] == []
    (task,) = listing["tasks"]
    assert task["key"] == "level1/10_Matmul" and task["category"] == "matmul"
    assert task["sizes"] == {"M": 32, "N": 8, "K": 4}
    assert task["inputs"][0]["shape"] == [32, 4] and task["outputs"][0]["shape"] == [32, 8]
    assert task["flops"] == 2 * 32 * 8 * 4
    assert task["min_bytes"] == 4 * (32 * 4 + 4 * 8 + 32 * 8)


def test_plugins_json_lists_builtins(capsys):
    code, out, _ = run(capsys, "plugins", "--json")
    payload = json.loads(out)
    assert code == 0 and payload["failures"] == []
    registers = {p["name"]: p["registers"] for p in payload["plugins"] if p["builtin"]}
    assert registers == {
        "pragma_core.backends.cpu_cpp": {"backends": ["cpu-cpp"]},
        "pragma_core.backends.triton": {"backends": ["triton"]},
        "pragma_core.backends.cuda": {"backends": ["cuda", "hip"]},
        "pragma_core.profiling.metric_selectors": {"metric_selectors": ["default"]},
        "pragma_core.providers.litellm_provider": {"llm_providers": ["litellm"]},
        "pragma_core.offline.provider": {"llm_providers": ["offline"]},
    }


@pytest.mark.parametrize(
    "make_args, expected",
    [
        (lambda tmp: ["tasks", str(tmp / "nope.py")], "nope.py: no such task file or directory"),
        (lambda tmp: ["tasks", str(write(tmp, "def f(:\n"))], "1_Task.py:1: syntax error"),
        (lambda tmp: ["tasks", str(write(tmp, "x = 1\n"))], "no Model, get_inputs, get_init_inputs defined"),
        (
            lambda tmp: [
                "tasks",
                str(write(tmp, GOOD.replace("return [torch.rand(batch_size, dim)]", "return [{1: 2}]"))),
            ],
            "get_inputs() item 0 is a dict",
        ),
        (
            lambda tmp: [
                "tasks",
                str(write(tmp, GOOD.replace("return [torch.rand(batch_size, dim)]", "raise KeyError('x')"))),
            ],
            "get_inputs() raised KeyError",
        ),
        (
            lambda tmp: ["tasks", str(write(tmp, GOOD)), "--set", "width=3"],
            "size override width: the task has no module-level size constant (a number, tuple or other literal) named 'width'",
        ),
        (lambda tmp: ["tasks", str(write(tmp, GOOD)), "--set", "width"], "size override 'width': expected NAME=VALUE"),
    ],
)
def test_bad_input_prints_one_line_and_exits_2(capsys, tmp_path, make_args, expected):
    code, out, err = run(capsys, *make_args(tmp_path))
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pragma: error: ")
    assert expected in lines[0]
    assert "Traceback" not in err


def test_a_tasks_own_torch_warning_is_kept_in_its_analysis_not_printed(capsys, kernelbench):
    path = kernelbench / "level2" / "28_BMM_InstanceNorm_Sum_ResidualAdd_Multiply.py"
    code, out, err = run(capsys, "tasks", str(path), "--json")
    assert code == 0 and err == ""  # the terminal is pragma's: torch's UserWarning is not on it
    (task,) = json.loads(out)["tasks"]
    assert any("does not match num_features" in warning for warning in task["warnings"])


def test_a_table_piped_or_written_to_a_file_keeps_every_cell_whole(capsys, kernelbench):
    name = "75_conv_transposed_2D_asymmetric_input_asymmetric_kernel_strided__grouped____padded____dilated__"
    code, out, err = run(capsys, "tasks", str(kernelbench / "level1" / f"{name}.py"))
    assert code == 0, err
    assert f"level1/{name}" in out and "…" not in out  # no cell cut to fit 80 or 160 columns


@pytest.mark.parametrize("command", ["bench", "optimize"])
def test_an_output_folder_that_is_a_file_is_one_line_and_exit_2(capsys, tmp_path, examples, command):
    existing = tmp_path / "results"
    existing.write_text("kept\n")
    if command == "bench":
        args = ["bench", str(examples), "--only", "2_LeakyReLU", "--out", str(existing)]
    else:
        args = ["optimize", str(examples / "level1" / "2_LeakyReLU.py"), "--runs-dir", str(existing)]
    code, out, err = run(capsys, *args, "--max-attempts", "1")
    option = "--out" if command == "bench" else "--runs-dir"
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines() == [  # alone: no line on the agents before it
        f"pragma: error: {existing}: a file, not a folder; give {option} a folder (a new one, or the one used before)"
    ]
    assert existing.read_text() == "kept\n"  # nothing already written is lost


def test_a_bad_file_in_a_tree_does_not_hide_the_good_ones(capsys, tmp_path):
    write(tmp_path, GOOD, "level1/1_Good.py")
    write(tmp_path, "x = (\n", "level1/2_Bad.py")
    code, out, err = run(capsys, "tasks", str(tmp_path))
    assert code == 2
    assert "level1/1_Good" in out
    assert err.strip().splitlines() == [
        f"pragma: error: {tmp_path / 'level1' / '2_Bad.py'}:1: syntax error: '(' was never closed; fix the task file"
    ]


def test_a_listing_with_broken_files_keeps_the_errors_in_its_json(capsys, tmp_path):
    write(tmp_path, GOOD, "level1/1_Good.py")
    bad = write(tmp_path, "x = (\n", "level1/2_Bad.py")
    code, out, err = run(capsys, "tasks", str(tmp_path), "--json")
    assert code == 2
    listing = json.loads(out)
    assert [task["key"] for task in listing["tasks"]] == ["level1/1_Good"]
    assert listing["errors"] == [
        {"path": str(bad), "error": f"{bad}:1: syntax error: '(' was never closed; fix the task file"}
    ]
    assert err.strip().splitlines() == [f"pragma: error: {listing['errors'][0]['error']}"]


def test_every_option_of_every_command_says_what_it_does():
    import click

    from pragma_core.cli import cli

    def commands(group, path):
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from commands(command, [*path, name])
            else:
                yield [*path, name], command

    silent = [
        f"pragma {' '.join(path)} {'/'.join(param.opts)}"
        for path, command in commands(cli, [])
        for param in command.params
        if isinstance(param, click.Option) and not param.help
    ]
    assert silent == []


def test_debug_shows_the_traceback(capsys, tmp_path):
    from pragma_core.errors import TaskError

    with pytest.raises(TaskError):
        main(["--debug", "tasks", str(tmp_path / "nope.py"), "--set", "x"])


# -- as a user runs it: the installed script, a broken plugin package next to it ------------------


def pragma(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    script = Path(sys.executable).with_name("pragma")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "pragma_core"]
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PRAGMA_")} | (env or {})
    return subprocess.run(command + list(args), capture_output=True, text=True, env=full_env, timeout=120)


@pytest.fixture
def broken_plugin_path(tmp_path) -> str:
    """A folder holding an installed-looking distribution whose plugin fails to import."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "pragma_broken.py").write_text(BROKEN_PLUGIN)
    info = site / "pragma_broken-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pragma-broken\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text("[pragma]\nbroken = pragma_broken\n")
    return str(site)


def test_broken_plugin_is_listed_as_failed_and_commands_still_work(broken_plugin_path, examples):
    listing = pragma("plugins", env={"PYTHONPATH": broken_plugin_path})
    assert listing.returncode == 0, listing.stderr
    assert "failed to load" in listing.stdout and "broken" in listing.stdout
    assert "built against pragma 9" in listing.stdout
    as_json = json.loads(pragma("plugins", "--json", env={"PYTHONPATH": broken_plugin_path}).stdout)
    (failure,) = as_json["failures"]
    assert failure["name"] == "broken" and failure["distribution"] == "pragma-broken"
    assert failure["version"] == "0.3" and failure["stage"] == "import"
    tasks = pragma("tasks", str(examples / "level1" / "1_GELUTanh.py"), env={"PYTHONPATH": broken_plugin_path})
    assert tasks.returncode == 0 and "level1/1_GELUTanh" in tasks.stdout


def test_broken_plugin_in_strict_mode_is_one_line_and_exit_2(broken_plugin_path):
    result = pragma("plugins", env={"PYTHONPATH": broken_plugin_path, "PRAGMA_STRICT_PLUGINS": "1"})
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "pragma: error: plugin 'broken' (pragma-broken 0.3) failed to load at import: "
        "ImportError: built against pragma 9 (PRAGMA_STRICT_PLUGINS is set)"
    ]


def test_version():
    result = pragma("--version")
    assert result.returncode == 0 and result.stdout.startswith("pragma, version ")


# -- frictions a new user met ------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["verify", "profile"])
def test_an_empty_candidate_file_is_bad_input(capsys, tmp_path, examples, command):
    empty = tmp_path / "my_gelu.py"
    empty.write_text("\n  \n")
    extra = ["--profiler", "valgrind"] if command == "profile" else []
    code, out, err = run(capsys, command, str(examples / "level1" / "1_GELUTanh.py"), str(empty), *extra)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        f"pragma: error: {empty}: the candidate file is empty; write a module that defines class ModelNew"
    ]


def test_profile_without_keep_leaves_nothing_in_the_temporary_folder(capsys, tmp_path, monkeypatch, examples):
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    task = examples / "level1" / "1_GELUTanh.py"
    candidate = examples.parent / "candidates" / "1_GELUTanh_fast.py"
    code, out, err = run(
        capsys, "profile", str(task), str(candidate), "--set", "batch_size=8", "--profiler", "valgrind", "--json"
    )
    assert code == 0, err
    profile = json.loads(out)
    assert profile["metrics"] and profile["raw_paths"] == []
    assert "raw tool output not kept (use --keep DIR)" in profile["notes"]
    # torch's own compile cache (torchinductor_<user>) appears when this process first imports inductor
    assert [path for path in scratch.iterdir() if not path.name.startswith("torchinductor_")] == []


def test_optimize_with_a_misspelt_profiler_stops_before_anything_is_written(capsys, tmp_path, examples):
    runs = tmp_path / "runs"
    task = examples / "level1" / "1_GELUTanh.py"
    code, out, err = run(capsys, "optimize", str(task), "--profilers", "valgrind,nsight", "--runs-dir", str(runs))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("pragma: error: no profiler named 'nsight'; installed: ") and "valgrind" in line
    assert not runs.exists()


def test_plugins_says_which_backends_and_profilers_can_run_here(capsys):
    code, out, _ = run(capsys, "plugins", "--json")
    assert code == 0
    here = {(row["kind"], row["name"]): row for row in json.loads(out)["availability"]}
    assert here[("backend", "cpu-cpp")]["available"] is True
    assert here[("profiler", "valgrind")]["available"] is True  # installed on every machine this runs on
    for row in here.values():
        assert row["available"] or row["reason"], row  # never "no" without a why
    code, out, _ = run(capsys, "plugins")
    assert "on this machine" in out and "runs here" in out


def test_a_model_without_its_key_fails_at_once_naming_the_variable(capsys, tmp_path, monkeypatch, examples):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    runs = tmp_path / "runs"
    code, out, err = run(
        capsys, "optimize", str(examples / "level1" / "1_GELUTanh.py"), "--model", "openai/gpt-4o-mini",
        "--runs-dir", str(runs),
    )  # fmt: skip
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "pragma: error: openai/gpt-4o-mini needs the environment variable OPENAI_API_KEY, which is not set: "
        "set it and run again"
    ]
    assert not runs.exists()  # before the run folder, so before the reference was timed


def test_roofline_as_json(capsys, examples):
    code, out, err = run(capsys, "roofline", str(examples / "level1" / "10_Matmul.py"), "--set", "M=64", "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["task"] == "level1/10_Matmul" and document["flops"] > 0
    floor, peaks = document["floor"], document["peaks"]
    assert floor["floor_ms"] == max(floor["memory_ms"], floor["compute_ms"]) and floor["bound"] in ("memory", "compute")
    assert peaks["dram_gbs"] > 0 and peaks["fma_gflops"] > 0 and peaks["hardware"]["model_name"]

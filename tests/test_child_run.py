"""The layer the verifier and profiling share to run candidate code: job folders that never outlive
their run, and a build folder per candidate."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from pragma_core.records import Candidate
from pragma_core.sandbox.child_run import JobFolder, candidate_build_dir, jobs_root
from pragma_core.tasks.loading import load_task

from .conftest import EXAMPLES

GELU = EXAMPLES / "level1" / "1_GELUTanh.py"
SOURCE = "class ModelNew: pass\n"


def test_a_job_folder_holds_what_the_parent_wrote_and_is_removed_on_exit():
    task = load_task(GELU, {"batch_size": 2, "dim": 8})
    candidate = Candidate(source=SOURCE, backend="cpu-cpp")
    with JobFolder(task, candidate, {"backend": "cpu-cpp", "threads": 1}) as folder:
        assert folder.root.parent == jobs_root() and folder.root.name.startswith(f"{os.getpid()}-")
        assert folder.candidate_file.read_text() == SOURCE
        assert "batch_size = 2" in folder.task_file.read_text()
        job = json.loads(folder.job_file.read_text())
        assert job["writable"] == [str(folder.work), str(folder.build_dir)]
        assert folder.build_dir == candidate_build_dir(candidate)
    assert not folder.root.exists()


def test_a_job_folder_is_removed_when_the_run_raises(tmp_path):
    task = load_task(GELU, {"batch_size": 2, "dim": 8})
    try:
        with JobFolder(task, None, {"threads": 1}) as folder:
            raise RuntimeError("the run failed")
    except RuntimeError:
        pass
    assert not folder.root.exists()


def test_a_kept_job_folder_stays():
    task = load_task(GELU, {"batch_size": 2, "dim": 8})
    keep = jobs_root().parent / f"pragma-kept-{os.getpid()}"
    with JobFolder(task, None, {"threads": 1}, root=keep):
        pass
    assert (keep / "task.py").exists()
    subprocess.run(["rm", "-rf", str(keep)], check=True)


def test_folders_of_a_killed_run_are_swept_by_the_next_one():
    """A pragma process killed with -9 cannot clean up; the next run removes its folder."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(done.stdout)
    stale = jobs_root() / f"{dead_pid}-leftover"
    (stale / "work").mkdir(parents=True)
    mine = jobs_root() / f"{os.getpid()}-still-running"
    mine.mkdir(parents=True, exist_ok=True)
    task = load_task(GELU, {"batch_size": 2, "dim": 8})
    with JobFolder(task, None, {"threads": 1}):
        pass
    assert not stale.exists()
    assert mine.exists()
    mine.rmdir()


def test_each_candidate_builds_in_a_folder_of_its_own():
    one = candidate_build_dir(Candidate(source=SOURCE, backend="cpu-cpp"))
    same = candidate_build_dir(Candidate(source=SOURCE, backend="cpu-cpp"))
    other = candidate_build_dir(Candidate(source=SOURCE + "# changed\n", backend="cpu-cpp"))
    assert one == same and one != other

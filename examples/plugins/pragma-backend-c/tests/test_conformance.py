"""pragma's conformance suite for backends, run against this plugin as installed."""

from pathlib import Path

from pragma_core.testing import BackendPluginTests

HERE = Path(__file__).parent


class TestCpuC(BackendPluginTests):
    backend_name = "cpu-c"
    task_path = HERE / "tasks" / "relu.py"
    sizes = {"batch_size": 4}
    candidate_path = HERE / "candidates" / "relu.py"
    broken_path = HERE / "candidates" / "broken.py"

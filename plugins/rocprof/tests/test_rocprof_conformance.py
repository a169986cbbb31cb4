"""pragma's conformance suite for profiler plugins, run on every real rocprof output we keep."""

from pathlib import Path

from pragma_core.testing import ProfilerPluginTests

DATA = Path(__file__).parent / "data"


class TestRocprofConformance(ProfilerPluginTests):
    profiler_name = "rocprof"
    # every CSV the tool wrote; the .txt files are rocprof *input* files, and derived-omniperf/
    # holds files Omniperf re-wrote (tested on their own in test_rocprof_parse.py); a marker trace
    # holds ROCTx ranges, not metrics (pragma_rocprof.forward reads it, test_rocprof_forward.py)
    fixtures = sorted(path for path in DATA.glob("*.csv") if not path.name.endswith("marker_api_trace.csv"))

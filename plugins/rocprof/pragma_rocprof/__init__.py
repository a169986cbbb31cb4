"""pragma-rocprof: AMD's rocprofv3 as a pragma profiler.

- :func:`pragma_rocprof.collect.collect` runs a target under rocprofv3, one run per pass of
  counters, and returns the metrics of the candidate's kernels;
- :func:`pragma_rocprof.parse.parse` reads one rocprof CSV file (rocprofv3, rocprof v1, rocprofv2)
  into metrics and needs no GPU;
- :func:`pragma_rocprof.probe.probe` says whether rocprofv3 and an AMD GPU are here;
- :mod:`pragma_rocprof.metrics` holds the default metrics and their meanings,
  :mod:`pragma_rocprof.commands` the rocprofv3 command lines;
- :mod:`pragma_rocprof.forward` cuts rocprofv3's output to the ``pragma_forward`` ROCTx range,
  :mod:`pragma_core.profiling.library_kernels` tells library kernels (rocBLAS, MIOpen, PyTorch...) from the
  candidate's.

The plugin registers itself through the ``pragma`` entry point (:mod:`pragma_rocprof.plugin`).
The functions are not re-exported here, so each module keeps its own name.
"""

__version__ = "0.1.0"

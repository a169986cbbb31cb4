"""The sizes a task runs at: shrunk for profiling, fitted to this machine, and the caches simulated.

``shrinking`` scales a task's input-shaping constants down to a data size, outer dimensions first;
``fitting`` scales them until the eager reference takes about T ms here (``--fit-ms``);
``profiling`` picks the size a profiler watches; ``caches`` describes the caches a simulator is
given. It sits above the verifier (fitting times the reference as a verification does) and below
profiling.
"""

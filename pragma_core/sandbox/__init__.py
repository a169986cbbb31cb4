"""Running untrusted code: child processes under limits, in a read-only world, reporting over a pipe.

``process`` starts a child with time and memory limits, contained where the OS allows; ``init`` is
the first program inside the sandbox's namespaces (run as a script); ``channel`` is the pipe a
child reports over (JSON headers and raw tensors, never pickles); ``child_run`` is what the
verifier and profiling share to run a task and a candidate in a child; ``tools`` runs a
profiler's or compiler's tool with a timeout, the one way a plugin runs one.
"""

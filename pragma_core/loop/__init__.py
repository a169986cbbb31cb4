"""The loop: Coder writes, Verifier checks, Profiler measures, rules diagnose, Conductor advises.

``optimizer`` runs one task's loop (:func:`optimize`): ``baseline`` measures the reference before
attempt 1; ``rounds`` chooses the next attempts (over ``search``'s strategies: linear, tree, beam)
and asks for plans; ``writing`` has the Coder or the debugger write them; ``attempt`` runs one
(verify, profile, ``diagnosis``'s rule-based reading, the Conductor's ``advice``); ``stopping``
says when the run ends. Beside them: ``conversation`` (asking the provider), ``profiles``
(profiling in a run, with the run's :class:`~pragma_core.profiling.session.ProfilingSession`),
``next_child`` (the sandbox child started ahead), ``progress`` (phases, listeners and
their clock), ``settings``; ``run_directory`` writes the run folder and resumes from it;
``run_summary`` gives the run and its trace as JSON.
"""

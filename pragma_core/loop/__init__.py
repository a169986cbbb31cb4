"""The loop: Coder writes, Verifier checks, Profiler measures, rules diagnose, Conductor advises.

``optimizer`` runs one task's loop (:func:`optimize`); ``search`` decides which attempt the next
one builds on (linear, tree, beam); ``diagnosis`` is the rule-based reading of an attempt;
``run_directory`` writes the run folder and resumes from it; ``run_summary`` gives the run and its
trace as JSON.
"""

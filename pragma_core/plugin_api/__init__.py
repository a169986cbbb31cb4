"""What a plugin registers and how pragma finds it: components, hooks and the registry.

``components`` holds the four kinds of record a plugin registers (``Backend``, ``Profiler``,
``LLMProvider``, ``MetricSelector``) and their protocols; ``hookspecs`` the four hooks;
``registry`` the typed front to pluggy that loads built-ins and entry points one by one and
records failures. Plugin authors import these names from :mod:`pragma_core` itself.
"""

"""The four hooks a pragma plugin can implement.

A plugin is a module with functions decorated by :data:`hookimpl`, named after the hooks below.
Each hook receives a ``register`` callback; call it once per component. Names are unique across
all plugins. Publish the module under the entry-point group ``pragma``::

    # pyproject.toml
    [project.entry-points.pragma]
    myprof = "pragma_myprof.plugin"

    # pragma_myprof/plugin.py
    from pragma_core import hookimpl, Profiler

    @hookimpl
    def pragma_register_profilers(register):
        register(Profiler(name="myprof", ...))

The docs (``docs/plugins.md``) show each hook with this exact signature; a test keeps them in step.
"""

from __future__ import annotations

from collections.abc import Callable

import pluggy

from .components import Backend, LLMProvider, MetricSelector, Profiler

__all__ = [
    "PROJECT_NAME",
    "hookspec",
    "hookimpl",
    "pragma_register_backends",
    "pragma_register_profilers",
    "pragma_register_llm_providers",
    "pragma_register_metric_selectors",
]

PROJECT_NAME = "pragma"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def pragma_register_backends(register: Callable[[Backend], None]) -> None:
    """Register the kernel backends this plugin provides.

    :param register: call with one :class:`~pragma_core.Backend` per backend, for example
        ``register(Backend(name="cpu-c", device="cpu", language="c", guide=GUIDE,
        probe=probe, load=load, evidence=CallEvidence, kernel_hint=HINT))``; the fields are
        described on :class:`~pragma_core.plugin_api.components.Backend` and in docs/plugins.md.
    """


@hookspec
def pragma_register_profilers(register: Callable[[Profiler], None]) -> None:
    """Register the profilers this plugin provides.

    :param register: call with one :class:`~pragma_core.Profiler` per profiler, for example
        ``register(Profiler(name="perf", devices=("cpu",), probe=probe,
        default_metrics=("instructions", "cycles"), collect=collect, parse=parse))``.
    """


@hookspec
def pragma_register_llm_providers(register: Callable[[LLMProvider], None]) -> None:
    """Register the providers that answer the Coder's and the Conductor's requests.

    :param register: call with one :class:`~pragma_core.LLMProvider` per provider, for example
        ``register(LLMProvider(name="litellm", complete=complete))``.
    """


@hookspec
def pragma_register_metric_selectors(register: Callable[[MetricSelector], None]) -> None:
    """Register metric selectors: which metrics reach the Conductor, which to collect by default.

    :param register: call with one :class:`~pragma_core.MetricSelector` per selector, for example
        ``register(MetricSelector(name="tensor-cores", select=select, defaults=defaults))``.
    """

"""The plugin registry: a typed front to pluggy that finds, loads and isolates plugins.

Built-in components travel the same road as third-party ones: the modules in
:data:`BUILTIN_PLUGINS` are registered first, then every entry point of group ``pragma``, one at a
time. A plugin that fails to import, implements a hook that does not exist, raises while
registering, or registers a name another plugin already took is recorded as a
:class:`PluginFailure` and left out; the rest keep working. Environment variables:

``PRAGMA_STRICT_PLUGINS=1``
    raise :class:`~pragma_core.errors.PluginError` at the first failure instead.
``PRAGMA_LOAD_PLUGINS=a,b``
    load only these installed plugins (built-ins always load); empty: no installed plugin.
``PRAGMA_DISABLE_PLUGINS=a,b``
    skip these plugins, installed or built-in (a built-in's name is its module path).

Loading is lazy and happens once per process: call :func:`get_registry`; tests call
:func:`reset_registry` or build their own :class:`PluginRegistry`.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata as metadata
import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import attrs
import pluggy

from ..errors import PluginError
from . import hookspecs
from .components import Backend, LLMProvider, MetricSelector, Profiler

__all__ = [
    "BUILTIN_PLUGINS",
    "COMPONENT_KINDS",
    "PluginInfo",
    "PluginFailure",
    "PluginRegistry",
    "get_registry",
    "reset_registry",
]

BUILTIN_PLUGINS: tuple[str, ...] = (
    "pragma_core.backends.cpu_cpp",
    "pragma_core.backends.triton",
    "pragma_core.backends.cuda",
    "pragma_core.profiling.metric_selectors",
    "pragma_core.providers.litellm_provider",
    "pragma_core.offline.provider",
)
"""Modules of pragma-core registered as plugins, in this order, before any installed plugin."""

ENTRY_POINT_GROUP = "pragma"

COMPONENT_KINDS: dict[str, tuple[str, type]] = {
    "backends": ("pragma_register_backends", Backend),
    "profilers": ("pragma_register_profilers", Profiler),
    "llm_providers": ("pragma_register_llm_providers", LLMProvider),
    "metric_selectors": ("pragma_register_metric_selectors", MetricSelector),
}
"""Component kind -> (hook that registers it, record type it must be)."""

C = TypeVar("C")


@attrs.frozen(kw_only=True)
class PluginInfo:
    """A loaded plugin: where it comes from, which hooks it implements, what it registered."""

    name: str
    distribution: str | None
    version: str | None
    builtin: bool
    hooks: tuple[str, ...]
    registers: dict[str, tuple[str, ...]]


@attrs.frozen(kw_only=True)
class PluginFailure:
    """A plugin (or part of one) that was left out, and why."""

    name: str
    distribution: str | None
    version: str | None
    stage: str  # import | validate | register | conflict | missing
    error: str

    def describe(self) -> str:
        origin = f" ({self.distribution} {self.version})" if self.distribution else ""
        return f"plugin {self.name!r}{origin} failed to load at {self.stage}: {self.error}"


@attrs.frozen
class _Origin:
    name: str
    distribution: str | None
    version: str | None
    builtin: bool

    def label(self) -> str:
        return f"{self.name!r} ({self.distribution} {self.version})" if self.distribution else repr(self.name)


def _installed_entry_points() -> Iterable[metadata.EntryPoint]:
    return metadata.entry_points(group=ENTRY_POINT_GROUP)


def _core_version() -> str | None:
    try:
        return metadata.version("pragma-core")
    except metadata.PackageNotFoundError:
        return None


def _names(environ: Mapping[str, str], variable: str) -> set[str] | None:
    raw = environ.get(variable)
    if raw is None:
        return None
    return {name.strip() for name in raw.split(",") if name.strip()}


class PluginRegistry:
    """Loads plugins on first use and holds what they registered, by kind and name."""

    def __init__(
        self,
        *,
        builtins: Iterable[str] = BUILTIN_PLUGINS,
        entry_points: Callable[[], Iterable[metadata.EntryPoint]] = _installed_entry_points,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._builtins = tuple(builtins)
        self._entry_points = entry_points
        self._environ = os.environ if environ is None else environ
        self._loaded = False  # loading has begun (a plugin that queries the registry while loading sees it partly)
        self._ready = False  # loading has ended
        self._loading = threading.RLock()  # another thread's first query waits for the loading to end
        self._pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
        self._pm.add_hookspecs(hookspecs)
        self._origins: list[_Origin] = []
        self._failures: list[PluginFailure] = []
        self._components: dict[str, dict[str, Any]] = {kind: {} for kind in COMPONENT_KINDS}
        self._owners: dict[tuple[str, str], _Origin] = {}

    # -- public, typed API --------------------------------------------------------------------

    @property
    def plugin_manager(self) -> pluggy.PluginManager:
        """The underlying pluggy manager, loaded (for introspection; call components through us)."""
        self._ensure_loaded()
        return self._pm

    def plugins(self) -> tuple[PluginInfo, ...]:
        """Every loaded plugin, built-ins first, in load order."""
        self._ensure_loaded()
        return tuple(self._info(origin) for origin in self._origins)

    def failures(self) -> tuple[PluginFailure, ...]:
        """Every plugin or registration that was left out, with the error."""
        self._ensure_loaded()
        return tuple(self._failures)

    def backends(self) -> Mapping[str, Backend]:
        return self._kind("backends")

    def profilers(self) -> Mapping[str, Profiler]:
        return self._kind("profilers")

    def llm_providers(self) -> Mapping[str, LLMProvider]:
        return self._kind("llm_providers")

    def metric_selectors(self) -> Mapping[str, MetricSelector]:
        return self._kind("metric_selectors")

    def backend(self, name: str) -> Backend:
        return self._get("backends", name)

    def profiler(self, name: str) -> Profiler:
        return self._get("profilers", name)

    def llm_provider(self, name: str) -> LLMProvider:
        return self._get("llm_providers", name)

    def metric_selector(self, name: str) -> MetricSelector:
        return self._get("metric_selectors", name)

    # -- loading ------------------------------------------------------------------------------

    def _ensure_loaded(self) -> None:
        if self._ready:
            return
        with self._loading:
            if not self._loaded:
                self._loaded = True
                self._load()
                self._ready = True

    def _load(self) -> None:
        self._strict = self._environ.get("PRAGMA_STRICT_PLUGINS", "") not in ("", "0", "false")
        disabled = _names(self._environ, "PRAGMA_DISABLE_PLUGINS") or set()
        allowed = _names(self._environ, "PRAGMA_LOAD_PLUGINS")

        core_version = _core_version()
        for module_name in self._builtins:
            if module_name in disabled:
                continue
            origin = _Origin(module_name, "pragma-core", core_version, builtin=True)
            self._load_plugin(origin, functools.partial(importlib.import_module, module_name))

        seen: set[str] = set()
        for entry_point in sorted(self._entry_points(), key=lambda ep: ep.name):
            if entry_point.name in disabled or (allowed is not None and entry_point.name not in allowed):
                continue
            seen.add(entry_point.name)
            dist = getattr(entry_point, "dist", None)
            origin = _Origin(
                entry_point.name,
                dist.name if dist is not None else None,
                dist.version if dist is not None else None,
                builtin=False,
            )
            self._load_plugin(origin, entry_point.load)
        for name in sorted((allowed or set()) - seen - disabled):
            self._fail(
                _Origin(name, None, None, builtin=False),
                "missing",
                "PRAGMA_LOAD_PLUGINS names it, but no installed plugin has that name",
            )

        for origin in list(self._origins):
            self._collect(origin)

    def _load_plugin(self, origin: _Origin, load: Callable[[], Any]) -> None:
        if self._pm.has_plugin(origin.name):
            other = next(o for o in self._origins if o.name == origin.name)
            self._fail(origin, "conflict", f"the plugin name is already taken by {other.label()}")
            return
        try:
            plugin = load()
        except Exception as error:  # a broken plugin must not take the host down
            self._fail(origin, "import", _one_line(error))
            return
        try:
            self._pm.register(plugin, name=origin.name)
        except Exception as error:
            self._fail(origin, "validate", _one_line(error))
            return
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as error:
            self._pm.unregister(name=origin.name)
            self._fail(origin, "validate", f"{_one_line(error)} (no such pragma hook)")
            return
        self._origins.append(origin)

    def _collect(self, origin: _Origin) -> None:
        for kind, (hook_name, record_type) in COMPONENT_KINDS.items():
            for impl in getattr(self._pm.hook, hook_name).get_hookimpls():
                if impl.plugin_name != origin.name:
                    continue
                registered: list[Any] = []

                def register(component: Any, _into: list[Any] = registered) -> None:
                    _into.append(component)

                try:
                    impl.function(**({"register": register} if "register" in impl.argnames else {}))
                except Exception as error:
                    self._fail(origin, "register", f"{hook_name} raised {_one_line(error)}")
                    continue
                for component in registered:
                    self._add(origin, kind, record_type, component)

    def _add(self, origin: _Origin, kind: str, record_type: type[Any], component: Any) -> None:
        singular = kind[:-1].replace("_", " ")
        if not isinstance(component, record_type):
            self._fail(
                origin,
                "register",
                f"registered a {type(component).__name__} where a {record_type.__name__} belongs",
            )
            return
        owner = self._owners.get((kind, component.name))
        if owner is not None:
            self._fail(
                origin,
                "conflict",
                f"{singular} {component.name!r} is registered by both {owner.label()} and "
                f"{origin.label()}; keep one with PRAGMA_DISABLE_PLUGINS={origin.name}",
            )
            return
        self._owners[(kind, component.name)] = origin
        self._components[kind][component.name] = component

    def _fail(self, origin: _Origin, stage: str, error: str) -> None:
        failure = PluginFailure(
            name=origin.name,
            distribution=origin.distribution,
            version=origin.version,
            stage=stage,
            error=error,
        )
        if self._strict:
            raise PluginError(f"{failure.describe()} (PRAGMA_STRICT_PLUGINS is set)")
        self._failures.append(failure)

    # -- helpers ------------------------------------------------------------------------------

    def _kind(self, kind: str) -> Mapping[str, Any]:
        self._ensure_loaded()
        return dict(self._components[kind])

    def _get(self, kind: str, name: str) -> Any:
        components = self._kind(kind)
        if name not in components:
            singular = kind[:-1].replace("_", " ")
            known = ", ".join(sorted(components)) or "none"
            raise PluginError(f"no {singular} named {name!r}; installed: {known} (see `pragma plugins`)")
        return components[name]

    def _info(self, origin: _Origin) -> PluginInfo:
        hooks = tuple(
            sorted(caller.name for caller in self._pm.get_hookcallers(self._pm.get_plugin(origin.name)) or ())
        )
        registers = {
            kind: tuple(sorted(name for (k, name), owner in self._owners.items() if k == kind and owner == origin))
            for kind in COMPONENT_KINDS
        }
        return PluginInfo(
            name=origin.name,
            distribution=origin.distribution,
            version=origin.version,
            builtin=origin.builtin,
            hooks=hooks,
            registers={kind: names for kind, names in registers.items() if names},
        )


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


_registry: PluginRegistry | None = None
_creating = threading.Lock()


def get_registry() -> PluginRegistry:
    """The process-wide registry, created on first call; plugins load on its first query."""
    global _registry
    with _creating:
        if _registry is None:
            _registry = PluginRegistry()
        return _registry


def reset_registry() -> None:
    """Forget the process-wide registry, so the next :func:`get_registry` loads plugins anew."""
    global _registry
    _registry = None

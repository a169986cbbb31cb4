"""The plugin registry: built-ins, installed plugins through real entry points, and every failure."""

from __future__ import annotations

import pytest

from pragma_core import Backend, LLMProvider, MetricSelector, Profiler
from pragma_core.errors import PluginError
from pragma_core.plugin_api.registry import PluginRegistry, get_registry, reset_registry

# One component of each kind, as a plugin module would build it. The callables are trivial: these
# tests are about registration, not about what the components do.
COMPONENTS = """
from pragma_core import hookimpl, Availability, Backend, Profiler, LLMProvider, MetricSelector
from pragma_core import Completion, Profile

def probe():
    return Availability(available=True)

class NoKernels:
    def install(self):
        pass

    def count(self):
        return 0

def make_backend(name):
    return Backend(name=name, device="cpu", language="c++", guide="write C++", probe=probe,
                   load=lambda candidate, workdir: object, evidence=NoKernels,
                   kernel_hint="this test backend runs no kernel")

def make_profiler(name):
    return Profiler(name=name, devices=("cpu",), probe=probe, default_metrics=("cycles",),
                    collect=lambda target, metrics: Profile(profiler=name), parse=lambda raw: [])

def make_llm_provider(name):
    return LLMProvider(name=name, complete=lambda request: Completion(text="", model=name))

def make_metric_selector(name):
    return MetricSelector(name=name, select=lambda profile: profile.metrics,
                          defaults=lambda profiler, device: ())
"""

HOOKS = {
    "pragma_register_backends": ("backends", "make_backend", Backend),
    "pragma_register_profilers": ("profilers", "make_profiler", Profiler),
    "pragma_register_llm_providers": ("llm_providers", "make_llm_provider", LLMProvider),
    "pragma_register_metric_selectors": ("metric_selectors", "make_metric_selector", MetricSelector),
}


def plugin_source(hook: str, *names: str) -> str:
    _kind, factory, _type = HOOKS[hook]
    calls = "\n".join(f"    register({factory}({name!r}))" for name in names) or "    pass"
    return COMPONENTS + f"\n@hookimpl\ndef {hook}(register):\n{calls}\n"


def test_builtins_are_registered_as_plugins():
    registry = PluginRegistry(entry_points=lambda: [])
    backends, triton, cuda, selectors, providers, offline = registry.plugins()
    assert all(p.builtin and p.distribution == "pragma-core" and p.version for p in (backends, selectors))
    assert backends.name == "pragma_core.backends.cpu_cpp"
    assert backends.registers == {"backends": ("cpu-cpp",)}
    assert backends.hooks == ("pragma_register_backends",)
    assert triton.registers == {"backends": ("triton",)} and cuda.registers == {"backends": ("cuda", "hip")}
    assert selectors.name == "pragma_core.profiling.metric_selectors"
    assert selectors.registers == {"metric_selectors": ("default",)}
    assert registry.metric_selector("default").name == "default"
    assert providers.registers == {"llm_providers": ("litellm",)}
    assert offline.registers == {"llm_providers": ("offline",)} and registry.llm_provider("offline").prepare
    assert "Worked example" in registry.backend("cpu-cpp").guide
    assert registry.failures() == ()


@pytest.mark.parametrize("hook", sorted(HOOKS))
def test_each_hook_registers_components_from_an_installed_plugin(plugin_site, hook):
    kind, _factory, record_type = HOOKS[hook]
    plugin_site.add("pragma_fake", plugin_source(hook, "alpha", "beta"), distribution="pragma-fake", version="2.5")
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    components = getattr(registry, kind)()
    assert {"alpha", "beta"} <= set(components)
    assert all(isinstance(components[name], record_type) for name in ("alpha", "beta"))
    fake = next(p for p in registry.plugins() if p.name == "pragma_fake")
    assert (fake.distribution, fake.version, fake.builtin) == ("pragma-fake", "2.5", False)
    assert fake.hooks == (hook,)
    assert fake.registers[kind] == ("alpha", "beta")


def test_a_plugin_that_raises_on_import_is_recorded_and_the_rest_still_load(plugin_site):
    plugin_site.add("pragma_broken", "import no_such_module_anywhere\n", distribution="pragma-broken")
    plugin_site.add("pragma_good", plugin_source("pragma_register_profilers", "goodprof"))
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    assert "goodprof" in registry.profilers()
    (failure,) = registry.failures()
    assert failure.name == "pragma_broken" and failure.distribution == "pragma-broken"
    assert failure.stage == "import"
    assert "ModuleNotFoundError" in failure.error and "no_such_module_anywhere" in failure.error
    assert "pragma_broken" not in [p.name for p in registry.plugins()]


def test_a_plugin_implementing_an_unknown_hook_is_rejected_by_check_pending(plugin_site):
    source = plugin_source("pragma_register_backends", "half") + (
        "\n@hookimpl\ndef pragma_register_widgets(register):\n    pass\n"
    )
    plugin_site.add("pragma_typo", source)
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    (failure,) = registry.failures()
    assert failure.stage == "validate" and "pragma_register_widgets" in failure.error
    # Nothing of a rejected plugin is half-registered.
    assert "half" not in registry.backends()
    assert not registry.plugin_manager.has_plugin("pragma_typo")


def test_an_implementation_with_unknown_arguments_is_rejected(plugin_site):
    plugin_site.add(
        "pragma_badargs",
        COMPONENTS + "\n@hookimpl\ndef pragma_register_profilers(register, device):\n    pass\n",
    )
    (failure,) = PluginRegistry(entry_points=plugin_site.entry_points).failures()
    assert failure.name == "pragma_badargs" and failure.stage == "validate"
    assert "device" in failure.error


def test_duplicate_component_names_are_rejected_naming_both_plugins(plugin_site):
    plugin_site.add(
        "pragma_first", plugin_source("pragma_register_profilers", "perf"), distribution="pragma-first", version="1.0"
    )
    plugin_site.add(
        "pragma_second", plugin_source("pragma_register_profilers", "perf"), distribution="pragma-second", version="3.0"
    )
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    (failure,) = registry.failures()
    assert failure.stage == "conflict"
    assert "'pragma_first' (pragma-first 1.0)" in failure.error
    assert "'pragma_second' (pragma-second 3.0)" in failure.error
    assert "PRAGMA_DISABLE_PLUGINS" in failure.error
    # The first one registered keeps the name.
    (first,) = [p for p in registry.plugins() if p.name == "pragma_first"]
    assert first.registers == {"profilers": ("perf",)}


def test_a_plugin_cannot_take_a_builtin_name(plugin_site):
    plugin_site.add("pragma_shadow", plugin_source("pragma_register_metric_selectors", "default"))
    (failure,) = PluginRegistry(entry_points=plugin_site.entry_points).failures()
    assert "pragma_core.profiling.metric_selectors" in failure.error and "pragma_shadow" in failure.error


def test_two_distributions_with_the_same_entry_point_name_conflict(plugin_site):
    plugin_site.add(
        "pragma_one", plugin_source("pragma_register_backends", "one"), entry_point="same", distribution="dist-one"
    )
    plugin_site.add(
        "pragma_two", plugin_source("pragma_register_backends", "two"), entry_point="same", distribution="dist-two"
    )
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    (failure,) = registry.failures()
    assert failure.stage == "conflict" and "dist-one" in failure.error + failure.distribution
    assert "dist-two" in failure.error + failure.distribution
    assert len({"one", "two"} & set(registry.backends())) == 1


def test_a_hook_that_raises_is_recorded(plugin_site):
    plugin_site.add(
        "pragma_raises",
        COMPONENTS + "\n@hookimpl\ndef pragma_register_backends(register):\n"
        "    raise RuntimeError('no compiler configured')\n",
    )
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    (failure,) = registry.failures()
    assert failure.stage == "register" and "no compiler configured" in failure.error
    assert "pragma_register_backends" in failure.error


def test_registering_the_wrong_record_type_is_recorded(plugin_site):
    plugin_site.add(
        "pragma_wrongtype",
        COMPONENTS + "\n@hookimpl\ndef pragma_register_backends(register):\n"
        "    register(make_profiler('notabackend'))\n",
    )
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    (failure,) = registry.failures()
    assert "Profiler where a Backend belongs" in failure.error
    assert "notabackend" not in registry.backends()


def test_strict_mode_raises_at_the_first_failure(plugin_site, monkeypatch):
    plugin_site.add("pragma_broken", "raise ImportError('wheel built for another python')\n")
    monkeypatch.setenv("PRAGMA_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="pragma_broken.*wheel built for another python"):
        PluginRegistry(entry_points=plugin_site.entry_points).plugins()


def test_installed_distributions_are_found_through_importlib_metadata(plugin_site):
    plugin_site.add("pragma_found", plugin_source("pragma_register_profilers", "foundprof"))
    assert "foundprof" in PluginRegistry().profilers()


def test_allow_list_loads_only_named_plugins_and_reports_missing_names(plugin_site, monkeypatch):
    plugin_site.add("pragma_a", plugin_source("pragma_register_profilers", "aprof"))
    plugin_site.add("pragma_b", plugin_source("pragma_register_profilers", "bprof"))
    monkeypatch.setenv("PRAGMA_LOAD_PLUGINS", "pragma_a, pragma_nowhere")
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    assert set(registry.profilers()) == {"aprof"}
    assert "default" in registry.metric_selectors()  # built-ins always load
    (failure,) = registry.failures()
    assert failure.name == "pragma_nowhere" and failure.stage == "missing"


def test_empty_allow_list_loads_no_installed_plugin(plugin_site, monkeypatch):
    plugin_site.add("pragma_a", plugin_source("pragma_register_profilers", "aprof"))
    monkeypatch.setenv("PRAGMA_LOAD_PLUGINS", "")
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    assert registry.profilers() == {} and registry.failures() == ()


def test_disable_list_skips_installed_and_builtin_plugins(plugin_site, monkeypatch):
    plugin_site.add("pragma_a", plugin_source("pragma_register_profilers", "aprof"))
    plugin_site.add("pragma_b", plugin_source("pragma_register_profilers", "bprof"))
    monkeypatch.setenv("PRAGMA_DISABLE_PLUGINS", "pragma_b,pragma_core.profiling.metric_selectors")
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    assert set(registry.profilers()) == {"aprof"}
    assert registry.metric_selectors() == {}


def test_disabling_one_side_of_a_conflict_resolves_it(plugin_site, monkeypatch):
    plugin_site.add("pragma_shadow", plugin_source("pragma_register_metric_selectors", "default"))
    monkeypatch.setenv("PRAGMA_DISABLE_PLUGINS", "pragma_core.profiling.metric_selectors")
    registry = PluginRegistry(entry_points=plugin_site.entry_points)
    assert registry.failures() == ()
    assert registry.metric_selectors()["default"].select.__module__ == "pragma_shadow"


def test_loading_is_lazy_and_happens_once():
    calls = []

    def entry_points():
        calls.append(1)
        return []

    registry = PluginRegistry(entry_points=entry_points)
    assert calls == []
    registry.profilers()
    registry.backends()
    registry.plugins()
    assert calls == [1]


def test_process_registry_is_cached_and_resettable():
    first = get_registry()
    assert get_registry() is first
    reset_registry()
    assert get_registry() is not first


def test_unknown_component_name_lists_what_is_installed():
    registry = PluginRegistry(entry_points=lambda: [])
    with pytest.raises(PluginError, match=r"no metric selector named 'nope'; installed: default"):
        registry.metric_selector("nope")
    with pytest.raises(PluginError, match=r"no profiler named 'perf'; installed: none"):
        registry.profiler("perf")

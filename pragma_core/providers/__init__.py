"""Built-in LLM providers, each registered as a plugin (see ``pragma_core.plugin_api.registry.BUILTIN_PLUGINS``)."""

"""Built-in LLM providers, each registered as a plugin (see ``pragma_core.plugins.BUILTIN_PLUGINS``)."""

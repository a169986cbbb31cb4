"""Built-in backends, each registered as a plugin (see ``pragma_core.plugins.BUILTIN_PLUGINS``)."""

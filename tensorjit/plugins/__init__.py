"""Built-in plugins, loaded through the ``tensorjit.plugins`` entry points like any
third party's."""

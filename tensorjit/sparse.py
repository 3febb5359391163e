"""``tensorjit.sparse``: CSR/CSC sparse matrices (the sparse plugin's public API).

Importing this module checks that the sparse plugin is registered: when it is blocked
(``TENSORJIT_FLAGS=plugins_blocklist=sparse``) or plugin autoloading is off
(``TENSORJIT_DISABLE_PLUGIN_AUTOLOAD=1``) the import raises SparsePluginDisabledError.
"""

from tensorjit.plugins.sparse import require_plugin

require_plugin()

from tensorjit.plugins.sparse import *  # noqa: E402,F403
from tensorjit.plugins.sparse import __all__  # noqa: E402,F401

"""What the C-like backends share: the scalar-expression renderer and its dialects.

The C backend (host), and the OpenCL and CUDA backends render elementwise work from
the same scalar graphs; only the dialect differs (type names, math function names,
literals, what a helper is called). ``scalar.py`` is the renderer, ``dialect.py`` the
data a dialect gives; ``reductions.py``, ``rows.py``, ``indexing.py`` and
``construct.py`` what a reduction, a softmax row, an integer-vector index and an array
built whole compute (each backend renders its own loops around them). Host-only tricks
(streaming stores, the vectorised libm replacements, GNU statement expressions) belong
to the C backend's dialect.
"""

from tensorjit.plugins.cstyle.dialect import Dialect, Unsupported
from tensorjit.plugins.cstyle.scalar import Emitter, scalar_expr

__all__ = ["Dialect", "Emitter", "Unsupported", "scalar_expr"]

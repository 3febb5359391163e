"""What indexing by integer vectors computes, decided once for every backend: the host's
row gathers and scatter-adds (c_backend/generators/indexing.py) and the devices'
work-item gathers and column-owning scatters (device_kernels/indexing.py) each render
their own loops (their schedule), and take from here

- which indices are valid: ``-n <= j < n`` along an axis of length ``n``, a negative one
  counting from the end (``index_out_of_range``, ``wrap_index``);
- how a value lands: ``set`` writes it (the last of repeated indices wins), ``inc`` adds
  it (repeated indices accumulate, as ``numpy.add.at``), an add of booleans being or
  (``update``);
- the shapes NumPy accepts: index vectors of one length, a length 1 broadcasting
  (``broadcast_length``); a value broadcasting to the indexed region, a length 1 only
  where its type declares it broadcastable (``value_mismatch``).
"""

from __future__ import annotations

from collections.abc import Sequence


def index_out_of_range(index: str, n: str) -> str:
    """C: whether ``index`` (not yet wrapped) is outside an axis of length ``n``."""
    return f"({index} < -{n} || {index} >= {n})"


def wrap_index(index: str, n: str) -> str:
    """C: the statement making a valid negative ``index`` count from the end."""
    return f"if ({index} < 0) {index} += {n};"


def update(dest: str, value: str, ctype: str, dtype: str, set_value: bool) -> str:
    """C: the assignment writing ``value`` to, or adding it to, ``dest`` (of ``ctype``)."""
    if set_value:
        return f"{dest} = ({ctype})({value});"
    if dtype == "bool":
        return f"{dest} = ({ctype})({dest} || {value});"  # NumPy's add of booleans: or
    return f"{dest} = ({ctype})({dest} + {value});"


def broadcast_length(lengths: Sequence[int]) -> int | None:
    """The common length of index vectors of ``lengths`` (a length 1 broadcasts), or
    None where they do not broadcast together (NumPy's IndexError)."""
    longer = set(lengths) - {1}
    if len(longer) > 1:
        return None
    return longer.pop() if longer else 1


def value_mismatch(shape: tuple, region: tuple, static: tuple) -> str | None:
    """Why a value of ``shape`` can not be written into an indexed ``region`` (None when
    it can): more dimensions than the region, or a length that is neither the region's
    nor a 1 its type (``static``, the value's static shape) declares broadcastable."""
    if len(shape) > len(region):
        return f"value of shape {shape} has more dimensions than {region}"
    for j in range(1, len(shape) + 1):
        n, m = shape[-j], region[-j]
        if n == m or (n == 1 and static[-j] == 1):
            continue
        detail = " (its type does not declare that length 1 broadcastable)" if n == 1 else ""
        return f"value of shape {shape} does not match the indexed region's shape {region}{detail}"
    return None


def c_macros() -> str:
    """The rules above as C macros, for hand-written C that indexes (the host's
    whole-graph program): ``TJ_INDEX_OUT_OF_RANGE(j, n)``, ``TJ_WRAP_INDEX(j, n)``,
    ``TJ_INDEX_ADD(dest, value, T)`` (a numeric add: not for bool, whose add is or;
    the program's pair steps take float and integer values only)."""
    return "\n".join(
        [
            "/* generated from plugins/cstyle/indexing.py: the shared indexing rules */",
            f"#define TJ_INDEX_OUT_OF_RANGE(j, n) {index_out_of_range('(j)', '(n)')}",
            f"#define TJ_WRAP_INDEX(j, n) {wrap_index('j', 'n')}",
            f"#define TJ_INDEX_ADD(dest, value, T) {update('dest', 'value', 'T', '', False)}",
            "",
        ]
    )

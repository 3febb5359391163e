"""Native steps: any plugin's C kernel as a step of whole-graph programs.

A kernel spec's ``step(builder, node, plan)`` (core/registries.py) may return
``builder.native(node, NativeStep(...))``: the program then calls the plugin's C function
itself, with the GIL held, instead of calling the node's kernel through Python (a
*Python step*). The function's contract is in ``native.h``; the source is compiled once
per machine (cached like the kernels) as a small CPython extension whose module init
imports NumPy's C API, so the function may use both C APIs.
"""

from __future__ import annotations

import functools
import hashlib
import pathlib
from dataclasses import dataclass

from tensorjit.plugins.c_backend.build import compiler


@dataclass(frozen=True)
class NativeStep:
    """A plugin's C function run as a program step (see native.h for its contract)."""

    source: str  # C defining ``function`` (native.h, Python.h and NumPy's API come first)
    function: str  # the name of the ``tj_native_fn`` to call
    what: str  # what the source is, for compile errors ("sparse x dense products")


_PRELUDE = """#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <stdint.h>
"""


@functools.cache  # read once per process
def _header() -> str:
    return pathlib.Path(__file__).with_name("native.h").read_text()


def _module_source(source: str, functions: tuple[str, ...], module: str) -> str:
    """``source`` as an extension module whose ``addresses`` maps each function's name
    to its address."""
    entries = "\n".join(
        f'    if (tj_add(addresses, "{name}", (void *)&{name}) < 0)\n        goto error;'
        for name in functions
    )
    return f"""{_PRELUDE}{_header()}
{source}

static int tj_add(PyObject *addresses, const char *name, void *fn)
{{
    PyObject *address = PyLong_FromVoidPtr(fn);
    int status = address == NULL ? -1 : PyDict_SetItemString(addresses, name, address);
    Py_XDECREF(address);
    return status;
}}

static struct PyModuleDef tj_native_module = {{PyModuleDef_HEAD_INIT, "{module}", NULL, -1,
                                               NULL}};

PyMODINIT_FUNC PyInit_{module}(void)
{{
    import_array();
    PyObject *m = PyModule_Create(&tj_native_module), *addresses = PyDict_New();
    if (m == NULL || addresses == NULL)
        goto error;
{entries}
    if (PyModule_AddObject(m, "addresses", addresses) < 0)
        goto error;
    return m;
error:
    Py_XDECREF(addresses);
    Py_XDECREF(m);
    return NULL;
}}
"""


@functools.cache  # once per process: the module source is hashed and wrapped once
def load(source: str, functions: tuple[str, ...], what: str) -> tuple[object, dict[str, int]]:
    """(the extension module, {function: address}) for ``source``: built once per
    machine. Keep the module while the addresses are in use (do not change the dict)."""
    digest = hashlib.sha256("\0".join((source, *functions)).encode()).hexdigest()[:16]
    module = f"tj_native_{digest}"
    extension = compiler.load_extension(_module_source(source, functions, module), module, what)
    return extension, dict(extension.addresses)

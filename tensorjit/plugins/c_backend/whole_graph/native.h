/* Native program steps: a plugin's C function that whole-graph programs call directly.
 *
 * A plugin hands the program builder a NativeStep (native.py): C source defining
 * functions of this type. The builder compiles the source once as a small CPython
 * extension (this header, Python.h and NumPy's arrayobject.h come first, and NumPy's C
 * API is imported), and the program calls the function with the node's input values
 * and one output cell per node output, holding the GIL.
 *
 *   int step(PyObject *const *inputs, PyObject **outputs)
 *
 * inputs: borrowed references to the node's input values (arrays for tensors; other
 * types' values as their filters made them, e.g. a scipy.sparse matrix). outputs: NULL
 * on entry; on TJ_NATIVE_DONE, a new reference per output (an array of the output's
 * dtype and ndim for a tensor output; the program converts anything else). Return:
 *   TJ_NATIVE_DONE      the outputs are set;
 *   TJ_NATIVE_DECLINED  the function does not cover these values (set no output and no
 *                       exception): the node's own kernel runs instead, and raises
 *                       the error the per-node path would;
 *   TJ_NATIVE_ERROR     an exception is set.
 * A native step must not modify its inputs.
 */
#ifndef TJ_NATIVE_H
#define TJ_NATIVE_H

enum { TJ_NATIVE_DONE = 0, TJ_NATIVE_DECLINED = 1, TJ_NATIVE_ERROR = -1 };

typedef int (*tj_native_fn)(PyObject *const *inputs, PyObject **outputs);

#endif

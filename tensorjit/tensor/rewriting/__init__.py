"""The dense tensor family's rewrites, registered through ``tensorjit_register_rewrites``.

canonicalize: canonical sums and products (fraction cancellation), exp/log inverses,
dimshuffle/reshape/sum simplifications, shapes from infer_shape.
stabilize: softplus, log1p, expm1, sigmoid forms.
specialize: powers, GEMM/GEMV.
fusion: elementwise subgraphs into one Composite node; then a map reading its rows'
Moments into one MomentsMap node; last, fused nodes that feed one another into one
multi-output node.
"""

from __future__ import annotations

from tensorjit.core.rewrites.db import RewriteDB
from tensorjit.tensor.nnet.rewriting import local_log_softmax
from tensorjit.tensor.rewriting.algebra import (
    canonical_product,
    canonical_sum,
    exp_of_log,
    log_of_exp,
    negation_out,
)
from tensorjit.tensor.rewriting.blas import local_gemm, local_ger
from tensorjit.tensor.rewriting.fusion import FusionRewriter
from tensorjit.tensor.rewriting.max_exp_sum import local_max_and_shifted_exp_sum
from tensorjit.tensor.rewriting.moments import local_sum_and_squared_deviations
from tensorjit.tensor.rewriting.moments_map import local_moments_map
from tensorjit.tensor.rewriting.multi_output_fusion import MultiOutputFusion
from tensorjit.tensor.rewriting.shape import local_shape, local_shape_i
from tensorjit.tensor.rewriting.specialize import (
    local_decay_with_penalty,
    local_pow_specialize,
    local_reduce_of_map,
)
from tensorjit.tensor.rewriting.stabilize import (
    local_exp_over_1_plus_exp,
    local_expm1,
    local_log_stable,
    local_sigmoid,
)
from tensorjit.tensor.rewriting.structure import (
    local_dimshuffle_lift,
    local_elemwise_alloc,
    local_reduce_of_new_axes,
    local_reshape_chain,
    local_subtensor_of_makevector,
    local_sum_of_scaled,
    local_sum_of_sum,
    local_useless_alloc,
)

PLUGIN = "tensor"

# (name, rewriter, phase, extra tags)
REWRITES = [
    ("canonical_sum", canonical_sum, "canonicalize", ("fast_compile", "algebra")),
    ("canonical_product", canonical_product, "canonicalize", ("fast_compile", "algebra")),
    ("negation_out", negation_out, "canonicalize", ("fast_compile", "algebra")),
    ("local_exp_log", exp_of_log, "canonicalize", ("fast_compile",)),
    ("local_log_exp", log_of_exp, "canonicalize", ("fast_compile",)),
    ("local_dimshuffle_lift", local_dimshuffle_lift, "canonicalize", ("fast_compile",)),
    ("local_reshape_chain", local_reshape_chain, "canonicalize", ("fast_compile",)),
    ("local_sum_of_sum", local_sum_of_sum, "canonicalize", ("fast_compile",)),
    ("local_sum_of_scaled", local_sum_of_scaled, "canonicalize", ("fast_compile",)),
    ("local_reduce_of_new_axes", local_reduce_of_new_axes, "canonicalize", ("fast_compile",)),
    (
        "local_subtensor_of_makevector",
        local_subtensor_of_makevector,
        "canonicalize",
        ("fast_compile", "shape"),
    ),
    ("local_useless_alloc", local_useless_alloc, "canonicalize", ("fast_compile",)),
    ("local_elemwise_alloc", local_elemwise_alloc, "canonicalize", ("fast_compile",)),
    ("local_shape_i", local_shape_i, "canonicalize", ("fast_compile", "shape")),
    ("local_shape", local_shape, "canonicalize", ("fast_compile", "shape")),
    ("local_log_stable", local_log_stable, "stabilize", ()),
    ("local_expm1", local_expm1, "stabilize", ()),
    ("local_sigmoid", local_sigmoid, "stabilize", ()),
    ("local_exp_over_1_plus_exp", local_exp_over_1_plus_exp, "stabilize", ()),
    ("local_log_softmax", local_log_softmax, "stabilize", ()),
    # Canonical forms again after stabilize (it creates e.g. neg(neg(x))) and constants
    # folded, so that fusion sees merged, simplified graphs.
    ("late_canonical_sum", canonical_sum, "specialize", ("algebra",)),
    ("late_canonical_product", canonical_product, "specialize", ("algebra",)),
    ("local_pow_specialize", local_pow_specialize, "specialize", ()),
    ("local_reduce_of_map", local_reduce_of_map, "specialize", ()),
    ("local_gemm", local_gemm, "specialize", ("blas",)),
    ("local_ger", local_ger, "specialize", ("blas",)),
    ("local_decay_with_penalty", local_decay_with_penalty, "specialize", ("blas",)),
    (
        "local_sum_and_squared_deviations",
        local_sum_and_squared_deviations,
        "specialize",
        ("moments",),
    ),
    (
        "local_max_and_shifted_exp_sum",
        local_max_and_shifted_exp_sum,
        "specialize",
        ("max_exp_sum",),
    ),
    ("elemwise_fusion", FusionRewriter(), "fusion", ()),
    # Fused operands: a broadcast alloc may only be covered by an operand of another
    # node of the fused group (2 * alloc(c, *w.shape) * w).
    ("fused_elemwise_alloc", local_elemwise_alloc, "fusion", ()),
    # After fusion: the map is one Elemwise node by then.
    ("local_moments_map", local_moments_map, "fusion", ("moments_map",)),
    # Last in its phase (POSITIONS): it joins the nodes the rewrites above made, and
    # must not hide their patterns.
    ("multi_output_fusion", MultiOutputFusion(), "fusion", ()),
]
# A phase runs its rewrites by (position, name); the default position is 0.
POSITIONS = {"multi_output_fusion": 1.0}


def register(db: RewriteDB) -> None:
    for name, rewriter, phase, tags in REWRITES:
        position = POSITIONS.get(name, 0.0)
        db.register(name, rewriter, phase, "fast_run", *tags, position=position, plugin=PLUGIN)

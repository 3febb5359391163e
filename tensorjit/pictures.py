"""Pictures of graphs: ``graph_dot`` (DOT text, no dependency) and ``pydotprint`` (an SVG,
PNG or PDF file through graphviz, the ``[graphviz]`` extra: pygraphviz's wheels carry
graphviz itself).

For a compiled function the picture is its rewritten graph: each node coloured by the
backend whose kernel runs it, with its device when not the host; inplace nodes (which
overwrite an input) drawn in red with a red edge to what they destroy; view nodes
dashed, with a dashed edge to what they alias; transfers between devices as yellow
hexagons. For variables it is the graph as built, coloured by nothing but kind.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

from tensorjit.core.devices import HOST
from tensorjit.core.diagnostics import TensorjitWarning
from tensorjit.core.graph.basic import Apply, Constant, Variable
from tensorjit.core.graph.traversal import graph_inputs, toposort
from tensorjit.core.memory.shared import SharedVariable
from tensorjit.core.memory.transfer_op import Transfer

#: Fill colours per backend; a backend not listed gets one from SPARE_COLOURS.
BACKEND_COLOURS = {
    "c": "#a6cee3",
    "python": "#d9d9d9",
    "opencl": "#fdbf6f",
    "cuda": "#b2df8a",
}
SPARE_COLOURS = ("#cab2d6", "#fb9a99", "#ffff99", "#8dd3c7", "#bebada")
INPUT_COLOUR, SHARED_COLOUR, OUTPUT_COLOUR, CONSTANT_COLOUR = (
    "#33a02c", "#b2df8a", "#1f78b4", "#f0f0f0",
)  # fmt: skip


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _type_label(var: Variable) -> str:
    dtype = getattr(var.type, "dtype", "")
    shape = getattr(var.type, "shape", None)
    if shape is None:
        return str(var.type)
    dims = ", ".join("?" if s is None else str(s) for s in shape)
    return f"{dtype} ({dims}{',' if len(shape) == 1 else ''})"


def _graph_of(obj: Any) -> tuple[list[Apply], list[Variable], list[Variable], dict, dict]:
    """(nodes in order, graph inputs, outputs, node -> kernel, variable -> role label) of
    a compiled function or of variables."""
    fgraph = getattr(obj, "fgraph", None)
    if fgraph is not None:
        roles: dict[Variable, str] = {}
        n_explicit = len(obj.inputs)
        for var, inp in zip(fgraph.inputs, obj.inputs):
            roles[var] = inp.name or var.name or "input"
        for var, shared in zip(fgraph.inputs[n_explicit:], obj.shared_inputs):
            roles[var] = f"shared {shared.name or ''}".rstrip()
        n_out = obj.memory.n_outputs

        def add_role(var: Variable, role: str) -> None:  # an input may be an output too
            roles[var] = f"{roles[var]}, {role}" if var in roles else role

        for k, var in enumerate(fgraph.outputs[:n_out]):
            add_role(var, f"output {k}" if n_out > 1 else "output")
        for var, shared in zip(fgraph.outputs[n_out:], obj.memory.updated_shared):
            add_role(var, f"update of {shared.name or 'shared'}")
        return fgraph.toposort(), list(fgraph.inputs), list(fgraph.outputs), obj.kernels, roles
    outputs = [obj] if isinstance(obj, Variable) else list(obj)
    if not all(isinstance(v, Variable) for v in outputs):
        raise TypeError(f"pydotprint takes a compiled function or variables, got {obj!r}")
    inputs = graph_inputs(outputs)
    roles = {v: f"shared {v.name or ''}".rstrip() for v in inputs if isinstance(v, SharedVariable)}
    roles.update({v: v.name or "output" for v in outputs})
    return toposort(outputs), inputs, outputs, {}, roles


def graph_dot(
    obj: Any, compact: bool = True, with_ids: bool = False, max_label_size: int = 70
) -> str:  # noqa: E501
    """The DOT source of ``obj``'s graph (a compiled function, a variable or a list).

    ``compact``: unnamed intermediate variables are edges (labelled with their type), not
    boxes; ``with_ids``: node labels start with their position in the schedule."""
    nodes, inputs, outputs, kernels, roles = _graph_of(obj)
    lines = [
        "digraph tensorjit {",
        '  rankdir=TB; node [fontname="Helvetica", fontsize=10]; '
        'edge [fontname="Helvetica", fontsize=8];',
    ]
    backends_seen: dict[str, str] = {}
    names: dict[Variable, str] = {}
    shown_as_box: set[Variable] = set()

    def colour_of(backend: str) -> str:
        if backend not in backends_seen:
            spare = SPARE_COLOURS[len(backends_seen) % len(SPARE_COLOURS)]
            backends_seen[backend] = BACKEND_COLOURS.get(backend, spare)
        return backends_seen[backend]

    def variable_box(var: Variable, ident: str) -> None:
        role = roles.get(var, "")
        if isinstance(var, Constant):
            label, fill, shape = _shorten(str(var), max_label_size), CONSTANT_COLOUR, "note"
        elif role.startswith("shared") or isinstance(var, SharedVariable):
            label, fill, shape = role or f"shared {var.name}", SHARED_COLOUR, "box3d"
        elif var in outputs:
            label, fill, shape = role, OUTPUT_COLOUR, "box"
        elif var.owner is None:
            label, fill, shape = role or var.name or "input", INPUT_COLOUR, "box"
        else:
            label, fill, shape = var.name or "", "white", "box"
        label = f"{label}\n{_type_label(var)}"
        font = "white" if fill in (INPUT_COLOUR, OUTPUT_COLOUR) else "black"
        lines.append(
            f"  {ident} [label={_quote(label)}, shape={shape}, style=filled, "
            f'fillcolor="{fill}", fontcolor="{font}"];'
        )
        shown_as_box.add(var)

    for k, var in enumerate(inputs):
        names[var] = f"i{k}"
        variable_box(var, names[var])
    for step, node in enumerate(nodes):
        ident = f"n{step}"
        op = node.op
        kernel = kernels.get(node)
        label = _shorten(str(op), max_label_size)
        if with_ids:
            label = f"{step}: {label}"
        attrs = ["style=filled"]
        if isinstance(op, Transfer):
            attrs += ["shape=hexagon", 'fillcolor="#ffed6f"']
            label += f"\n{node.inputs[0].type.device} -> {node.outputs[0].type.device}"
        else:
            attrs.append("shape=ellipse")
            if kernel is not None:
                attrs.append(f'fillcolor="{colour_of(kernel.backend)}"')
                label += f"\n[{kernel.name}]"
            else:
                attrs.append('fillcolor="white"')
            device = node.outputs[0].type.device if node.outputs else HOST
            if device != HOST:
                label += f"\non {device}"
                attrs.append("peripheries=2")
        if op.destroy_map:
            attrs += ['color="#e31a1c"', "penwidth=2.5"]
            label += "\n(inplace)"
        elif op.view_map:
            attrs[0] = 'style="filled,dashed"'
            label += "\n(view)"
        lines.append(f"  {ident} [label={_quote(label)}, {', '.join(attrs)}];")
        destroyed = {i for ins in op.destroy_map.values() for i in ins}
        viewed = {i for ins in op.view_map.values() for i in ins}
        for position, inp in enumerate(node.inputs):
            if inp not in names:  # a constant or an input of a sub-graph
                names[inp] = f"v{len(names)}"
                variable_box(inp, names[inp])
            edge = []
            if inp not in shown_as_box and compact:
                edge.append(f"label={_quote(_type_label(inp))}")
            if position in destroyed:
                edge += ['color="#e31a1c"', "penwidth=2", 'xlabel="destroys"']
            elif position in viewed:
                edge += ["style=dashed", 'xlabel="view of"']
            lines.append(f"  {names[inp]} -> {ident}" + (f" [{', '.join(edge)}];" if edge else ";"))  # noqa: E501
        for j, out in enumerate(node.outputs):
            if out in outputs or not compact or out.name:
                box = f"o{step}_{j}"
                variable_box(out, box)
                lines.append(f"  {ident} -> {box} [label={_quote(_type_label(out))}];")
                # Consumers of an output draw from the node; of a named variable, from it.
                names[out] = ident if out in outputs else box
            else:
                names[out] = ident
    for k, out in enumerate(outputs):  # an output that is an input or a constant
        if out.owner is None or out.owner not in nodes:
            if out in names:
                continue  # already drawn (an input box), its label says it is an output
            names[out] = f"out{k}"
            variable_box(out, names[out])
    if backends_seen:
        lines.append('  subgraph cluster_legend { label="backends"; fontsize=9; style=dashed;')
        for backend, colour in backends_seen.items():
            ident = re.sub(r"\W", "_", backend)  # a DOT identifier
            lines.append(
                f"    legend_{ident} [label={_quote(backend)}, shape=box, style=filled, "
                f'fillcolor="{colour}"];'
            )
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines)


def pydotprint(
    fct: Any,
    outfile: str | Path | None = None,
    compact: bool = True,
    format: str | None = None,
    with_ids: bool = False,
    max_label_size: int = 70,
    print_output_file: bool = True,
    return_image: bool = False,
    **theano_options: Any,
) -> str | bytes:
    """Draw ``fct`` (a compiled function, a variable or a list of them) with graphviz.

    ``format`` defaults to ``outfile``'s suffix (svg, png, pdf; ``dot`` writes the DOT
    source), else png; ``outfile`` defaults to ``tensorjit.pydotprint.<format>`` here.
    Returns the file's path, or its bytes with ``return_image=True`` (nothing written).
    Theano's other options (``high_contrast``, ``colorCodes``, ``scan_graphs``...) are
    accepted and have no effect."""
    if theano_options:
        names = ", ".join(sorted(theano_options))
        warnings.warn(
            f"pydotprint: Theano's options {names} have no effect", TensorjitWarning, stacklevel=2
        )
    if format is None:
        suffix = Path(outfile).suffix.lstrip(".") if outfile is not None else ""
        format = suffix or "png"
    source = graph_dot(fct, compact=compact, with_ids=with_ids, max_label_size=max_label_size)
    if format == "dot":
        image = source.encode()
    else:
        try:
            import pygraphviz
        except ImportError:
            raise ImportError(
                "pydotprint needs graphviz: pip install 'tensorjit[graphviz]' (pygraphviz, "
                "whose wheels include graphviz); graph_dot() gives the DOT text without it"
            ) from None
        picture = pygraphviz.AGraph(string=source)
        image = picture.draw(format=format, prog="dot")
    if return_image:
        return image
    path = Path(outfile) if outfile is not None else Path(f"tensorjit.pydotprint.{format}")
    path.write_bytes(image)
    if print_output_file:
        print(f"The output file is available at {path}")
    return str(path)

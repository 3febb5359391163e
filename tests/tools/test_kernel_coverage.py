"""The Table 1 kernel coverage report (``python -m tensorjit info --kernels``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tensorjit
from tensorjit.__main__ import main
from tensorjit.core.hooks import get_plugin_system
from tensorjit.tools.kernel_coverage import COVERED, ERROR, NOT_COVERED, PARTIAL, VIEW, coverage
from tensorjit.tools.table1_probes import PROBES, SKIPPED

TABLE = Path(__file__).resolve().parents[2] / "docs" / "table1.md"
SUMMARY = re.compile(r"^(\w+): (\d+) of (\d+) Table 1 ops fully covered \((\d+\.\d)%\)$", re.M)
BASIC = ["add", "exp", "sum", "dot", "softmax"]


def c_unavailable() -> str | None:
    return get_plugin_system().registries.backends.unavailable_reason("c")


def test_every_table1_name_is_probed_or_skipped_with_a_reason():
    rows = re.findall(r"^\| ([^|]+) \| `([^`]+)` \| `[^`]+` \|", TABLE.read_text(), re.M)
    expected = [(section, name) for section, name in rows if name not in SKIPPED]
    assert [(p.section, p.name) for p in PROBES] == expected  # doc order, sections too
    assert set(SKIPPED) <= {name for _, name in rows}
    assert all(SKIPPED.values())


@pytest.mark.parametrize("probe", PROBES, ids=lambda p: f"{p.section}:{p.name}")
def test_every_probe_builds_and_compiles(probe):
    inputs, outputs = probe.build()
    assert outputs
    # Python kernels only: this checks the graphs, not the C compiler.
    mode = tensorjit.FAST_RUN.with_backends("python")
    f = tensorjit.function(inputs, outputs, mode=mode, on_unused_input="ignore")
    assert f.kernels  # the op survives rewriting: no probe is folded to a constant


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="unknown backend 'nope'"):
        coverage("nope")


def test_python_backend_covers_everything(capsys):
    results = coverage("python")
    assert [r.status for r in results if r.status not in (COVERED, VIEW)] == []
    main(["info", "--kernels"])
    summaries = {m[0]: m for m in SUMMARY.findall(capsys.readouterr().out)}
    assert summaries["python"][1:] == (str(len(PROBES)), str(len(PROBES)), "100.0")


@pytest.mark.skipif(c_unavailable() is not None, reason=f"C backend: {c_unavailable()}")
def test_c_backend_covers_the_basic_ops(capsys):
    results = coverage("c")
    by_name = {r.name: r for r in results}
    assert [r.name for r in results if r.status == ERROR] == []
    assert {r.status for r in results} <= {COVERED, PARTIAL, NOT_COVERED, VIEW}
    for name in BASIC:
        assert by_name[name].status == COVERED, (name, by_name[name].missing)
    for r in results:  # a report names what is missing exactly when something is
        assert bool(r.missing) == (r.status in (PARTIAL, NOT_COVERED)), r
    main(["info", "--kernels"])
    out = capsys.readouterr().out
    summaries = {m[0]: m for m in SUMMARY.findall(out)}
    assert summaries["c"][2] == str(len(PROBES))
    assert int(summaries["c"][1]) >= len(BASIC)
    assert "not probed" in out and all(name in out for name in SKIPPED)
    with capsys.disabled():  # the number grows as kernels are added: shown, not asserted
        print(
            f"\n{summaries['c'][0]}: {summaries['c'][1]} of {summaries['c'][2]} "
            f"Table 1 ops fully covered ({summaries['c'][3]}%)"
        )


@pytest.mark.skipif(c_unavailable() is not None, reason=f"C backend: {c_unavailable()}")
def test_selection_agrees_with_a_real_c_compilation():
    # The report never builds C kernels; a real compile must pick the same ones.
    results = {r.name: r for r in coverage("c")}
    mode = tensorjit.FAST_RUN.with_backends("c", "python")
    for probe in (p for p in PROBES if p.name in BASIC + ["arange", "var", "trace"]):
        inputs, outputs = probe.build()
        f = tensorjit.function(inputs, outputs, mode=mode, on_unused_input="ignore")
        got = [(type(n.op).__name__, k.backend) for n, k in f.kernels.items()]
        want = [(n.op_class, n.backend) for n in results[probe.name].nodes]
        assert got == want, probe.name


def test_plain_info_does_not_run_the_report(monkeypatch, capsys):
    import tensorjit.__main__ as cli

    called = []
    monkeypatch.setattr(cli, "info", lambda: called.append(True))
    cli.main(["info"])
    assert called == [True]
    assert "Table 1" not in capsys.readouterr().out

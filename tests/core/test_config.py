"""Typed configuration: flags strings, errors naming the option, change_flags, env var."""

import os
import subprocess
import sys

import pytest

import tensorjit
import tensorjit.tensor as T
from tensorjit.core.config import _OPTIONS, Config, config


def run_python(code, **env_vars):
    env = dict(os.environ)
    env.pop("TENSORJIT_FLAGS", None)
    env.update(env_vars)
    return subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_defaults():
    cfg = Config(_OPTIONS)
    assert cfg.floatX == "float64"
    assert cfg.device == "cpu"
    assert cfg.mode == "FAST_RUN"
    assert cfg.allow_gc is True
    assert cfg.plugins_blocklist == ()
    assert cfg.on_unused_input == "raise"
    assert cfg.compiledir.endswith("tensorjit")


def test_flags_string_sets_values():
    cfg = Config(_OPTIONS, "floatX=float32")
    assert cfg.floatX == "float32"
    cfg = Config(
        _OPTIONS, " floatX = float16 , allow_gc=off,mode=FAST_COMPILE,,compiledir=/tmp/a=b"
    )
    assert cfg.floatX == "float16"
    assert cfg.allow_gc is False
    assert cfg.mode == "FAST_COMPILE"
    assert cfg.compiledir == "/tmp/a=b"
    # Untouched options keep their defaults; instances are independent.
    assert cfg.on_unused_input == "raise"
    assert Config(_OPTIONS).floatX == "float64"


@pytest.mark.parametrize(
    "text, expected",
    [("1", True), ("true", True), ("Yes", True), ("ON", True), ("0", False), ("False", False)],
)
def test_boolean_flags(text, expected):
    assert Config(_OPTIONS, f"allow_gc={text}").allow_gc is expected


def test_name_list_flag_uses_semicolons_inside_a_flags_string():
    cfg = Config(_OPTIONS, "plugins_blocklist=c_backend; sparse ;,floatX=float32")
    assert cfg.plugins_blocklist == ("c_backend", "sparse")
    assert cfg.floatX == "float32"


def test_unknown_option_in_flags_is_an_error_naming_it():
    with pytest.raises(
        AttributeError, match=r"unknown config option 'floatx' \(from TENSORJIT_FLAGS\); known: "
    ):
        Config(_OPTIONS, "floatx=float32")


def test_bad_value_in_flags_is_an_error_naming_the_option():
    with pytest.raises(
        ValueError,
        match=r"config option 'floatX' \(from TENSORJIT_FLAGS\): expected one of "
        r"\('float64', 'float32', 'float16'\), got 'float128'",
    ):
        Config(_OPTIONS, "floatX=float128")
    with pytest.raises(ValueError, match=r"config option 'allow_gc' .*expected a boolean.*'maybe'"):
        Config(_OPTIONS, "allow_gc=maybe")


def test_flags_entry_without_equals_sign():
    with pytest.raises(ValueError, match=r"TENSORJIT_FLAGS entry 'floatX' is not of the form"):
        Config(_OPTIONS, "floatX")


def test_setting_attributes_in_code():
    cfg = Config(_OPTIONS)
    cfg.floatX = "float32"
    assert cfg.floatX == "float32"
    cfg.allow_gc = "no"
    assert cfg.allow_gc is False
    with pytest.raises(ValueError, match=r"config option 'mode' \(from code\): expected one of"):
        cfg.mode = "FAST_AND_LOOSE"
    assert cfg.mode == "FAST_RUN"
    with pytest.raises(AttributeError, match=r"unknown config option 'floatx' \(from code\)"):
        cfg.floatx = "float32"
    with pytest.raises(AttributeError, match="unknown config option 'nonexistent'"):
        cfg.nonexistent  # noqa: B018


def test_items_lists_every_option_with_its_doc():
    cfg = Config(_OPTIONS, "floatX=float32")
    items = {name: (value, doc) for name, value, doc in cfg.items()}
    assert set(items) == {o.name for o in _OPTIONS}
    assert items["floatX"][0] == "float32"
    assert "float dtype" in items["floatX"][1]


def test_change_flags_restores_values():
    cfg = Config(_OPTIONS)
    with cfg.change_flags(floatX="float32", allow_gc=False):
        assert cfg.floatX == "float32"
        assert cfg.allow_gc is False
        with cfg.change_flags(floatX="float16"):
            assert cfg.floatX == "float16"
        assert cfg.floatX == "float32"
    assert cfg.floatX == "float64"
    assert cfg.allow_gc is True


def test_change_flags_restores_values_after_an_exception():
    cfg = Config(_OPTIONS)
    with pytest.raises(RuntimeError, match="boom"):
        with cfg.change_flags(floatX="float32"):
            raise RuntimeError("boom")
    assert cfg.floatX == "float64"


def test_change_flags_with_a_bad_value_changes_nothing():
    cfg = Config(_OPTIONS)
    with pytest.raises(ValueError, match="config option 'mode'"):
        with cfg.change_flags(floatX="float32", mode="bogus"):
            pass  # pragma: no cover
    assert cfg.floatX == "float64"
    assert cfg.mode == "FAST_RUN"
    with pytest.raises(AttributeError, match="unknown config option 'bogus'"):
        with cfg.change_flags(bogus=1):
            pass  # pragma: no cover


def test_change_flags_restores_a_value_set_inside_the_block():
    cfg = Config(_OPTIONS)
    with cfg.change_flags(floatX="float32"):
        cfg.floatX = "float16"
    assert cfg.floatX == "float64"


def test_global_config_drives_tensor_constructors():
    before = config.floatX
    with config.change_flags(floatX="float32"):
        assert T.vector().type.dtype == "float32"
        assert tensorjit.config.floatX == "float32"
    assert config.floatX == before
    assert T.vector().type.dtype == before


def test_tensorjit_flags_env_var_is_applied_at_import():
    code = (
        "import tensorjit, tensorjit.tensor as T\n"
        "c = tensorjit.config\n"
        "print(c.floatX, c.allow_gc, c.on_unused_input, T.vector().type.dtype)\n"
    )
    result = run_python(code, TENSORJIT_FLAGS="floatX=float32,allow_gc=False,on_unused_input=warn")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["float32", "False", "warn", "float32"]
    # Without the variable: the defaults.
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["float64", "True", "raise", "float64"]


def test_bad_tensorjit_flags_env_var_fails_the_import_with_a_clear_error():
    result = run_python("import tensorjit", TENSORJIT_FLAGS="floatX=float128")
    assert result.returncode != 0
    assert "config option 'floatX' (from TENSORJIT_FLAGS)" in result.stderr
    assert "float128" in result.stderr
    result = run_python("import tensorjit", TENSORJIT_FLAGS="no_such_flag=1")
    assert result.returncode != 0
    assert "unknown config option 'no_such_flag' (from TENSORJIT_FLAGS)" in result.stderr


def test_quoted_values_may_hold_commas_and_list_flags_take_commas_or_semicolons():
    cfg = Config(
        _OPTIONS,
        'excluded_rewrites="local_gemm,elemwise_fusion",floatX=float32,'
        "cflags='-O2 -DPAIR=1,2',plugins_blocklist=a;b",
    )
    assert cfg.excluded_rewrites == ("local_gemm", "elemwise_fusion")
    assert cfg.floatX == "float32"
    assert cfg.cflags == "-O2 -DPAIR=1,2"
    assert cfg.plugins_blocklist == ("a", "b")
    with pytest.raises(ValueError, match='unclosed " quote'):
        Config(_OPTIONS, 'excluded_rewrites="local_gemm')


def test_a_quote_inside_a_value_is_an_ordinary_character():
    cfg = Config(_OPTIONS, "compiledir=/tmp/o'brien/cache,floatX=float32")
    assert cfg.compiledir == "/tmp/o'brien/cache" and cfg.floatX == "float32"

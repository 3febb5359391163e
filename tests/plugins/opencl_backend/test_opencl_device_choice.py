"""Which OpenCL device tensorjit takes: a device is usable only when its compiler builds
a kernel (PoCL 3.0, the PyPI wheel's, lists AMD Zen 5 CPUs but cannot compile for
them). The choice policy is tested over device rows whose compile results are given;
the last test asks the real drivers of this machine."""

from __future__ import annotations

import pytest

from tensorjit.plugins.opencl_backend.runtime import (
    OpenCLUnavailable,
    choose_device,
    compile_failure,
    list_devices,
)

ROWS = [
    ("0:0", "Old PoCL: pthread-cpu", "old-cpu"),
    ("1:0", "New PoCL: pthread-cpu", "new-cpu"),
    ("1:1", "New PoCL: second", "new-second"),
]
BROKEN = {"old-cpu": "error: unknown target CPU 'generic'"}


def failure(device: str) -> str | None:
    return BROKEN.get(device)


def test_without_a_selector_the_first_device_that_compiles_is_taken():
    assert choose_device(ROWS, "", failure) == "new-cpu"


def test_a_selector_chooses_among_the_devices_it_matches():
    assert choose_device(ROWS, "1:1", failure) == "new-second"
    assert choose_device(ROWS, "second", failure) == "new-second"
    assert choose_device(ROWS, "1", failure) == "new-cpu"  # a platform: its first


def test_an_index_selector_never_matches_digits_in_a_device_name():
    rows = [("0:0", "Vendor: GPU H100", "h100"), ("1:0", "Other: cpu", "cpu")]
    assert choose_device(rows, "1", failure) == "cpu"


def test_a_selected_device_that_cannot_compile_is_refused_with_its_compiler_error():
    with pytest.raises(OpenCLUnavailable) as info:
        choose_device(ROWS, "old pocl", failure)
    message = str(info.value)
    assert message.startswith("the device config.opencl_device='old pocl' selects")
    assert "0:0 'Old PoCL: pthread-cpu': error: unknown target CPU 'generic'" in message
    assert "pocl-opencl-icd" in message  # what to do about it


def test_no_compiling_device_makes_the_backend_unavailable_naming_each_failure():
    with pytest.raises(OpenCLUnavailable) as info:
        choose_device(ROWS, "", lambda device: f"{device} is broken")
    assert all(f"{device} is broken" in str(info.value) for _, _, device in ROWS)


def test_a_selector_matching_nothing_lists_the_devices():
    with pytest.raises(OpenCLUnavailable, match="matches no device; found 0:0"):
        choose_device(ROWS, "gpu", failure)


def test_the_real_drivers_compile_probe_agrees_with_the_backend_availability():
    """On this machine: the backend is available exactly when some listed device's
    compiler builds the probe, and then it runs on such a device."""
    from tensorjit.plugins.opencl_backend import runtime

    try:
        rows = list_devices()
    except OpenCLUnavailable as exc:
        pytest.skip(f"no OpenCL platform on this machine (driver absent): {exc}")
    compiling = [device for _, _, device in rows if compile_failure(device) is None]
    reason = runtime.unavailable_reason()
    assert (reason is None) == bool(compiling), reason
    if compiling:
        assert runtime.runtime().device in compiling

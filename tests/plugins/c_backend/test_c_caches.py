"""The cache sizes read from Linux's sysfs (build/caches.py) and the thresholds derived
from them: the largest cache of a level, the defaults when sysfs says nothing, and
``row_block_bytes``'s automatic value (half a core's L2 on one thread, none on more)."""

from __future__ import annotations

import pytest

import tensorjit
from tensorjit.plugins.c_backend.build import caches


def fake_sysfs(root, entries: dict[str, tuple[str, str]]):
    """A cpu0/cache folder with one indexN per entry: (level, size text)."""
    for name, (level, size) in entries.items():
        index = root / name
        index.mkdir(parents=True)
        (index / "level").write_text(level + "\n")
        (index / "size").write_text(size + "\n")
    return str(root)


def test_the_largest_cache_of_each_level_in_sysfs_units(tmp_path):
    cpu = fake_sysfs(
        tmp_path,
        {
            "index0": ("1", "48K"),
            "index1": ("1", "32K"),
            "index2": ("2", "1024K"),
            "index3": ("3", "32M"),
        },
    )
    assert caches.cache_bytes(level=1, cpu=cpu) == 48 << 10
    assert caches.cache_bytes(level=2, cpu=cpu) == 1 << 20
    assert caches.cache_bytes(level=3, cpu=cpu) == 32 << 20
    assert caches.cache_bytes(cpu=cpu) == caches.last_level_cache_bytes(cpu=cpu) == 32 << 20


def test_unknown_caches_get_the_documented_defaults(tmp_path):
    cpu = fake_sysfs(tmp_path, {"index0": ("1", "32K"), "index1": ("x", "9K")})
    assert caches.cache_bytes(level=2, cpu=cpu) == 512 << 10
    assert caches.cache_bytes(cpu=str(tmp_path / "absent")) == 32 << 20
    assert caches.cache_bytes(level=1, cpu=cpu) == 32 << 10  # the bad level is skipped


@pytest.mark.parametrize("threads", [1, 2])
def test_row_blocks_default_to_half_an_l2_and_start_beyond_the_cache_on_threads(threads):
    """Blocks of half an L2 on any thread count; a group starts at two blocks on one
    thread, at the last-level cache on more (unless the blocks are set explicitly)."""
    half_l2 = caches.cache_bytes(level=2) // 2
    with tensorjit.config.change_flags(threads=threads):
        assert caches.row_block_bytes() == half_l2
        start = caches.row_group_min_bytes()
    assert start == (2 * half_l2 if threads == 1 else caches.last_level_cache_bytes())
    with tensorjit.config.change_flags(row_block_bytes=4096, threads=threads):
        assert caches.row_block_bytes() == 4096
        assert caches.row_group_min_bytes() == 8192
    with pytest.raises(ValueError, match="'auto' or a number of bytes"):
        tensorjit.config.row_block_bytes = "big"

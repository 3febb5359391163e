"""``python -m tensorjit info``: plugins, backends (and why one is unavailable), hooks, config."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tensorjit.core.config import config
from tensorjit.core.devices import default_device
from tensorjit.core.hooks import HookSpecs, get_plugin_system


def info(out=sys.stdout) -> None:
    system = get_plugin_system()
    reg = system.registries
    print("tensorjit plugins:", file=out)
    for name in system.plugin_names():
        origin = system.entry_points.get(name, "built into tensorjit.core")
        print(f"  {name:<16} {origin}", file=out)
    for name in system.blocked:
        print(f"  {name:<16} blocked by config.plugins_blocklist", file=out)
    print("backends:", file=out)
    for backend in sorted(reg.backends.backends.values(), key=lambda b: -b.priority):
        reason = reg.backends.unavailable_reason(backend.name)
        status = "available" if reason is None else f"unavailable: {reason}"
        print(
            f"  {backend.name:<10} device={backend.device:<7} priority={backend.priority:<4} "
            f"{status}  ({backend.description})",
            file=out,
        )
        if backend.hardware is not None:
            try:
                lines = backend.hardware()
            except Exception as exc:  # the status line above already says why
                lines = [f"(none: {exc})"]
            for line in lines:
                print(f"      {line}", file=out)
    print("devices:", file=out)
    for device in reg.backends.devices():
        kind = reg.backends.array_kind(device)
        mark = " (default)" if device == default_device() else ""
        print(f"  {device:<10} values: {kind.type_name}{mark}", file=out)
    if default_device() not in reg.backends.devices():
        print(
            f"  {config.device:<10} config.device names it, but no installed backend "
            "provides it: compiling will fail",
            file=out,
        )
    print("op families:", file=out)
    for family, classes in reg.ops.families.items():
        print(f"  {family}: {len(classes)} op classes", file=out)
    print("kernel specs:", file=out)
    for backend in reg.backends.backends:
        specs = reg.kernels.specs_of(backend)
        if specs:
            names = ", ".join(sorted({s.name for s in specs}))
            n_classes = sum(len(s.op_classes) for s in specs)
            print(f"  of {backend}: {n_classes} op classes ({names})", file=out)
    print("rewrites:", file=out)
    for entry in sorted(reg.rewrites.entries.values(), key=lambda e: (e.phase, e.name)):
        print(f"  {entry.phase:<13} {entry.name:<28} tags={sorted(entry.tags)}", file=out)
    print("hooks:", file=out)
    for name in sorted(n for n in dir(HookSpecs) if n.startswith("tensorjit_")):
        impls = [i.plugin_name for i in getattr(system.pm.hook, name).get_hookimpls()]
        print(f"  {name:<32} implemented by: {', '.join(impls) or '-'}", file=out)
    print("config:", file=out)
    for name, value, doc in config.items():
        print(f"  {name:<18} = {value!r:<24} {doc}", file=out)


def cache(action: str, out=sys.stdout, max_bytes: int | None = None) -> None:
    """List, measure, prune (to ``max_bytes``, default ``config.cache_max_bytes``) or
    clear the compiled-code cache under ``config.compiledir``."""
    root = Path(config.compiledir)
    if action == "prune":
        limit = config.cache_max_bytes if max_bytes is None else max_bytes
        if limit <= 0:
            print(
                "config.cache_max_bytes is 0 (no limit): nothing to prune; give --max-bytes "
                "to prune to a size (python -m tensorjit cache clear empties the cache)",
                file=out,
            )
            return
        for backend in get_plugin_system().registries.backends.backends.values():
            prune_cache = getattr(backend.compiler, "prune_cache", None)
            if prune_cache is not None:
                directory, removed, freed, kept = prune_cache(limit)
                print(
                    f"{backend.name}: removed {removed} least recently used entries "
                    f"({freed / 2**20:.1f} MiB) from {directory}; {kept / 2**20:.1f} MiB kept "
                    f"(limit {limit / 2**20:.1f} MiB)",
                    file=out,
                )
        return
    files = [p for p in root.rglob("*") if p.is_file()] if root.exists() else []
    if action == "clear":
        # Each backend's compiler removes only what it wrote, under its own locks.
        for backend in get_plugin_system().registries.backends.backends.values():
            clear_cache = getattr(backend.compiler, "clear_cache", None)
            if clear_cache is not None:
                directory, removed, kept = clear_cache()
                note = f"; {kept} files it did not write left alone" if kept else ""
                print(f"{backend.name}: removed {removed} files from {directory}{note}", file=out)
        return
    size = sum(p.stat().st_size for p in files)
    print(f"compile cache {root}: {len(files)} files, {size / 2**20:.1f} MiB", file=out)
    if action == "list":
        for p in sorted(files):
            print(f"  {p.relative_to(root)}  {p.stat().st_size} bytes", file=out)


def _positive_bytes(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of bytes > 0, got {text}")
    return value


def main(argv: list[str] | None = None) -> int:
    from tensorjit import __version__

    parser = argparse.ArgumentParser(prog="python -m tensorjit")
    parser.add_argument("--version", action="version", version=f"tensorjit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    info_parser = sub.add_parser(
        "info", help="plugins, backends, op families, rewrites, hooks, config"
    )
    info_parser.add_argument(
        "--kernels",
        action="store_true",
        help="only the Table 1 kernel coverage report of each available backend",
    )
    cache_parser = sub.add_parser("cache", help="the compiled-code cache")
    cache_parser.add_argument("action", choices=["list", "stats", "prune", "clear"])
    cache_parser.add_argument(
        "--max-bytes",
        type=_positive_bytes,
        default=None,
        help="prune: the size to keep, > 0 (default: config cache_max_bytes)",
    )
    args = parser.parse_args(argv)
    if args.command == "info" and args.kernels:
        # Imported here: it builds tensor graphs, which plain ``info`` never needs.
        from tensorjit.tools.kernel_coverage import report

        report()
    elif args.command == "info":
        info()
    else:
        cache(args.action, max_bytes=args.max_bytes)
    return 0


if __name__ == "__main__":
    sys.exit(main())

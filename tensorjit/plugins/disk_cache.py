"""The compile cache's files, for every backend that compiles (the C backend's shared
libraries, CUDA's PTX): a private directory and entries verified before loading.

Loading a shared library runs its code, so the cache must hold only what this user
built:

- The cache directory (``config.compiledir`` and its ``c_backend`` and ``cuda``) is created ``0700``
  and must be owned by this user and writable by nobody else; a symbolic link there must
  be this user's too. Otherwise it is refused with a warning, and this process compiles
  into a fresh private temporary directory instead.
- Every file is written under a unique temporary name (created ``O_EXCL``, never through
  a link) and renamed into place, so a planted link or a reader never sees a partial file.
- Each entry ``<key>.so`` has a ``<key>.meta`` recording its key, size and SHA-256,
  written before the library is renamed into place. An entry whose library does not match
  (truncated, damaged, swapped for another entry's), or that is not a regular file, is
  set aside (renamed ``*.damaged``) with one warning and rebuilt.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
import warnings

from tensorjit.core.diagnostics import TensorjitRuntimeWarning

_checked: dict[str, str] = {}  # configured directory -> the directory used
_lock = threading.Lock()
_warned: set[str] = set()


def private_dir(root: str, wanted: str) -> str:
    """``wanted`` (a directory inside ``root``) if both are private to this user, made
    so when missing; else a fresh private temporary directory, with a warning."""
    with _lock:
        used = _checked.get(wanted)
        if used is None:
            used = _checked[wanted] = _choose(root, wanted)
        return used


def abandon(wanted: str, why: str) -> str:
    """Stop using the cache directory ``wanted`` in this process (it can not take new
    entries: full, read-only): a fresh private temporary directory from now on, with a
    warning. Returns that directory."""
    with _lock:
        for configured, used in list(_checked.items()):
            if used == wanted:
                _checked[configured] = _fallback(wanted, f"it can not take new entries ({why})")
                return _checked[configured]
        return _fallback(wanted, f"it can not take new entries ({why})")


def forget_checked() -> None:
    """Check the configured directories again (for tests that change their modes)."""
    with _lock:
        _checked.clear()


def _choose(root: str, wanted: str) -> str:
    reason = None
    try:
        for path in (root, wanted):
            if not os.path.lexists(path):
                os.makedirs(path, mode=0o700, exist_ok=True)
            reason = _not_private(path)
            if reason is not None:
                break
    except OSError as exc:
        reason = f"it can not be created ({exc.strerror})"
    if reason is None:
        return wanted
    return _fallback(wanted, reason)


def temporary_private_dir() -> str:
    """A fresh directory only this user can enter (``mkdtemp`` makes it 0700), removed
    when this process exits."""
    directory = tempfile.mkdtemp(prefix="tensorjit-c-")
    atexit.register(shutil.rmtree, directory, True)  # this process's only
    return directory


def _fallback(wanted: str, reason: str) -> str:
    """A fresh private temporary directory used instead of ``wanted``, with a warning."""
    fallback = temporary_private_dir()
    warnings.warn(
        f"the compile cache {wanted} is not used: {reason}; this process compiles into "
        f"the private directory {fallback} instead",
        TensorjitRuntimeWarning,
        stacklevel=4,
    )
    return fallback


def _not_private(path: str) -> str | None:
    st = os.lstat(path)
    uid = os.getuid()
    if stat.S_ISLNK(st.st_mode):
        if st.st_uid != uid:
            return f"{path} is a symbolic link owned by another user (uid {st.st_uid})"
        st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != uid:
        return f"{path} is owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{path} can be written by other users (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def write_private(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a new ``0600`` file (never a link) renamed
    into place."""
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def open_lock(path: str) -> int:
    """A descriptor on the lock file ``path`` (created ``0600``, never through a link);
    something else in its place (a directory, a link) is set aside first."""
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
    try:
        return os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno not in (errno.EISDIR, errno.ELOOP, errno.EACCES):
            raise
    set_aside(path, "the lock is not a regular file")
    return os.open(path, flags, 0o600)


def install(directory: str, key: str, built_so: str, built_c: str) -> None:
    """Move a freshly built library (and its source) into the cache as entry ``key``:
    its metadata first, then the library itself, both by rename."""
    with open(built_so, "rb") as f:
        data = f.read()
    meta = {"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    os.chmod(built_so, 0o600)
    os.chmod(built_c, 0o600)
    write_private(os.path.join(directory, f"{key}.meta"), json.dumps(meta).encode())
    os.replace(built_c, os.path.join(directory, f"{key}.c"))
    os.replace(built_so, os.path.join(directory, f"{key}.so"))


def check_entry(directory: str, key: str) -> str | None:
    """None if entry ``key`` is missing; "ok" if its library is a regular file matching
    its metadata; else what is wrong with it."""
    so_path = os.path.join(directory, f"{key}.so")
    try:
        st = os.lstat(so_path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return "the library is not a regular file"
    try:
        with open(os.path.join(directory, f"{key}.meta"), "rb") as f:
            meta = json.load(f)
        with open(so_path, "rb") as f:
            data = f.read()
    except (OSError, ValueError):
        return "its metadata is missing or unreadable"
    if not isinstance(meta, dict) or meta.get("key") != key:
        return "its metadata belongs to another entry"
    if meta.get("size") != len(data):
        return f"the library has {len(data)} bytes, {meta.get('size')} were installed"
    if meta.get("sha256") != hashlib.sha256(data).hexdigest():
        return "the library's content is not what was installed"
    return "ok"


def set_aside(path: str, why: str) -> None:
    """Rename a damaged file out of the way (``*.damaged``), warning once per path."""
    aside = f"{path}.damaged"
    with contextlib.suppress(OSError):
        if os.path.isdir(aside) and not os.path.islink(aside):
            shutil.rmtree(aside)
        os.replace(path, aside)
    if os.path.lexists(path):  # could not be renamed: remove it
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    if path not in _warned:
        _warned.add(path)
        warnings.warn(
            f"compile cache entry {path} was set aside and is rebuilt: {why}",
            TensorjitRuntimeWarning,
            stacklevel=4,
        )


_ENTRY_FILE = re.compile(r"^([0-9a-f]{64})\.(so|c|meta|lock|failed\.c|so\.damaged|lock\.damaged)$")
_OWN_TEMPORARY = re.compile(r"^(\.build-[0-9a-f]{16}-.+|\..+\.tmp)$")
STALE_SECONDS = 600  # a build or temporary file this old belongs to no running compile


def clear(directory: str) -> tuple[int, int]:
    """Remove what this cache wrote in ``directory`` and nothing else: entries (each under
    its key's lock, so a compile of that key in progress finishes first), the compiler
    notes, and build directories and temporary files older than ``STALE_SECONDS``.
    Returns (files removed, files left alone)."""
    import fcntl

    removed = kept = 0
    if not os.path.isdir(directory):
        return 0, 0
    names = sorted(os.listdir(directory))
    keys = sorted({m.group(1) for m in map(_ENTRY_FILE.match, names) if m})
    for key in keys:
        lock_path = os.path.join(directory, f"{key}.lock")
        fd = open_lock(lock_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            for name in os.listdir(directory):
                match = _ENTRY_FILE.match(name)
                if match and match.group(1) == key and not name.endswith(".lock"):
                    removed += _remove(os.path.join(directory, name))
            removed += _remove(lock_path)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
    now = time.time()
    for name in os.listdir(directory):
        path = os.path.join(directory, name)
        if _ENTRY_FILE.match(name):
            continue  # written by a compile that started meanwhile
        if name == "compilers.json":
            removed += _remove(path)
        elif _OWN_TEMPORARY.match(name) and now - os.lstat(path).st_mtime > STALE_SECONDS:
            removed += _remove(path)
        else:
            kept += 1
    return removed, kept


def _remove(path: str) -> int:
    with contextlib.suppress(FileNotFoundError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
        return 1
    return 0


def mark_used(directory: str, key: str) -> None:
    """Record that entry ``key`` was loaded now (its metadata's modification time is the
    entry's last use, which ``prune`` evicts by; access times are often not kept)."""
    with contextlib.suppress(OSError):
        os.utime(os.path.join(directory, f"{key}.meta"))


def _entries(directory: str) -> dict[str, list]:
    """key -> [last use, bytes, file names] of every entry in ``directory``."""
    entries: dict[str, list] = {}
    for name in os.listdir(directory):
        match = _ENTRY_FILE.match(name)
        if not match:
            continue
        with contextlib.suppress(FileNotFoundError):
            info = os.lstat(os.path.join(directory, name))
            entry = entries.setdefault(match.group(1), [0.0, 0, []])
            entry[1] += info.st_size
            entry[2].append(name)
            if name.endswith(".meta"):
                entry[0] = info.st_mtime
    return entries


def prune(directory: str, max_bytes: int) -> tuple[int, int, int]:
    """Remove the least recently used entries until the cache holds at most
    ``max_bytes``, and lock files left without an entry. An entry whose lock is held (a
    build in progress) is skipped. Loads take no lock: a process that finds an entry
    gone between checking and loading it builds it again, and one that loaded it keeps
    the mapping. Returns (entries removed, bytes freed, bytes kept)."""
    import fcntl

    if not os.path.isdir(directory):
        return 0, 0, 0
    entries = _entries(directory)  # one listing for the whole prune
    total = sum(size for _, size, _ in entries.values())
    removed = freed = 0
    for key, (_, size, names) in sorted(entries.items(), key=lambda item: item[1][0]):
        lock_only = names == [f"{key}.lock"]
        if total <= max_bytes and not lock_only:
            continue
        lock_path = os.path.join(directory, f"{key}.lock")
        fd = open_lock(lock_path)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # being built now
            for name in names:
                if not name.endswith(".lock"):
                    _remove(os.path.join(directory, name))
            _remove(lock_path)
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        if not lock_only:
            removed += 1
        freed += size
        total -= size
    return removed, freed, total

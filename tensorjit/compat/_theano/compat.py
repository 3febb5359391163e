"""``theano.compat``: Python 2/3 helpers Theano code imports (Python 3 only here)."""

from io import BytesIO, StringIO  # noqa: F401

PY3 = True
izip = zip
imap = map
ifilter = filter


def exc_message(e: BaseException) -> str:
    """The message of exception ``e``."""
    return e.args[0] if e.args else str(e)

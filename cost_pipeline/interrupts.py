"""A signal whose exception Python could not raise.

Ctrl-C and SIGTERM stop a run by raising an exception from the signal handler (Python's
KeyboardInterrupt, Dagster's `DagsterExecutionInterruptedError` during a step) wherever the
main thread is. When that is a finalizer — a weakref callback or a `__del__` run by the garbage
collector (SQLAlchemy's event registry has such callbacks in every Dagster run) — Python
cannot raise it: it prints "Exception ignored in …" and goes on, and the run would finish and
commit as if no signal had come. The process's unraisable hook records such an interrupt
instead. The next query run through `warehouse.query` raises it there (`stop_if_swallowed`),
the run's warehouse connection refuses the next step, and the transaction rolls back
(`Warehouse` in `defs/resources.py`); the command exits 130 as at any interrupt."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# the exit status of a command a signal stopped (SIGINT or SIGTERM), as shells give 128 + 2
EXIT_INTERRUPTED = 130

# the exceptions a signal handler raises here, by class name (Dagster is not imported for it;
# a failed run's error chain names them so too: `cli/materialize._failure`)
INTERRUPT_NAMES = frozenset({"KeyboardInterrupt", "DagsterExecutionInterruptedError"})

_swallowed = {"interrupt": False}


def is_interrupt(exc_type: type[BaseException] | None) -> bool:
    return exc_type is not None and any(
        cls.__name__ in INTERRUPT_NAMES for cls in exc_type.__mro__)


def install() -> None:
    """Record, and do not print, an interrupt that a finalizer swallowed; any other
    unraisable exception goes to the hook that was there before. Idempotent."""
    previous = sys.unraisablehook
    if getattr(previous, "_records_interrupts", False):
        return

    def hook(unraisable) -> None:
        if is_interrupt(unraisable.exc_type):
            _swallowed["interrupt"] = True
            return
        previous(unraisable)

    hook._records_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def chain(exc: BaseException | None) -> Iterator[BaseException]:
    """`exc`, then the exception it was raised from or while handling, and so on, each once."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        yield exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__


def within(exc: BaseException | None) -> bool:
    """Whether a signal's exception is in `exc`'s chain: a library that raised its own error
    while the interrupt passed through it (pydantic building a schema, a class body's
    `__set_name__`, `ssl` starting up, in the first second's imports) — the signal's, not an
    error of the command."""
    return any(is_interrupt(type(e)) for e in chain(exc))


def swallowed() -> bool:
    """Whether a signal's exception was lost in a finalizer since this process started: the
    process was asked to stop, and nothing it writes from then on may commit."""
    return _swallowed["interrupt"]


def stop_if_swallowed() -> None:
    """Raise, where it can be raised, the KeyboardInterrupt a finalizer swallowed: a step then
    stops at its next query instead of running on to its end."""
    if _swallowed["interrupt"]:
        raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM held while the block runs, then delivered to the handlers they had:
    a block that must end as one — a run's COMMIT, the report it publishes and the outcome it
    tags; a file renamed into place and named — is never cut inside (a signal there said
    "rolled back" of a month committed, or failed the COMMIT's query). Outside the main
    thread, where no handler can be set, the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    signums = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, lambda signum, _frame: held.append(signum))
                for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():  # (None: one set outside Python)
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        for signum in dict.fromkeys(held):  # each once, in the order they came
            signal.raise_signal(signum)

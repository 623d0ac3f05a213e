"""Which record a partition is processing, written where a killed process leaves it.

A record that kills its process (a segfault in a C extension, the OOM killer) is
not an exception: nothing is dead-lettered, the offset never commits, and every
process that takes the partition over dies on the same record. So before each
record a task writes the record's offset into a small file mapped into memory,
one per partition in the stage's state directory, and clears it when the batch
is done. A store into a shared mapping is a store into the page cache: it
survives the process's death (no fsync, no system call), and costs about as
much as a list assignment.

An asynchronous record (a lookup, a database write, an ``async def`` agent) is
noted only while its coroutine runs (:class:`WhileRunning`), not while it waits:
meanwhile the event loop runs other stages' records, and a death caused by one
of those must not count against it.

When the partition opens again, an offset still there was in flight when the
process died. The file keeps that record as the *suspect*, with the number of
deaths in a row it was in flight for. The second time, the record goes to the
dead-letter topic unprocessed on the next start. One death never dead-letters
anything (``kill -9`` lands on a record now and then), and any other offset in
flight at a death starts the count again.

Layout: six native int64 words. ``[0]`` the offset in flight (-1: none), ``[1]``
its source (the index in the stage's inputs); ``[2]``, ``[3]``, ``[4]`` the
suspect's offset, source and deaths; ``[5]`` :data:`MAGIC` once initialised
(a new file reads as zeros, which would say "offset 0 in flight").
"""

from __future__ import annotations

import mmap
import os
from array import array
from collections.abc import Coroutine, Generator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NONE = -1
WORDS = 6
SIZE = WORDS * 8
MAGIC = 0x4544_4459_494E_4631  # "EDDYINF1"
# Deaths in a row with the same record in flight that make it poison.
DEATHS_TO_POISON = 2
IN_FLIGHT, SOURCE, SUSPECT, SUSPECT_SOURCE, DEATHS, VERSION = range(WORDS)


@dataclass(frozen=True)
class Suspect:
    """A record that was in flight when the process died, ``deaths`` times in a row."""

    source: int
    offset: int
    deaths: int

    @property
    def poison(self) -> bool:
        return self.deaths >= DEATHS_TO_POISON


class InFlight:
    """One partition's note of the record in flight (see the module docstring).

    ``words`` is what the task's loop writes: ``words[SOURCE]`` once per batch,
    ``words[IN_FLIGHT]`` before each record, ``NONE`` after the batch.
    """

    def __init__(self, path: Path | None) -> None:
        """``path``: the file; None keeps the note in memory (tests, tools)."""
        self._map: mmap.mmap | None = None
        if path is None:
            self.words = memoryview(array("q", [NONE] * WORDS))
        else:
            self._map = _mapped(path)
            self.words = memoryview(self._map).cast("q")
        if self.words[VERSION] != MAGIC:
            self.words[IN_FLIGHT : VERSION + 1] = array("q", [NONE] * (WORDS - 2) + [0, MAGIC])

    def recover(self) -> Suspect | None:
        """After a start: the suspect, counting a death if a record was in flight."""
        words = self.words
        offset, source = words[IN_FLIGHT], words[SOURCE]
        if offset != NONE:
            same = (words[SUSPECT], words[SUSPECT_SOURCE]) == (offset, source)
            deaths = words[DEATHS] + 1 if same else 1
            words[DEATHS], words[SUSPECT_SOURCE], words[SUSPECT] = deaths, source, offset
            words[IN_FLIGHT] = NONE
        if words[SUSPECT] == NONE:
            return None
        return Suspect(words[SUSPECT_SOURCE], words[SUSPECT], words[DEATHS])

    def forget(self) -> None:
        """The suspect is behind the committed offsets (or was dead-lettered)."""
        self.words[SUSPECT], self.words[SUSPECT_SOURCE], self.words[DEATHS] = NONE, NONE, 0

    def close(self) -> None:
        self.words.release()
        if self._map is not None:
            self._map.close()


class WhileRunning:
    """Awaits ``coroutine`` with ``offset`` noted in flight only while it runs.

    The coroutine is driven here, step by step, as ``await`` would drive it: each
    step (between two suspensions) runs with the note set, and every suspension
    clears it. What the event loop sends or throws in (a result, a cancellation)
    is passed on unchanged.
    """

    __slots__ = ("_coroutine", "_offset", "_words")

    def __init__(
        self, coroutine: Coroutine[Any, Any, None], words: memoryview, offset: int
    ) -> None:
        self._coroutine = coroutine
        self._words = words
        self._offset = offset

    def __await__(self) -> Generator[Any, Any, None]:
        coroutine, words, offset = self._coroutine, self._words, self._offset
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            words[IN_FLIGHT] = offset
            try:
                step = coroutine.send(sent) if thrown is None else coroutine.throw(thrown)
            except StopIteration:
                return
            finally:
                words[IN_FLIGHT] = NONE
            try:
                sent, thrown = (yield step), None
            except GeneratorExit:
                coroutine.close()
                raise
            except BaseException as exc:  # thrown in by the event loop: cancellation
                sent, thrown = None, exc


def _mapped(path: Path) -> mmap.mmap:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < SIZE:
            os.ftruncate(fd, SIZE)  # zeros: initialised by InFlight (no MAGIC yet)
        return mmap.mmap(fd, SIZE)
    finally:
        os.close(fd)

"""Running inputs and keeping the figures: inputs run, findings (with the input
kept), the slowest input in CPU ms, the growth of memory.

Two engines feed :class:`Runner`: atheris (libFuzzer, coverage-guided: it learns
which inputs reach new lines of the decoders and the schema checks) in a child
process, as libFuzzer ends the process that runs it; and a plain mutator in this
process, for machines without atheris and for reproducible short runs.
"""

from __future__ import annotations

import hashlib
import json
import random
import resource
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tools.fuzz.targets import Target, run_one

SLOW_MS = 100.0  # an input may take this much CPU time at most
KEPT_FINDINGS = 20  # findings described in the figures (all are counted, and kept on disk)


@dataclass
class Figures:
    inputs: int = 0
    decoded: int = 0
    refused: int = 0
    findings: int = 0
    slow_inputs: int = 0
    slowest_ms: float = 0.0
    slowest_target: str = ""
    rss_start_mb: float = 0.0
    rss_end_mb: float = 0.0
    rss_peak_mb: float = 0.0
    seconds: float = 0.0
    engine: str = ""
    described: list[str] = field(default_factory=list)

    @property
    def rss_growth_mb(self) -> float:
        return self.rss_end_mb - self.rss_start_mb

    def summary(self) -> str:
        rate = self.inputs / self.seconds if self.seconds else 0.0
        return (
            f"fuzz ({self.engine}): {self.inputs:,} inputs in {self.seconds:.0f} s "
            f"({rate:,.0f}/s): {self.decoded:,} decoded, {self.refused:,} refused with a "
            f"reason; findings {self.findings} (crashes and other exceptions), "
            f"{self.slow_inputs} inputs over {SLOW_MS:.0f} ms; slowest input "
            f"{self.slowest_ms:.1f} ms CPU ({self.slowest_target}); RSS "
            f"{self.rss_start_mb:.0f} -> {self.rss_end_mb:.0f} MB "
            f"(growth {self.rss_growth_mb:+.1f} MB, peak {self.rss_peak_mb:.0f} MB)"
        )


def rss_mb() -> float:
    """This process's resident memory now (Linux /proc; else its peak so far)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Runner:
    """Runs inputs against the targets, keeping the figures and the findings."""

    def __init__(self, targets: list[Target], out: Path, engine: str) -> None:
        self.targets = targets
        self.out = out
        self.figures = Figures(engine=engine)
        self._started = time.monotonic()

    def start_measuring(self) -> None:
        """Memory from now on (after the starting corpus: every schema parsed and cached)."""
        self.figures.rss_start_mb = self.figures.rss_peak_mb = rss_mb()
        self._started = time.monotonic()

    def one(self, data: bytes) -> None:
        figures = self.figures
        started = time.thread_time()
        try:
            target, decoded = run_one(self.targets, data)
        except Exception as exc:  # the invariant broken: kept, counted, and the run goes on
            self._finding(data, f"{type(exc).__name__}: {exc}", traceback.format_exc())
            return
        finally:
            spent_ms = (time.thread_time() - started) * 1000
            figures.inputs += 1
        if decoded:
            figures.decoded += 1
        else:
            figures.refused += 1
        if spent_ms > figures.slowest_ms:
            figures.slowest_ms, figures.slowest_target = spent_ms, target
        if spent_ms > SLOW_MS:
            figures.slow_inputs += 1
            self._keep(data, "slow", f"{target}: {spent_ms:.1f} ms")
        if figures.inputs % 1_000 == 0:
            figures.rss_peak_mb = max(figures.rss_peak_mb, rss_mb())

    def finish(self) -> Figures:
        self.figures.rss_end_mb = rss_mb()
        self.figures.rss_peak_mb = max(self.figures.rss_peak_mb, self.figures.rss_end_mb)
        self.figures.seconds = time.monotonic() - self._started
        return self.figures

    def write(self, path: Path) -> None:
        data = asdict(self.finish())
        path.write_text(json.dumps(data, indent=1) + "\n")

    def _finding(self, data: bytes, what: str, trace: str) -> None:
        self.figures.findings += 1
        self._keep(data, "finding", f"{what}\n{trace}")

    def _keep(self, data: bytes, kind: str, what: str) -> None:
        name = f"{kind}-{hashlib.sha1(data).hexdigest()[:16]}"
        self.out.mkdir(parents=True, exist_ok=True)
        (self.out / name).write_bytes(data)
        (self.out / f"{name}.txt").write_text(what)
        if len(self.figures.described) < KEPT_FINDINGS:
            self.figures.described.append(f"{name}: {what.splitlines()[0][:300]}")


def figures_from(path: Path) -> Figures:
    data: dict[str, Any] = json.loads(path.read_text())
    return Figures(**data)


# -- the plain mutator ----------------------------------------------------------------

_INTERESTING = [
    b"\x00",
    b"\xff",
    b"\x7f",
    b"\x80",
    b"\xfe\xff\xff\xff\xff\xff\xff\xff\x7f",  # zigzag 2^62
    b"\x01",
    b"NaN",
    b"1e400",
    b"-Infinity",
    b'"',
    b"[",
    b"{",
    b"\\u",
]


def mutate(rng: random.Random, data: bytes, corpus: list[bytes], max_len: int) -> bytes:
    """``data`` changed a few times: bits flipped, bytes set, inserted, deleted,
    repeated, a piece of another input spliced in."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.randrange(7)
        # Mostly past the target and variant bytes: the payload is what is under test.
        low = min(2, len(out)) if rng.random() < 0.9 else 0
        at = rng.randint(low, len(out))
        if choice == 0 and out:
            out[min(at, len(out) - 1)] ^= 1 << rng.randrange(8)
        elif choice == 1 and out:
            out[min(at, len(out) - 1)] = rng.randrange(256)
        elif choice == 2:
            out[at:at] = rng.choice(_INTERESTING)
        elif choice == 3 and out:
            del out[at : at + rng.randint(1, 8)]
        elif choice == 4 and out:
            piece = out[at : at + rng.randint(1, 16)]
            out[at:at] = piece * rng.randint(1, 64)
        elif choice == 5:
            other = rng.choice(corpus)
            if other[:1] == out[:1]:  # the same target: splice its bytes in
                start = rng.randrange(len(other) + 1)
                out[at:] = other[start:]
        else:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return bytes(out[:max_len])


def mutate_forever(
    runner: Runner, seeds: list[bytes], inputs: int, seconds: float, seed: int, max_len: int
) -> None:
    """Run the plain mutator until ``inputs`` inputs or ``seconds`` (0: no bound)."""
    rng = random.Random(seed)
    corpus = list(seeds)
    deadline = time.monotonic() + seconds if seconds else float("inf")
    count = 0
    while (not inputs or count < inputs) and time.monotonic() < deadline:
        for _ in range(256):
            data = mutate(rng, rng.choice(corpus), corpus, max_len)
            runner.one(data)
            count += 1
            if rng.random() < 0.01 and len(corpus) < 10_000:
                corpus.append(data)  # a little memory of the past: deeper mutations

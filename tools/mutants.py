#!/usr/bin/env python3
"""Mutations that must fail: one-line breaks of the invariants ringcast's
correctness rests on, each of which some test must catch.

For each mutation: apply it to the source (the original text must occur exactly
once), rebuild the release tree, run the tests that guard that invariant, and
restore the source. A mutation that no test catches "survives": the script
then exits non-zero. The source is restored however the script ends.

Not in the list, because a test already does it on every run: dropping the
SeqLock re-check. seqlock_detector_test builds the reader without it (from a
copy of the header made at configure time) and must see torn reads.
Also not in the list: removing one of the ring's fences. On x86 (total store
order) with the compilers here, no test can tell a missing fence from a present
one; the argument for each fence is docs/memory-ordering.md, and TSan checks
the plain-data races a missing acquire/release pair would cause.

It takes minutes per mutation (a rebuild plus the tests), so tools/test.sh does
not run it; run it after changing a guarded invariant or its tests:

  tools/mutants.py                  every mutation
  tools/mutants.py --list           names and what each breaks
  tools/mutants.py seqlock-recheck  only the named ones
"""
import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Mutation:
    name: str
    breaks: str
    file: str
    original: str
    mutant: str
    tests: str  # ctest -R regex of the tests expected to catch it


MUTATIONS = [
    Mutation("takeover-scan", "a new producer resumes after the last committed slot, found by version",
             "src/ring/broadcast_ring.cpp",
             "if (s.version.load(std::memory_order_acquire) != 2 * seq + 2) break;",
             "break;",
             "Takeover|CrossProcessTest|BroadcastRingTest"),
    # Not refreshing at all only costs speed (every push would rescan); the
    # refresh that matters for correctness stores a lower bound on every cursor.
    Mutation("cached-min-refresh", "the producer's cached minimum, refreshed when the ring looks full, "
             "is a lower bound on every active cursor",
             "src/ring/broadcast_ring.cpp",
             "cached_min_ = min;",
             "cached_min_ = seq_;",
             "BroadcastRingTest|ConcurrencyTest"),
    Mutation("lap-count", "a lapped reader learns how many messages it missed",
             "src/ring/broadcast_ring.cpp",
             "return {Errc::lapped, 0, resume - seq};",
             "return {Errc::lapped, 0, 0};",
             "BroadcastRingTest|RelayTest|RelayBatchTest"),
    Mutation("head-stamp", "a previous lap's payload bytes never read as the version a reader at the head waits for",
             "include/ringcast/detail/broadcast_ring_inline.hpp",
             "if (next.version.load(std::memory_order_relaxed) > 2 * end) [[unlikely]] {",
             "if (false) {",
             "RecordTest|RecordTornReadTest|CrossProcessTest"),
    Mutation("stamp-bound", "the head stamp is checked within a lap of every record, padding or claim",
             "src/ring/record.cpp",
             "  stamp_below_ = std::max(stamp_below_, seq_ + pad + slots + capacity_);",
             "",
             "RecordTest|RecordTornReadTest|CrossProcessTest"),
    Mutation("inline-intent-check", "a lappable reader validates an inline message against the write intent too",
             "include/ringcast/detail/broadcast_ring_inline.hpp",
             "if (lappable && header_->tail.write_intent.load(std::memory_order_relaxed) > pos + capacity_) {",
             "if (false) {",
             "RecordTornReadTest|CrossProcessTest"),
    Mutation("inline-intent-near-record", "an inline message within a lap of a record stores the write intent "
             "(and checks the head stamp) before its slot",
             "include/ringcast/detail/broadcast_ring_inline.hpp",
             "  if (seq_ + 1 < stamp_below_) [[unlikely]]",
             "  if (false)",
             "RecordTest|RecordTornReadTest"),
    Mutation("record-padding", "a record never crosses a block boundary or the ring's end",
             "src/ring/record.cpp",
             "    pad += left;",
             "    break;",
             "RecordTest|RecordTornReadTest|CrossProcessTest"),
    Mutation("reap-rate-limit", "reap_on_full reaps at most once per kReapOnFullIntervalNs",
             "src/ring/broadcast_ring.cpp",
             "next_reap_ns_ = now + kReapOnFullIntervalNs;",
             "next_reap_ns_ = now;",
             "ReapOnFull|CrossProcessTest"),
    Mutation("hard-limit", "a connection queue never holds more than its hard limit",
             "src/broker/queue/connection_queue.cpp",
             "if (total > limits_.hard_bytes) return overflow_locked(",
             "if (false && total > limits_.hard_bytes) return overflow_locked(",
             "ConnectionQueueTest|SlowReaderTest|SeedTest"),
    Mutation("loss-notice", "a connection that lost messages is told in-band",
             "src/broker/queue/connection_queue.cpp",
             "if (pending_loss_ == 0 || closed_ || conflating_) return;",
             "return;",
             "ConnectionQueueTest|SlowReaderTest|BrokerIntegrationTest"),
    Mutation("block-refusal", "a `block` subscriber with no room refuses the publish for the whole channel",
             "src/broker/core/subscription_index.cpp",
             "if (!h.sub->queue().blocking()) continue;",
             "continue;",
             "BlockTest|SeedTest"),
]


def run(cmd: list, log: Path) -> int:
    with log.open("a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        return subprocess.run(cmd, cwd=ROOT, stdout=f, stderr=subprocess.STDOUT).returncode


def try_mutation(m: Mutation, build: Path, log: Path) -> str:
    path = ROOT / m.file
    source = path.read_text()
    if source.count(m.original) != 1:
        return f"STALE: the original text occurs {source.count(m.original)} times in {m.file}"
    path.write_text(source.replace(m.original, m.mutant))
    try:
        if run(["cmake", "--build", str(build)], log) != 0:
            return "BUILD FAILED: a mutant must compile to say anything (see the log)"
        status = run(["ctest", "--test-dir", str(build), "-R", m.tests, "-j2", "--timeout", "300"], log)
        return "caught" if status != 0 else "SURVIVED"
    finally:
        path.write_text(source)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="mutations to try (default: all)")
    ap.add_argument("--build", default="build/release", help="release build directory")
    ap.add_argument("--list", action="store_true", help="list the mutations and exit")
    args = ap.parse_args()
    if args.list:
        for m in MUTATIONS:
            print(f"{m.name:20} {m.breaks}  [{m.file}; tests: {m.tests}]")
        return
    unknown = set(args.names) - {m.name for m in MUTATIONS}
    if unknown:
        sys.exit(f"mutants: unknown mutation(s): {', '.join(sorted(unknown))} (see --list)")
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]
    build = (ROOT / args.build).resolve()
    log = build / "mutants.log"
    log.write_text("")
    failed = 0
    for n, m in enumerate(chosen, 1):
        start = time.monotonic()
        print(f"mutants: [{n}/{len(chosen)}] {m.name}: {m.breaks} ...", flush=True)
        verdict = try_mutation(m, build, log)
        print(f"mutants: [{n}/{len(chosen)}] {m.name}: {verdict} ({time.monotonic() - start:.0f} s)", flush=True)
        failed += not verdict.startswith("caught")
    # Leave the build matching the restored source.
    run(["cmake", "--build", str(build)], log)
    print(f"mutants: {len(chosen) - failed} caught, {failed} survived or stale (log: {log})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

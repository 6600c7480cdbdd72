#!/usr/bin/env python3
"""Runs README.md and the docs the way a newcomer would, so that a broken step fails CI.

tools/test.sh runs it after the release build's tests have passed:

  * The release build is installed into a temporary prefix (the README's
    `cmake --install` step) whose bin/ goes first on PATH, as the README says.
  * Each document named (README.md by default) is run in turn, its blocks in
    order; the rules below hold for every document.
  * Every ```sh block runs, in order, with bash -euo pipefail from the
    repository root. Background jobs a block starts (`ringcast-broker &`) are
    killed when the block ends. Lines that run the test suite itself
    (`tools/test.sh`, `ctest ...`) are not re-run: this script is part of
    that run, after the suite passed. DESTDIR points into the temporary
    directory, so a block's `cmake --install` (default prefix) stays there.
  * A ```sh or ```python block must remove what it creates under /dev/shm:
    a path the block names that was not there before it and is there after
    it fails the run (and is removed).
  * A block preceded by `<!-- readme-test: skip REASON -->` does not run; the
    reason is required and printed. Only for a block that cannot run in CI.
  * A ```sh block preceded by `<!-- readme-test: help -->` (the benchmarks,
    which take minutes and need a quiet machine) runs each command with
    --help instead, which proves the command exists and parses; a command
    under build/release/ runs from the --bench-build tree instead (CI builds
    the benchmarks in its ASan tree, tools/test.sh).
  * Every ```python block runs with /usr/bin/python3 (the interpreter the
    module is built for) with the build's python/ directory on PYTHONPATH, as
    the README tells a user to set it.
  * A captured ring-top screen, preceded by `<!-- readme-test:
    ring-top-screen -->`, must have the title line (numbers aside) and the
    column headers (spacing aside) that the installed ring-top prints: the
    ring table's, and the consumer table's for a ring whose max message (the
    line above it) is one slot (RECV/s) or more (SLOTS/s). A ring-top JSON
    object, preceded by `<!-- readme-test: ring-top-json -->`, must have the
    keys ring-top --json prints, at the top, in a ring and in a consumer.
  * A settings file, preceded by `<!-- readme-test: config TOOL -->`, must be
    accepted by `TOOL --config FILE --print-config`.
  * A document's ```cmake block and its ```cpp blocks become one small project built
    against the installed package with find_package(ringcast): each cpp block
    is the body of a main() (its #include lines hoisted), with the few names
    the snippets leave to the reader (Tick, next_tick, handle) defined in a
    prelude. Those preceded by `<!-- readme-test: run -->` also run, in
    order (a producer, then a consumer that reads what it left in the ring),
    and must exit 0. A snippet that waits for consumers
    (`wait_for_consumers`) gets one: `ringcast sub` on the ring it creates,
    which must receive a message before the snippet's process ends.

usage: tools/readme-test.py [--build DIR] [--bench-build DIR] [--keep] [DOC.md ...]
Exits non-zero at the first block that fails, printing the block and its
output.
"""
import argparse
import json
import os
import re
import signal
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE_LINE = re.compile(r"^\s*(tools/test\.sh|ctest)\b")
SHM_PATH = re.compile(r"/dev/shm/[\w.-]+")
DIRECTIVES = ("run", "help", "skip", "ring-top-screen", "ring-top-json", "config")
BLOCK_TIMEOUT_S = 600

PRELUDE = """\
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <ringcast/broadcast_ring.hpp>
using namespace ringcast;
// Names the README's snippets leave to the reader.
struct Tick { std::uint64_t seq; double price; };
static Tick next_tick() { return Tick{1, 100.25}; }
static void handle(std::span<const std::byte> payload) { std::fwrite(payload.data(), 1, payload.size(), stdout); }
"""


def blocks(doc: str, text: str):
    """Yields (lang, directive, argument, text, line) for every fenced block;
    the directive is the `<!-- readme-test: NAME ARGUMENT -->` line before it."""
    lines = text.splitlines()
    i = 0
    directive, argument = "", ""
    while i < len(lines):
        m = re.match(r"^<!--\s*readme-test:\s*(\S+)\s*(.*?)\s*-->\s*$", lines[i])
        if m:
            directive, argument = m.group(1), m.group(2)
            if directive not in DIRECTIVES:
                fail(f"{doc}:{i + 1}: unknown directive {directive!r} (known: {', '.join(DIRECTIVES)})", "", "")
            if directive in ("skip", "config") and not argument:
                fail(f"{doc}:{i + 1}: `readme-test: {directive}` needs an argument (a reason, a tool)", "", "")
            i += 1
            continue
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            if lines[i].strip():
                directive, argument = "", ""
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        yield m.group(1), directive, argument, "\n".join(lines[start:j]) + "\n", start
        directive, argument = "", ""
        i = j + 1


def fail(what: str, text: str, output: str) -> None:
    print(f"readme-test: FAILED: {what}\n--- block ---\n{text}--- output ---\n{output}", file=sys.stderr)
    sys.exit(1)


def shm_paths(text: str) -> set:
    """The files under /dev/shm that a block names."""
    return {Path(p) for p in SHM_PATH.findall(text)}


def check_shm_left(where: str, text: str, before: set, output: str) -> None:
    """A block removes the files it created under /dev/shm (a reader who runs
    the doc keeps none); those it left are removed here and fail the run."""
    left = sorted(p for p in shm_paths(text) - before if p.exists())
    for p in left:
        p.unlink()
    if left:
        fail(f"{where}: left {', '.join(map(str, left))} behind", text, output)


def existing(paths: set) -> set:
    return {p for p in paths if p.exists()}


def run_sh(text: str, where: str, env: dict, help_only: bool, bench_build: str) -> None:
    script = []
    for l in text.splitlines():
        if SUITE_LINE.match(l):
            script.append(f": readme-test: not re-run, part of this run: {l.strip()!r}")
        elif help_only and l.strip() and not l.lstrip().startswith("#"):
            command = l.split("#", 1)[0].split()
            if command[0].startswith("build/release/"):
                command[0] = bench_build + command[0][len("build/release"):]
            script.append(" ".join(command[:1] + ["--help"]) + " >/dev/null")
        else:
            script.append(l)
    body = "\n".join(script) + "\n"
    print(f"readme-test: {where}: sh{' (--help)' if help_only else ''}", flush=True)
    before = existing(shm_paths(text))
    # Output goes to a file, not a pipe: the block's background jobs keep a
    # pipe open after bash exits, and they are killed only once it has.
    with tempfile.TemporaryFile(mode="w+") as log:
        proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", body], cwd=ROOT, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGTERM)  # the block's background jobs
        except ProcessLookupError:
            pass
        log.seek(0)
        out = log.read()
    if proc.returncode == -signal.SIGKILL:
        fail(f"{where}: timed out after {BLOCK_TIMEOUT_S} s", body, out)
    sys.stdout.write("".join(f"    {l}\n" for l in out.splitlines()[-12:]))
    if proc.returncode != 0:
        fail(f"{where}: exit status {proc.returncode}", body, out)
    check_shm_left(where, text, before, out)


def run_python(text: str, where: str, env: dict, build: Path) -> None:
    print(f"readme-test: {where}: python", flush=True)
    before = existing(shm_paths(text))
    r = subprocess.run(["/usr/bin/python3", "-"], input=text, cwd=ROOT, text=True,
                       env=dict(env, PYTHONPATH=str(build / "python")),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=BLOCK_TIMEOUT_S)
    sys.stdout.write("".join(f"    {l}\n" for l in r.stdout.splitlines()[-6:]))
    if r.returncode != 0:
        remove_created_rings(text)
        fail(f"{where}: exit status {r.returncode}", text, r.stdout)
    check_shm_left(where, text, before, r.stdout)


def remove_created_rings(text: str) -> None:
    """A snippet that creates a ring under a fixed name leaves it behind."""
    for path in re.findall(r'create\("([^"]+)"', text):
        Path(path).unlink(missing_ok=True)


def start_consumer(text: str, env: dict):
    """For a snippet that waits for consumers: `ringcast sub -n 1` on the ring
    it creates, retried until the ring exists (sub fails at once before)."""
    if "wait_for_consumers(" not in text:
        return None
    path = re.findall(r'create\("([^"]+)"', text)[0]
    return subprocess.Popen(["bash", "-c", f"until ringcast sub {path} -n 1; do sleep 0.05; done"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class RingTop:
    """What the installed ring-top prints today, taken once (--once -d 0 and
    --json -d 0) over two rings with a consumer each: one whose messages take
    one slot (max message 52 B), one whose messages may take more."""

    def __init__(self, env: dict, work: Path):
        rings = {"one": work / "one-slot.ring", "many": work / "many-slots.ring"}
        for ring, max_message in zip(rings.values(), ("52", "1k")):
            subprocess.run(["ringcast", "create", str(ring), "--capacity", "64", "--max-message", max_message],
                           env=env, check=True, stdout=subprocess.DEVNULL)
        subs = [subprocess.Popen(["ringcast", "sub", str(r)], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL) for r in rings.values()]
        try:
            deadline = time.monotonic() + 30
            while True:  # until both consumers are registered and shown
                out = subprocess.run(["ring-top", "--once", "-d", "0", *map(str, rings.values())], env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
                if sum(l.split()[:1] == ["#"] for l in out.splitlines()) == 2 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.json = json.loads(subprocess.run(["ring-top", "--json", "-d", "0", str(rings["one"])], env=env,
                                                  stdout=subprocess.PIPE, text=True, check=True).stdout)
        finally:
            for s in subs:
                s.terminate()
                s.wait()
        self.screen = out
        self.want = {}
        for kind, line in header_lines(out):
            self.want.setdefault(kind, line)
        if set(self.want) != {"title", "RING", "# one", "# many"}:
            fail("ring-top --once -d 0 did not show two rings with a consumer each", "", out)

    def check_screen(self, text: str, where: str) -> None:
        print(f"readme-test: {where}: ring-top screen", flush=True)
        checked = header_lines(text)
        if not checked:
            fail(f"{where}: a ring-top screen with no title or header line to check", text, self.screen)
        for kind, line in checked:
            if line != self.want[kind]:
                fail(f"{where}: the ring-top screen's line {line!r} is not ring-top's {self.want[kind]!r}", text,
                     self.screen)

    def check_json(self, text: str, where: str) -> None:
        print(f"readme-test: {where}: ring-top JSON", flush=True)
        doc = json.loads(text)
        real = self.json
        for what, d, r in (("top level", doc, real), ("a ring", doc["rings"][0], real["rings"][0]),
                           ("a consumer", doc["rings"][0]["consumers"][0], real["rings"][0]["consumers"][0])):
            if set(d) != set(r):
                fail(f"{where}: {what}'s keys differ from ring-top --json's: missing {sorted(set(r) - set(d))}, "
                     f"extra {sorted(set(d) - set(r))}", text, json.dumps(real))


def header_lines(screen: str) -> list:
    """(kind, line) for a ring-top screen's title and header lines, spacing
    and the title's numbers aside. A consumer table's header is of kind
    "# one" under a ring whose max message (the line above) takes one slot
    (its rate column is RECV/s), "# many" under one whose may take more."""
    found = []
    slots = "one"
    for line in (" ".join(l.split()) for l in screen.splitlines()):
        if "max message" in line:
            m = re.search(r"max message (\d+) B$", line)
            slots = "one" if m and int(m.group(1)) <= 52 else "many"
        if line.startswith("ring-top "):
            found.append(("title", re.sub(r"\b(ring|consumer)s\b", r"\1", re.sub(r"\d+(\.\d+)?", "N", line))))
        elif line.split()[:1] == ["RING"]:
            found.append(("RING", line))
        elif line.split()[:1] == ["#"]:
            found.append((f"# {slots}", line))
    return found


def check_config(tool: str, text: str, where: str, env: dict, work: Path) -> None:
    print(f"readme-test: {where}: {tool} --config", flush=True)
    path = work / "settings.toml"
    path.write_text(text)
    r = subprocess.run([tool, "--config", str(path), "--print-config"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        fail(f"{where}: {tool} refuses the settings", text, r.stdout)


def build_snippets(doc: str, cmake_text: str, cpp_blocks: list, prefix: Path, work: Path, env: dict) -> None:
    src = work / f"snippets-{Path(doc).stem}"
    src.mkdir()
    names = []
    for n, (text, line, _) in enumerate(cpp_blocks):
        includes = [l for l in text.splitlines() if l.startswith("#include")]
        body = "\n".join(l for l in text.splitlines() if not l.startswith("#include"))
        name = f"snippet{n}"
        (src / f"{name}.cpp").write_text(
            f"// {doc}:{line}\n" + "\n".join(includes) + "\n" + PRELUDE +
            "int main() {\n" + body + "\n  return 0;\n}\n")
        names.append(name)
    # The document's cmake block: its lines naming the `app` target apply to
    # each snippet's executable, the rest (find_package) once.
    per_target = [l for l in cmake_text.splitlines() if "(app " in l]
    once = [l for l in cmake_text.splitlines() if "(app " not in l]
    lists = ["cmake_minimum_required(VERSION 3.25)", "project(readme_snippets CXX)",
             "set(CMAKE_CXX_STANDARD 20)", *once]
    for name in names:
        lists.append(f"add_executable({name} {name}.cpp)")
        lists += [l.replace("(app ", f"({name} ") for l in per_target]
    (src / "CMakeLists.txt").write_text("\n".join(lists) + "\n")
    print(f"readme-test: {doc} cmake + cpp blocks: build against the installed package", flush=True)
    build = work / f"{src.name}-build"
    for cmd in (["cmake", "-S", str(src), "-B", str(build), f"-DCMAKE_PREFIX_PATH={prefix}",
                 "-DCMAKE_BUILD_TYPE=Release"],
                ["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            fail(f"{doc}: snippet build: " + " ".join(cmd), (src / "CMakeLists.txt").read_text(), r.stdout)
    # The snippets marked `run`, in order; the rings they create go afterwards.
    try:
        for name, (text, line, run) in zip(names, cpp_blocks):
            if not run:
                continue
            print(f"readme-test: {doc}:{line}: run the snippet", flush=True)
            consumer = start_consumer(text, env)
            r = subprocess.run([str(build / name)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=BLOCK_TIMEOUT_S)
            sys.stdout.write("".join(f"    {l}\n" for l in r.stdout.splitlines()[-12:]))
            if r.returncode != 0:
                if consumer:
                    consumer.kill()
                fail(f"running the snippet at {doc}:{line}", text, r.stdout)
            if consumer:
                try:
                    out, _ = consumer.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    consumer.kill()
                    out, _ = consumer.communicate()
                sys.stdout.write("".join(f"    consumer: {l}\n" for l in out.splitlines()[-3:]))
                if consumer.returncode != 0 or "received 1 message(s)" not in out:
                    fail(f"the consumer of the snippet at {doc}:{line}", text, out)
    finally:
        for text, _, _ in cpp_blocks:
            remove_created_rings(text)


def run_doc(doc: str, env: dict, build: Path, bench_build: str, prefix: Path, work: Path, ring_top) -> dict:
    """Runs one document's blocks; returns how many of each kind ran."""
    counts = {"sh": 0, "python": 0, "cpp": 0, "checked": 0, "skipped": 0}
    cmake_text, cpp_blocks = "", []
    for lang, directive, argument, text, line in blocks(doc, (ROOT / doc).read_text()):
        where = f"{doc}:{line}"
        if directive == "skip":
            print(f"readme-test: {where}: skipped: {argument}", flush=True)
            counts["skipped"] += 1
        elif lang == "sh":
            run_sh(text, where, env, directive == "help", bench_build)
            counts["sh"] += 1
        elif lang == "python":
            run_python(text, where, env, build)
            counts["python"] += 1
        elif lang == "cmake":
            cmake_text = text
        elif lang == "cpp":
            cpp_blocks.append((text, line, directive == "run"))
        elif directive == "ring-top-screen":
            ring_top().check_screen(text, where)
            counts["checked"] += 1
        elif directive == "ring-top-json":
            ring_top().check_json(text, where)
            counts["checked"] += 1
        elif directive == "config":
            check_config(argument, text, where, env, work)
            counts["checked"] += 1
    if cpp_blocks:
        if not cmake_text:
            fail(f"{doc} has cpp blocks but no cmake block to build them with", "", "")
        build_snippets(doc, cmake_text, cpp_blocks, prefix, work, env)
        counts["cpp"] = len(cpp_blocks)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build/release", help="release build directory to install from")
    ap.add_argument("--bench-build", help="the tree with the benchmarks, for the help blocks (default: --build)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary prefix and snippet builds")
    ap.add_argument("docs", nargs="*", default=["README.md"], help="documents to run, relative to the repository")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ringcast-readme-"))
    prefix = work / "prefix"
    try:
        r = subprocess.run(["cmake", "--install", str(ROOT / args.build), "--prefix", str(prefix)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            fail("cmake --install", "", r.stdout)
        env = dict(os.environ, PATH=f"{prefix / 'bin'}:{os.environ.get('PATH', '')}", DESTDIR=str(work / "destdir"))
        taken = []

        def ring_top() -> RingTop:  # taken once, on first use
            if not taken:
                taken.append(RingTop(env, work))
            return taken[0]

        for doc in args.docs:
            c = run_doc(doc, env, ROOT / args.build, args.bench_build or args.build, prefix, work, ring_top)
            print(f"readme-test: {doc}: {c['sh']} sh and {c['python']} python blocks ran, {c['cpp']} cpp blocks "
                  f"built, {c['checked']} outputs checked, {c['skipped']} skipped: ok", flush=True)
    finally:
        if args.keep:
            print(f"readme-test: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs README.md the way a newcomer would, so that a broken step fails CI.

tools/test.sh runs it after the release build's tests have passed:

  * The release build is installed into a temporary prefix (the README's
    `cmake --install` step) whose bin/ goes first on PATH, as the README says.
  * Every ```sh block runs, in order, with bash -euo pipefail from the
    repository root. Background jobs a block starts (`ringcast-broker &`) are
    killed when the block ends. Lines that run the test suite itself
    (`tools/test.sh`, `ctest ...`) are not re-run: this script is part of
    that run, after the suite passed.
  * A ```sh block preceded by `<!-- readme-test: help -->` (the benchmarks,
    which take minutes and need a quiet machine) runs each command with
    --help instead, which proves the command exists and parses.
  * Every ```python block runs with /usr/bin/python3 (the interpreter the
    module is built for) with the build's python/ directory on PYTHONPATH, as
    the README tells a user to set it.
  * A captured ring-top screen, preceded by `<!-- readme-test:
    ring-top-screen -->`, must have the column headers (the ring table's and
    the consumer table's, spacing aside) the installed ring-top prints for a
    ring with a consumer.
  * The ```cmake block and the ```cpp blocks become one small project built
    against the installed package with find_package(ringcast): each cpp block
    is the body of a main() (its #include lines hoisted), with the few names
    the snippets leave to the reader (Tick, next_tick, handle) defined in a
    prelude. Those preceded by `<!-- readme-test: run -->` also run, in
    order (a producer, then a consumer that reads what it left in the ring),
    and must exit 0. A snippet that waits for consumers
    (`wait_for_consumers`) gets one: `ringcast sub` on the ring it creates,
    which must receive a message before the snippet's process ends.

usage: tools/readme-test.py [--build DIR] [--readme FILE] [--keep]
Exits non-zero at the first block that fails, printing the block and its
output.
"""
import argparse
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


def blocks(readme: str):
    """Yields (lang, directive, text, line) for every fenced block."""
    lines = readme.splitlines()
    i = 0
    directive = ""
    while i < len(lines):
        m = re.match(r"^<!--\s*readme-test:\s*(\S+)\s*-->\s*$", lines[i])
        if m:
            directive = m.group(1)
            i += 1
            continue
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            if lines[i].strip():
                directive = ""
            i += 1
            continue
        start = i + 1
        j = start
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        yield m.group(1), directive, "\n".join(lines[start:j]) + "\n", start
        directive = ""
        i = j + 1


def fail(what: str, text: str, output: str) -> None:
    print(f"readme-test: FAILED: {what}\n--- block ---\n{text}--- output ---\n{output}", file=sys.stderr)
    sys.exit(1)


def run_sh(text: str, line: int, env: dict, help_only: bool) -> None:
    script = []
    for l in text.splitlines():
        if SUITE_LINE.match(l):
            script.append(f": readme-test: not re-run, part of this run: {l.strip()!r}")
        elif help_only and l.strip() and not l.lstrip().startswith("#"):
            command = l.split("#", 1)[0].split()
            script.append(" ".join(command[:1] + ["--help"]) + " >/dev/null")
        else:
            script.append(l)
    body = "\n".join(script) + "\n"
    print(f"readme-test: README.md:{line}: sh{' (--help)' if help_only else ''}", flush=True)
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
        fail(f"README.md:{line}: timed out after {BLOCK_TIMEOUT_S} s", body, out)
    sys.stdout.write("".join(f"    {l}\n" for l in out.splitlines()[-12:]))
    if proc.returncode != 0:
        fail(f"README.md:{line}: exit status {proc.returncode}", body, out)


def run_python(text: str, line: int, env: dict, build: Path) -> None:
    print(f"readme-test: README.md:{line}: python", flush=True)
    r = subprocess.run(["/usr/bin/python3", "-"], input=text, cwd=ROOT, text=True,
                       env=dict(env, PYTHONPATH=str(build / "python")),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=BLOCK_TIMEOUT_S)
    remove_created_rings(text)
    if r.returncode != 0:
        fail(f"README.md:{line}: exit status {r.returncode}", text, r.stdout)


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


def check_ring_top_screen(text: str, line: int, env: dict, work: Path) -> None:
    print(f"readme-test: README.md:{line}: ring-top screen", flush=True)
    ring = work / "columns.ring"
    subprocess.run(["ringcast", "create", str(ring), "--capacity", "64", "--max-message", "52"], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    sub = subprocess.Popen(["ringcast", "sub", str(ring)], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:  # until the consumer is registered and shown
            out = subprocess.run(["ring-top", "--once", "-d", "0", str(ring)], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True).stdout
            if any(l.split()[:1] == ["#"] for l in out.splitlines()) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    finally:
        sub.terminate()
        sub.wait()

    def headers(screen: str) -> set:
        return {" ".join(l.split()) for l in screen.splitlines() if l.split()[:1] in (["RING"], ["#"])}

    if len(headers(out)) != 2 or headers(text) != headers(out):
        fail(f"README.md:{line}: the ring-top screen's column headers are not ring-top's", text, out)


def build_snippets(cmake_text: str, cpp_blocks: list, prefix: Path, work: Path, env: dict) -> None:
    src = work / "snippets"
    src.mkdir()
    names = []
    for n, (text, line, _) in enumerate(cpp_blocks):
        includes = [l for l in text.splitlines() if l.startswith("#include")]
        body = "\n".join(l for l in text.splitlines() if not l.startswith("#include"))
        name = f"snippet{n}"
        (src / f"{name}.cpp").write_text(
            f"// README.md:{line}\n" + "\n".join(includes) + "\n" + PRELUDE +
            "int main() {\n" + body + "\n  return 0;\n}\n")
        names.append(name)
    # The README's cmake block: its lines naming the `app` target apply to each
    # snippet's executable, the rest (find_package) once.
    per_target = [l for l in cmake_text.splitlines() if "(app " in l]
    once = [l for l in cmake_text.splitlines() if "(app " not in l]
    lists = ["cmake_minimum_required(VERSION 3.25)", "project(readme_snippets CXX)",
             "set(CMAKE_CXX_STANDARD 20)", *once]
    for name in names:
        lists.append(f"add_executable({name} {name}.cpp)")
        lists += [l.replace("(app ", f"({name} ") for l in per_target]
    (src / "CMakeLists.txt").write_text("\n".join(lists) + "\n")
    print("readme-test: README.md cmake + cpp blocks: build against the installed package", flush=True)
    for cmd in (["cmake", "-S", str(src), "-B", str(work / "snippets-build"),
                 f"-DCMAKE_PREFIX_PATH={prefix}", "-DCMAKE_BUILD_TYPE=Release"],
                ["cmake", "--build", str(work / "snippets-build"), "-j", str(os.cpu_count() or 2)]):
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            fail("snippet build: " + " ".join(cmd), (src / "CMakeLists.txt").read_text(), r.stdout)
    # The snippets marked `run`, in order; the rings they create go afterwards.
    try:
        for name, (text, line, run) in zip(names, cpp_blocks):
            if not run:
                continue
            print(f"readme-test: README.md:{line}: run the snippet", flush=True)
            consumer = start_consumer(text, env)
            r = subprocess.run([str(work / "snippets-build" / name)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=BLOCK_TIMEOUT_S)
            sys.stdout.write("".join(f"    {l}\n" for l in r.stdout.splitlines()[-12:]))
            if r.returncode != 0:
                if consumer:
                    consumer.kill()
                fail(f"running the snippet at README.md:{line}", text, r.stdout)
            if consumer:
                try:
                    out, _ = consumer.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    consumer.kill()
                    out, _ = consumer.communicate()
                sys.stdout.write("".join(f"    consumer: {l}\n" for l in out.splitlines()[-3:]))
                if consumer.returncode != 0 or "received 1 message(s)" not in out:
                    fail(f"the consumer of the snippet at README.md:{line}", text, out)
    finally:
        for text, _, _ in cpp_blocks:
            remove_created_rings(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build/release", help="release build directory to install from")
    ap.add_argument("--readme", default="README.md")
    ap.add_argument("--keep", action="store_true", help="keep the temporary prefix and snippet build")
    args = ap.parse_args()

    readme = (ROOT / args.readme).read_text()
    work = Path(tempfile.mkdtemp(prefix="ringcast-readme-"))
    prefix = work / "prefix"
    try:
        r = subprocess.run(["cmake", "--install", str(ROOT / args.build), "--prefix", str(prefix)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            fail("cmake --install", "", r.stdout)
        env = dict(os.environ, PATH=f"{prefix / 'bin'}:{os.environ.get('PATH', '')}")
        cmake_text, cpp_blocks, ran, ran_python = "", [], 0, 0
        for lang, directive, text, line in blocks(readme):
            if lang == "sh":
                run_sh(text, line, env, directive == "help")
                ran += 1
            elif lang == "python":
                run_python(text, line, env, ROOT / args.build)
                ran_python += 1
            elif lang == "cmake":
                cmake_text = text
            elif lang == "cpp":
                cpp_blocks.append((text, line, directive == "run"))
            elif directive == "ring-top-screen":
                check_ring_top_screen(text, line, env, work)
        if not cmake_text or not cpp_blocks:
            fail("README.md has no cmake block or no cpp blocks to build", "", "")
        build_snippets(cmake_text, cpp_blocks, prefix, work, env)
        print(f"readme-test: {ran} sh and {ran_python} python blocks ran, {len(cpp_blocks)} cpp blocks built: ok")
    finally:
        if args.keep:
            print(f"readme-test: kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

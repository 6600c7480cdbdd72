#!/usr/bin/env python3
"""Builds and tests the Go and Rust bindings, and runs their examples against
the C++ tools across processes (tests/bindings/CMakeLists.txt registers each
step as a ctest test).

  exchange_test.py [common flags] build go|rust
      go test (and under -race the tests that share a ring between goroutines)
      / cargo test, then the producer and consumer examples, built
      offline into --work with every cache there.
  exchange_test.py [common flags] exchange PRODUCER CONSUMER
      PRODUCER and CONSUMER are go, rust or ringcast (`ringcast pub` /
      `ringcast sub`): a fresh ring, the consumer registered first, then
      kCount messages of the examples' pattern, each checked (sequence and
      every byte) by the consumer example or, for `ringcast sub`, here.

Exit 77 (skipped) when a toolchain the step needs is not on PATH.
"""
import argparse
import os
import shutil
import subprocess
import sys
import threading

SKIP = 77
COUNT = 20000  # messages per exchange: the 256-slot ring wraps many times
TIMEOUT = 90  # seconds any one process may take


def message(i):
    """The examples' pattern (src/bindings/go/examples/pattern, src/bindings/rust/examples/pattern)."""
    return f"{i} ".encode() + bytes([ord("a") + i % 26]) * (i * 7 % 120)


def toolchain(lang):
    """The programs `lang` builds with, or None when one is missing."""
    tools = ["go"] if lang == "go" else ["cargo", "rustc"]
    return tools if all(shutil.which(t) for t in tools) else None


def environment(args, lang):
    env = dict(os.environ, PKG_CONFIG_PATH=args.pkg_config_path)
    root = os.path.join(args.work, lang)
    if lang == "go":
        # No module is ever downloaded: the package has no dependencies.
        env.update(GOCACHE=os.path.join(root, "cache"), GOPATH=os.path.join(root, "path"), GOPROXY="off",
                   GOTOOLCHAIN="local", GOFLAGS="", CGO_ENABLED="1",
                   # src/bindings/go/native_test.go exchanges messages with it across processes
                   RINGCAST_CLI=args.ringcast)
    else:
        env.update(CARGO_TARGET_DIR=os.path.join(root, "target"), CARGO_HOME=os.path.join(root, "cargo-home"))
    return env


def binary(args, lang, role):
    return os.path.join(args.work, lang, "bin", role)


def run(cmd, **kwargs):
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, timeout=600, **kwargs)


def build(args, lang):
    if toolchain(lang) is None:
        print(f"skipped: no {lang} toolchain on PATH (tools/install-deps.sh installs it)")
        return SKIP
    source = os.path.join(args.bindings, lang)
    env = environment(args, lang)
    bin_dir = os.path.join(args.work, lang, "bin")
    os.makedirs(bin_dir, exist_ok=True)
    if lang == "go":
        run(["go", "version"], env=env)
        run(["go", "vet", "./..."], cwd=source, env=env)
        run(["go", "test", "-count=1", "./..."], cwd=source, env=env)
        # Under the race detector, the tests where Go goroutines share a ring
        # (the -race build stores a slot's words atomically: store_atomic.go).
        run(["go", "test", "-race", "-count=1", "-run",
             "^(TestGoProducerAndConsumersConcurrently|TestGoPathGivesTheResultsOfTheCAbi)$", "."],
            cwd=source, env=env)
        for role in ("producer", "consumer"):
            run(["go", "build", "-o", binary(args, lang, role), f"./examples/{role}"], cwd=source, env=env)
    else:
        run(["rustc", "--version"], env=env)
        run(["cargo", "test", "--offline", "--release"], cwd=source, env=env)
        run(["cargo", "build", "--offline", "--release", "--examples"], cwd=source, env=env)
        for role in ("producer", "consumer"):
            shutil.copy(os.path.join(env["CARGO_TARGET_DIR"], "release", "examples", role), binary(args, lang, role))
    return 0


def fail(text):
    print(f"FAIL: {text}", flush=True)
    return 1


def exchange(args, producer, consumer):
    for lang in {producer, consumer} - {"ringcast"}:
        if toolchain(lang) is None:
            print(f"skipped: no {lang} toolchain on PATH (tools/install-deps.sh installs it)")
            return SKIP
    ring = os.path.join(args.work, f"{producer}-to-{consumer}.ring")
    run([args.ringcast, "create", ring, "--capacity", "256", "--max-message", "256", "--force"])

    # The consumer first; it says when it has registered.
    if consumer == "ringcast":
        sub = subprocess.Popen([args.ringcast, "sub", ring, "--count", str(COUNT)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
        ready = sub.stderr.readline().decode()
        expect_ready = "subscribed"
    else:
        sub = subprocess.Popen([binary(args, consumer, "consumer"), "-ring" if consumer == "go" else "--ring", ring,
                                "-count" if consumer == "go" else "--count", str(COUNT)], stdout=subprocess.PIPE)
        ready = sub.stdout.readline().decode()
        expect_ready = "ready"
    if expect_ready not in ready:
        sub.kill()
        sub.wait()
        return fail(f"the {consumer} consumer did not register: {ready!r}")

    # The producer runs on a thread while this one drains the consumer's
    # output: a consumer blocked on a full pipe would stop the producer.
    if producer == "ringcast":
        pub_cmd = [args.ringcast, "pub", ring]
        pub_input = b"".join(message(i) + b"\n" for i in range(COUNT))
    else:
        flag = "-" if producer == "go" else "--"
        pub_cmd = [binary(args, producer, "producer"), f"{flag}ring", ring, f"{flag}count", str(COUNT)]
        pub_input = None
    pub = subprocess.Popen(pub_cmd, stdin=subprocess.PIPE if pub_input else subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    pub_output = []
    pub_thread = threading.Thread(target=lambda: pub_output.append(pub.communicate(input=pub_input)[0]))
    pub_thread.start()
    try:
        out, err = sub.communicate(timeout=TIMEOUT)
        if sub.returncode == 0:
            pub_thread.join(timeout=TIMEOUT)
    finally:
        for process in (sub, pub):  # a producer whose consumer failed may wait for it forever
            if process.poll() is None:
                process.kill()
        sub.wait()
        pub_thread.join()
    print(pub_output[0].decode(), end="")
    print(out.decode(errors="replace")[-200:] if consumer != "ringcast" else "", (err or b"").decode(), end="")
    if sub.returncode != 0:
        return fail(f"the {consumer} consumer exited with {sub.returncode}")
    if pub.returncode != 0:
        return fail(f"the {producer} producer exited with {pub.returncode}")
    if consumer == "ringcast":
        got = out.split(b"\n")
        if got[-1] != b"" or len(got) - 1 != COUNT:
            return fail(f"ringcast sub printed {len(got) - 1} lines, expected {COUNT}")
        for i, line in enumerate(got[:-1]):
            if line != message(i):
                return fail(f"message {i}: got {line[:80]!r}, expected {message(i)[:80]!r}")
    elif f"received {COUNT}" not in out.decode():
        return fail(f"the {consumer} consumer did not report {COUNT} messages")
    print(f"{COUNT} messages from the {producer} producer to the {consumer} consumer, each checked")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bindings", required=True, help="src/bindings")
    parser.add_argument("--work", required=True, help="build directory for toolchain caches, binaries and rings")
    parser.add_argument("--pkg-config-path", required=True, help="directory of the build tree's ringcast-c.pc")
    parser.add_argument("--ringcast", required=True, help="the ringcast tool")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("lang", choices=["go", "rust"])
    e = sub.add_parser("exchange")
    e.add_argument("producer", choices=["go", "rust", "ringcast"])
    e.add_argument("consumer", choices=["go", "rust", "ringcast"])
    args = parser.parse_args()
    for name in ("bindings", "work", "pkg_config_path", "ringcast"):
        setattr(args, name, os.path.abspath(getattr(args, name)))
    if args.command == "build":
        return build(args, args.lang)
    return exchange(args, args.producer, args.consumer)


if __name__ == "__main__":
    sys.exit(main())

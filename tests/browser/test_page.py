"""The live page in a real browser (tests/browser/CMakeLists.txt registers each test with ctest).

Each test starts ringcast-broker with a WebSocket port and a headless Chromium,
opens the page the broker serves at GET / through the Chrome DevTools Protocol
(CDP, over WebSocket with python3-websockets), and reads the page's DOM with
Runtime.evaluate while redis-cli (or, with tokens, a WebSocket client)
publishes. Every wait polls against a deadline; nothing sleeps in place of a
condition.

ctest sets BROKER_EXE; CHROMIUM and REDIS_CLI default to Debian's paths
(tools/install-deps.sh installs both: a missing one is a failure, not a skip).
"""

import asyncio
import base64
import hashlib
import hmac
import ctypes
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request

import pytest
import websockets

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
REDIS_CLI = os.environ.get("REDIS_CLI", "/usr/bin/redis-cli")
DEADLINE_S = 30  # generous: sanitizer builds and a shared CI machine

_libc = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class LineReader:
    """Reads a child's output on a thread (so the pipe never fills) and waits for a line."""

    def __init__(self, stream):
        self.lines = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, args=(stream,), daemon=True)
        self._thread.start()

    def _run(self, stream):
        for line in stream:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self.lines.append(None)  # EOF
            self._cond.notify_all()

    def wait_for(self, regex, what):
        pattern = re.compile(regex)
        deadline = time.monotonic() + DEADLINE_S
        with self._cond:
            while True:
                for line in self.lines:
                    if line is None:
                        pytest.fail(f"{what}: output ended without a line matching {regex!r}:\n" + self.text())
                    m = pattern.search(line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"{what}: no line matching {regex!r} within {DEADLINE_S} s:\n" + self.text())
                self._cond.wait(left)

    def text(self):
        return "\n".join(l for l in self.lines[-40:] if l is not None)


class Broker:
    """ringcast-broker on loopback: a RESP port (--port 0, read back) and a WebSocket port."""

    def __init__(self, extra=()):
        exe = os.environ.get("BROKER_EXE")
        if not exe:
            pytest.fail("BROKER_EXE is not set (run these tests through ctest)")
        # Port 0 for both: the broker prints what it bound.
        self.proc = subprocess.Popen([exe, "--port", "0", "--ws-port", "0", "--io-threads", "1", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     preexec_fn=_die_with_parent)
        self.out = LineReader(self.proc.stdout)
        # "ringcast-broker listening on 127.0.0.1:<port>"
        self.port = int(self.out.wait_for(r"listening on (?:\[[^]]*\]|[^\s:]+):(\d+)", "ringcast-broker").group(1))
        # "ringcast-broker websocket on ws://127.0.0.1:<port>/ ..."
        self.ws_port = int(self.out.wait_for(r"(?i)\bweb ?socket\b.*?:(\d+)", "ringcast-broker").group(1))
        # The page is served at GET / on the WebSocket port.
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ws_port}/", timeout=DEADLINE_S) as r:
            assert r.status == 200
            assert "text/html" in r.headers.get("Content-Type", "")

    def publish(self, channel, payload):
        """redis-cli publish; returns its reply (the number of deliveries)."""
        r = subprocess.run([REDIS_CLI, "-p", str(self.port), "publish", channel, payload],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=DEADLINE_S)
        assert r.returncode == 0, r.stdout
        return r.stdout.decode(errors="replace").strip()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            status = self.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            pytest.fail("ringcast-broker did not stop on SIGTERM")
        # Non-zero also when a sanitizer build reported something.
        assert status == 0, f"ringcast-broker exit status {status}:\n{self.out.text()}"


class Chromium:
    """Headless Chromium with its DevTools endpoint; its whole process group goes at close()."""

    def __init__(self):
        if not os.access(CHROMIUM, os.X_OK):
            pytest.fail(f"{CHROMIUM} not found: tools/install-deps.sh installs Debian's chromium")
        self.profile = tempfile.mkdtemp(prefix="ringcast-browser-test-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
            start_new_session=True, preexec_fn=_die_with_parent)
        self.err = LineReader(self.proc.stderr)
        self.devtools_url = self.err.wait_for(r"DevTools listening on (ws://\S+)", "chromium").group(1)

    def close(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab, driven over CDP: open(url), evaluate(js), wait_until(js)."""

    def __init__(self, ws):
        self.ws = ws
        self.session = None
        self.next_id = 0
        self.exceptions = []  # uncaught JavaScript exceptions the page threw

    async def call(self, method, params=None, session=None):
        self.next_id += 1
        call_id = self.next_id
        msg = {"id": call_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        await self.ws.send(json.dumps(msg))
        while True:
            reply = json.loads(await asyncio.wait_for(self.ws.recv(), DEADLINE_S))
            if reply.get("method") == "Runtime.exceptionThrown":
                self.exceptions.append(reply["params"]["exceptionDetails"])
            if reply.get("id") == call_id:
                if "error" in reply:
                    raise AssertionError(f"CDP {method}: {reply['error']}")
                return reply["result"]

    async def open(self, url):
        target = await self.call("Target.createTarget", {"url": "about:blank"})
        attached = await self.call("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})
        self.session = attached["sessionId"]
        await self.call("Runtime.enable", session=self.session)
        await self.call("Page.enable", session=self.session)
        await self.call("Page.navigate", {"url": url}, session=self.session)

    async def evaluate(self, expression):
        r = await self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                            session=self.session)
        if "exceptionDetails" in r:
            raise AssertionError(f"evaluating {expression!r}: {r['exceptionDetails']}")
        return r["result"].get("value")

    async def text(self, selector):
        return await self.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent ?? null")

    async def wait_until(self, expression, what):
        deadline = time.monotonic() + DEADLINE_S
        while True:
            if await self.evaluate(expression):
                return
            if time.monotonic() > deadline:
                pytest.fail(f"page: {what} not seen within {DEADLINE_S} s\n" + await self.describe())
            await asyncio.sleep(0.05)  # polling interval, not a synchronisation

    async def describe(self):
        parts = {s: await self.text(s) for s in ("#status", "#rate", "#count", "#notices", "#messages")}
        return "\n".join(f"  {k}: {v!r}" for k, v in parts.items()) + f"\n  exceptions: {self.exceptions}"


class NatsServer:
    """nats-server on a loopback port of its choosing (-p -1), read back from its log."""

    def __init__(self):
        exe = shutil.which("nats-server")
        if not exe:
            pytest.fail("nats-server not found: tools/install-deps.sh installs Debian's nats-server")
        self.proc = subprocess.Popen([exe, "-a", "127.0.0.1", "-p", "-1"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        self.err = LineReader(self.proc.stderr)
        port = self.err.wait_for(r"Listening for client connections on 127\.0\.0\.1:(\d+)", "nats-server").group(1)
        self.url = f"nats://127.0.0.1:{port}"

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=DEADLINE_S)


@pytest.fixture
def broker():
    b = Broker()
    yield b
    b.stop()


@pytest.fixture
def chromium():
    c = Chromium()
    yield c
    c.close()


def run_page(chromium, url, body):
    """Opens `url` in a new tab and runs `body(page)`; fails on any uncaught page exception."""

    async def main():
        async with websockets.connect(chromium.devtools_url, max_size=None, open_timeout=DEADLINE_S) as ws:
            page = Page(ws)
            await page.open(url)
            await body(page)
            await page.evaluate("0")  # collects exception events that arrived meanwhile
            assert not page.exceptions, f"the page threw: {page.exceptions}"

    asyncio.run(main())


def contains(selector, text):
    return f"(document.querySelector({json.dumps(selector)})?.textContent ?? '').includes({json.dumps(text)})"


SUBSCRIBED = "document.querySelector('#status')?.dataset.state === 'subscribed'"


def test_page_shows_redis_cli_publish(broker, chromium):
    async def body(page):
        await page.wait_until(SUBSCRIBED, "subscribed")
        assert await page.text("#status") == "subscribed to browser.test"
        assert broker.publish("browser.test", "hello-from-redis") == "1"  # the page is the one subscriber
        await page.wait_until(contains("#messages", "hello-from-redis"), "the published message")
        assert await page.text("#count") == "1"
        # The next once-a-second tick counts it in the rate history the plot draws.
        await page.wait_until("window.ringcast.state.rates.reduce((a, b) => a + b, 0) === 1", "the rate counter")
        assert await page.text("#notices") == ""
        # A broker without --cluster has no cluster series: no cluster section.
        await page.wait_until("window.ringcast.state.cluster !== 'unknown'", "the answer of /metrics")
        assert await page.evaluate("window.ringcast.state.cluster") == "absent"
        assert await page.evaluate("document.querySelector('#cluster').hidden") is True

    run_page(chromium, f"http://127.0.0.1:{broker.ws_port}/?channel=browser.test", body)


def test_page_shows_the_cluster_of_a_broker_started_with_cluster(chromium):
    nats = NatsServer()
    here = there = None
    try:
        here = Broker(["--cluster", nats.url])
        there = Broker(["--cluster", nats.url])

        def series(name):  # the cluster table's value of one series, as text
            return ("[...document.querySelectorAll('#cluster-series tr')].map((tr) => tr.cells)"
                    f".find((c) => c[0].textContent === {json.dumps(name)})?.[1].textContent ?? null")

        async def body(page):
            await page.wait_until(SUBSCRIBED, "subscribed")
            await page.wait_until("window.ringcast.state.cluster === 'present'", "the cluster section")
            assert await page.evaluate("document.querySelector('#cluster').hidden") is False
            assert await page.text("#cluster-state") == "connected"
            assert await page.text("#cluster-server") == f"NATS {nats.url}"
            # The page's subscription is this node's one interest in the cluster.
            channels = series('interest{space="channel"}')
            await page.wait_until(f"{channels} === '1'", "the interest count")
            assert await page.evaluate(series('interest{space="pattern"}')) == "0"
            # Published on the other node: it crosses NATS into this one and the page.
            assert there.publish("browser.cluster", "hello-from-the-other-node") == "0"  # no receiver there
            await page.wait_until(contains("#messages", "hello-from-the-other-node"), "the message from the other node")
            await page.wait_until(f"{series('received_total')} === '1'", "the received counter")
            for name in ("sent_total", "gaps_total", "lost_total", "unreachable_total", "nats_dropped_total"):
                assert await page.evaluate(series(name)) == "0", name

        run_page(chromium, f"http://127.0.0.1:{here.ws_port}/?channel=browser.cluster", body)
    finally:
        for b in (here, there):
            if b:
                b.stop()
        nats.stop()


def test_page_subscribes_to_a_glob_and_shows_binary_payloads_as_base64(broker, chromium):
    async def body(page):
        await page.wait_until(SUBSCRIBED, "subscribed")
        assert broker.publish("browser.glob", "text-payload") == "1"
        binary = b"\xff\xfeab"  # not UTF-8 (argv cannot carry a NUL)
        assert broker.publish("browser.glob", binary) == "1"
        await page.wait_until(contains("#messages", "base64 " + base64.b64encode(binary).decode()), "the binary payload")
        assert "[binary, 4 bytes]" in await page.text("#messages")
        assert "text-payload" in await page.text("#messages")
        assert await page.text("#notices") == "", "consecutive message ids must not show a gap"

    run_page(chromium, f"http://127.0.0.1:{broker.ws_port}/?channel=browser.*", body)


def test_page_turns_id_gaps_and_loss_frames_into_notices(broker, chromium):
    # A gap needs the broker to drop messages for this one client, which a
    # browser on loopback does not provoke: the frames after the real ones are
    # handed to the page's frame handler, the path every broker frame takes.
    async def body(page):
        await page.wait_until(SUBSCRIBED, "subscribed")
        assert broker.publish("browser.loss", "first") == "1"
        await page.wait_until(contains("#messages", "first"), "the published message")
        last = await page.evaluate("window.ringcast.state.lastId.get('browser.loss')")
        assert isinstance(last, int)
        frames = [
            {"type": "message", "topic": "browser.loss", "payload": "after-gap", "timestamp": int(time.time() * 1000),
             "message_id": last + 4, "qos": 0},
            {"type": "loss", "topic": "browser.loss", "lost": 7},
            {"type": "message", "topic": "__ringcast__:loss", "payload": "lost=2 total=9 policy=drop-oldest"},
            {"type": "error", "message": "not allowed to subscribe to secret.x"},
        ]
        for f in frames:
            await page.evaluate(f"window.ringcast.handle({json.dumps(f)})")
        await page.wait_until(contains("#messages", "after-gap"), "the message after the gap")
        notices = await page.text("#notices")
        assert f"3 messages missed on topic browser.loss (ids {last + 1}..{last + 3})" in notices
        assert "loss: topic=browser.loss lost=7" in notices
        assert "lost messages: lost=2 total=9 policy=drop-oldest" in notices
        assert "error: not allowed to subscribe to secret.x" in notices
        assert await page.text("#status") == "subscribed to browser.loss"

    run_page(chromium, f"http://127.0.0.1:{broker.ws_port}/?channel=browser.loss", body)


def test_page_switches_channel_from_its_form(broker, chromium):
    async def body(page):
        await page.wait_until(SUBSCRIBED, "subscribed")
        assert await page.text("#status") == "subscribed to browser.before"
        await page.evaluate("document.querySelector('#channel').value = 'browser.after';"
                            "document.querySelector('#form').requestSubmit()")
        await page.wait_until("document.querySelector('#status').textContent === 'subscribed to browser.after'",
                              "the new subscription")
        assert await page.evaluate("new URLSearchParams(location.search).get('channel')") == "browser.after"
        assert broker.publish("browser.before", "old-channel") == "0"  # unsubscribed
        assert broker.publish("browser.after", "new-channel") == "1"
        await page.wait_until(contains("#messages", "new-channel"), "the message on the new channel")
        assert "old-channel" not in await page.text("#messages")

    run_page(chromium, f"http://127.0.0.1:{broker.ws_port}/?channel=browser.before", body)


def test_page_reports_a_lost_connection(broker, chromium):
    async def body(page):
        await page.wait_until(SUBSCRIBED, "subscribed")
        broker.stop()
        await page.wait_until("document.querySelector('#status').dataset.state === 'closed'", "the closed state")
        await page.wait_until(contains("#notices", "connection closed: code"), "the notice")

    run_page(chromium, f"http://127.0.0.1:{broker.ws_port}/?channel=browser.gone", body)


def mint_token(secret, sub, subscribe=(), publish=()):
    """An HS256 JWT as ringcast token mints it (include/ringcast/broker/token.hpp), valid for an hour."""
    def b64url(data):
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    claims = {"sub": sub, "exp": int(time.time()) + 3600, "subscribe": list(subscribe), "publish": list(publish)}
    signing_input = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode()) + "." + b64url(json.dumps(claims).encode())
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return signing_input + "." + b64url(signature)


def test_page_authenticates_with_the_token_in_its_address(chromium, tmp_path):
    secret = b"browser-test-secret-of-at-least-32-bytes"
    (tmp_path / "secret").write_bytes(secret + b"\n")
    broker = Broker(["--token-secret-file", str(tmp_path / "secret")])
    try:
        reader = mint_token(secret, "page", subscribe=["browser.token"])
        writer = mint_token(secret, "publisher", publish=["browser.*"])
        base = f"http://127.0.0.1:{broker.ws_port}/?channel=browser.token"

        async def without_token(page):  # the placeholder token is refused
            await page.wait_until(contains("#notices", "error:"), "the refusal")
            assert "token" in await page.text("#notices")
            assert await page.evaluate("document.querySelector('#status').dataset.state") != "subscribed"

        async def with_token(page):
            await page.wait_until(SUBSCRIBED, "subscribed with the token")
            # Published over WebSocket by a client with a token of its own.
            async with websockets.connect(f"ws://127.0.0.1:{broker.ws_port}/", open_timeout=DEADLINE_S) as pub:
                await pub.send(json.dumps({"type": "auth", "token": writer}))
                assert json.loads(await asyncio.wait_for(pub.recv(), DEADLINE_S)) == {"type": "authenticated"}
                await pub.send(json.dumps({"type": "publish", "topic": "browser.token", "payload": "hello-with-token"}))
            await page.wait_until(contains("#messages", "hello-with-token"), "the published message")
            # The token grants browser.token only: another channel is refused, in the notices.
            await page.evaluate("document.querySelector('#channel').value = 'browser.other';"
                                "document.querySelector('#form').requestSubmit()")
            await page.wait_until(contains("#notices", "error:"), "the refused subscription")
            assert "browser.other" in await page.text("#notices")

        run_page(chromium, base, without_token)
        run_page(chromium, f"{base}&token={reader}", with_token)
    finally:
        broker.stop()

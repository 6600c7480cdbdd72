"""The live page over https and its subscription over wss, in headless Chromium (issue 28).

ringcast-broker serves RESP over TLS only (--port 0 --tls-port 0) and its
WebSocket port with --ws-tls, with a certificate signed by a CA this test
makes with the openssl CLI. Chromium is told to accept that certificate by
its public key (--ignore-certificate-errors-spki-list, Chromium's switch for
test certificates: a CA cannot be added to headless Chromium's trust store
without NSS's certutil). It opens https://localhost:PORT/, whose page opens
wss:// itself; redis-cli --tls publishes; the page shows the message.
Reuses tests/browser/test_page.py's CDP driver.
"""

import base64
import os
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "browser"))
from test_page import (CHROMIUM, DEADLINE_S, REDIS_CLI, SUBSCRIBED, Chromium, LineReader,  # noqa: E402
                       _die_with_parent, contains, run_page)

MAKE_CERTS = r"""
set -e
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=test-ca \
    -keyout ca.key -out ca.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=localhost \
    -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > san.ext
openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 1 -extfile san.ext \
    -out server.crt 2>/dev/null
"""


class TlsChromium(Chromium):
    """test_page's Chromium, accepting one server key."""

    def __init__(self, spki):
        if not os.access(CHROMIUM, os.X_OK):
            pytest.fail(f"{CHROMIUM} not found: tools/install-deps.sh installs Debian's chromium")
        self.profile = tempfile.mkdtemp(prefix="ringcast-tls-browser-test-")
        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", f"--ignore-certificate-errors-spki-list={spki}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
            start_new_session=True, preexec_fn=_die_with_parent)
        self.err = LineReader(self.proc.stderr)
        self.devtools_url = self.err.wait_for(r"DevTools listening on (ws://\S+)", "chromium").group(1)


def test_page_over_https_subscribes_over_wss():
    exe = os.environ.get("BROKER_EXE")
    if not exe:
        pytest.fail("BROKER_EXE is not set (run this test through ctest)")
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["/bin/sh", "-c", MAKE_CERTS], cwd=d, check=True, timeout=DEADLINE_S)
        der = subprocess.run(["/bin/sh", "-c", "openssl x509 -in server.crt -pubkey -noout | "
                              "openssl pkey -pubin -outform der | openssl dgst -sha256 -binary"],
                             cwd=d, check=True, stdout=subprocess.PIPE, timeout=DEADLINE_S).stdout
        spki = base64.b64encode(der).decode()
        proc = subprocess.Popen([exe, "--port", "0", "--tls-port", "0", "--ws-port", "0", "--ws-tls", "--io-threads",
                                 "1", "--tls-cert-file", f"{d}/server.crt", "--tls-key-file", f"{d}/server.key"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                preexec_fn=_die_with_parent)
        out = LineReader(proc.stdout)
        try:
            tls_port = int(out.wait_for(r"listening for TLS on 127\.0\.0\.1:(\d+)", "ringcast-broker").group(1))
            ws_port = int(out.wait_for(r"websocket on wss://127\.0\.0\.1:(\d+)/", "ringcast-broker").group(1))
            chromium = TlsChromium(spki)
            try:
                async def body(page):
                    await page.wait_until(SUBSCRIBED, "subscribed over wss")
                    assert await page.evaluate("location.protocol") == "https:"
                    r = subprocess.run([REDIS_CLI, "--tls", "--cacert", f"{d}/ca.crt", "-p", str(tls_port),
                                        "publish", "browser.tls", "hello-over-wss"],
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=DEADLINE_S)
                    assert r.returncode == 0 and r.stdout.strip() == b"1", r.stdout
                    await page.wait_until(contains("#messages", "hello-over-wss"), "the published message")

                run_page(chromium, f"https://localhost:{ws_port}/?channel=browser.tls", body)
            finally:
                chromium.close()
        finally:
            proc.terminate()
            assert proc.wait(timeout=DEADLINE_S) == 0, out.text()

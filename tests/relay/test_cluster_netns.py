"""A ringcast cluster as hosts (issue 36, part 3; docs/cluster.md).

Each host is a network namespace this test creates and removes: three hosts,
198.51.100.1-3/24 (a documentation range), joined by veth links to a bridge
in a fourth namespace, so that no packet leaves them. On each host a
nats-server (the three routed into one NATS cluster) and a ringcast-broker
with --cluster. The clients are redis-py, each connection's socket made on a
thread that has entered its host's namespace (a socket keeps the namespace
it was made in). Every check is message by message: a subscriber gets each
accepted message in order, or a loss notice that counts it.
"""

import asyncio
import ctypes
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import uuid

import pytest
import redis
import websockets

BROKER = os.environ.get("RINGCAST_BROKER_EXE", "")
NATS_SERVER = os.environ.get("NATS_SERVER_EXE", shutil.which("nats-server") or "")
CLONE_NEWNET = 0x40000000
LOSS = "__ringcast__:loss"


def run(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def enter_namespace(ns):
    """Moves the calling thread into network namespace `ns`: the sockets it makes from now on live there."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
    finally:
        os.close(fd)


def in_namespace(ns, fn):
    """fn() on a thread that has entered network namespace `ns`."""
    out = {}

    def body():
        try:
            enter_namespace(ns)
            out["value"] = fn()
        except BaseException as e:  # handed to the caller's thread
            out["error"] = e

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


class NsConnection(redis.Connection):
    """redis-py's connection, its socket made inside a host's namespace."""

    def __init__(self, ns, **kwargs):
        self.ns = ns
        super().__init__(**kwargs)

    def _connect(self):
        return in_namespace(self.ns, super()._connect)


class Host:
    def __init__(self, net, i):
        self.i = i
        self.ns = f"{net.tag}h{i}"
        self.addr = f"198.51.100.{i}"
        self.switch_port = f"{net.tag}s{i}"
        self.nats = None
        self.broker = None

    def spawn(self, argv, log):
        return subprocess.Popen(["ip", "netns", "exec", self.ns, *argv], stdout=log, stderr=subprocess.STDOUT)

    def client(self):
        pool = redis.ConnectionPool(connection_class=NsConnection, ns=self.ns, host=self.addr, port=6390,
                                    socket_timeout=10)
        return redis.Redis(connection_pool=pool)


class Net:
    """The namespaces, links and servers; removed by close()."""

    def __init__(self, tmp_path, hosts=3):
        self.tag = "rc" + uuid.uuid4().hex[:5]
        self.switch = self.tag + "sw"
        self.tmp = tmp_path
        self.hosts = []
        self.logs = []
        run("ip", "netns", "add", self.switch)
        run("ip", "-n", self.switch, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.switch, "link", "set", "br0", "up")
        for i in range(1, hosts + 1):
            h = Host(self, i)
            self.hosts.append(h)
            run("ip", "netns", "add", h.ns)
            run("ip", "-n", h.ns, "link", "set", "lo", "up")
            run("ip", "link", "add", h.switch_port, "netns", self.switch, "type", "veth", "peer", "name", "eth0",
                "netns", h.ns)
            run("ip", "-n", h.ns, "addr", "add", h.addr + "/24", "dev", "eth0")
            run("ip", "-n", h.ns, "link", "set", "eth0", "up")
            run("ip", "-n", self.switch, "link", "set", h.switch_port, "master", "br0")
            run("ip", "-n", self.switch, "link", "set", h.switch_port, "up")

    def log(self, name):
        f = open(self.tmp / name, "w+")
        self.logs.append(f)
        return f

    def start_nats(self, h, jetstream):
        routes = ",".join(f"nats://{o.addr}:6222" for o in self.hosts if o is not h)
        argv = [NATS_SERVER, "-a", h.addr, "-p", "4222", "--cluster", f"nats://{h.addr}:6222",
                "--cluster_name", "ringcast", "--routes", routes, "-n", h.ns]
        if jetstream:
            argv += ["-js", "-sd", str(self.tmp / f"js-{h.i}")]
        log = self.log(f"nats-{h.i}.log")
        h.nats = h.spawn(argv, log)
        # Listening before any broker starts: a broker that found its own host's server not yet listening
        # connected through another host's, and a test that cut that host off cut the broker off too.
        wait_for(lambda: "Server is ready" in read(log), f"nats-server {h.i} ready")

    def start_broker(self, h, history, urls=None):
        # Its own host's NATS server first, then the others.
        servers = [h] + [o for o in self.hosts if o is not h]
        urls = urls or ",".join(f"nats://{o.addr}:4222" for o in servers)
        log = self.log(f"broker-{h.i}.log")
        argv = [BROKER, "--bind", h.addr, "--port", "6390", "--cluster", urls]
        if history:  # the history stream's three replicas, one per host (docs/cluster.md, "History")
            argv += ["--ws-port", "8080", "--history", "room*=100000"]
        h.broker = h.spawn(argv, log)
        # With history the broker first waits for JetStream's cluster to elect its leader.
        wait_for(lambda: "listening on" in read(log), f"broker {h.i} listening", timeout=60.0 if history else 20.0)

    def up(self, history=False):
        for h in self.hosts:
            self.start_nats(h, history)
        for h in self.hosts:
            self.start_broker(h, history)

    def partition(self, h, cut):
        run("ip", "-n", self.switch, "link", "set", h.switch_port, "down" if cut else "up")

    def lossy(self, h, percent):
        """Drops `percent` of the packets into and out of host h, at random (nft in its namespace)."""
        run("ip", "netns", "exec", h.ns, "nft", "add", "table", "inet", "loss")
        for hook, interface in (("input", "iifname"), ("output", "oifname")):
            run("ip", "netns", "exec", h.ns, "nft", "add", "chain", "inet", "loss", hook,
                f"{{ type filter hook {hook} priority 0; }}")
            run("ip", "netns", "exec", h.ns, "nft", "add", "rule", "inet", "loss", hook, interface, "eth0",
                "numgen", "random", "mod", "100", "<", str(percent), "counter", "drop")

    def dropped(self, h):
        """Packets lossy() has dropped so far on host h."""
        out = subprocess.run(["ip", "netns", "exec", h.ns, "nft", "list", "table", "inet", "loss"], check=True,
                             capture_output=True, text=True).stdout
        return sum(int(n) for n in re.findall(r"counter packets (\d+)", out))

    def all_logs(self):
        return "\n".join(f"--- {f.name}\n{(self.tmp / f.name).read_text()}" for f in self.logs)

    def close(self):
        for h in self.hosts:
            for p in (h.broker, h.nats):
                if p is not None and p.poll() is None:
                    p.kill()
                    p.wait()
        for h in self.hosts:
            subprocess.run(["ip", "netns", "del", h.ns], stderr=subprocess.DEVNULL)
        subprocess.run(["ip", "netns", "del", self.switch], stderr=subprocess.DEVNULL)
        for f in self.logs:
            f.close()


def read(f):
    f.flush()
    f.seek(0)
    return f.read()


def wait_for(cond, what, timeout=20.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def namespaces_work():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = "rcprobe" + uuid.uuid4().hex[:5]
    ok = subprocess.run(["ip", "netns", "add", probe], stderr=subprocess.DEVNULL).returncode == 0
    subprocess.run(["ip", "netns", "del", probe], stderr=subprocess.DEVNULL)
    return ok


pytestmark = [
    pytest.mark.skipif(not BROKER or not NATS_SERVER, reason="RINGCAST_BROKER_EXE and nats-server needed"),
    pytest.mark.skipif(not namespaces_work(), reason="needs root and ip netns (iproute2)"),
]


@pytest.fixture
def net(tmp_path):
    n = Net(tmp_path)
    try:
        n.up()
        yield n
    finally:
        n.close()
        print(n.all_logs())  # pytest shows it when the test failed


@pytest.fixture
def history_net(tmp_path):
    """The same hosts with JetStream on every NATS server and --history on every broker."""
    n = Net(tmp_path)
    try:
        n.up(history=True)
        yield n
    finally:
        n.close()
        print(n.all_logs())


class DelayedLink:
    """A TCP relay on host `h` to `target` (host, port) that holds every byte `delay` seconds before passing it
    on, both ways: a long link where the kernel has no netem. It listens on 127.0.0.1:`port` in h's namespace,
    so only what connects to it crosses the delay. `held` counts the chunks it delayed."""

    def __init__(self, h, port, target, delay):
        self.port, self.target, self.delay = port, target, delay
        self.held = 0
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()

        def body():
            enter_namespace(h.ns)
            asyncio.set_event_loop(self.loop)
            self.server = self.loop.run_until_complete(asyncio.start_server(self.accept, "127.0.0.1", port))
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()
        assert ready.wait(10), "the delayed link never listened"

    async def accept(self, down_reader, down_writer):
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        await asyncio.gather(self.pipe(down_reader, up_writer), self.pipe(up_reader, down_writer),
                             return_exceptions=True)

    async def pipe(self, reader, writer):
        """Passes what `reader` gives to `writer`, each chunk `delay` after it came, in order."""
        held = asyncio.Queue()

        async def release():
            while True:
                due, data = await held.get()
                if data is None:
                    break
                await asyncio.sleep(max(0.0, due - self.loop.time()))
                writer.write(data)
                await writer.drain()
                self.held += 1
            writer.close()

        releasing = asyncio.ensure_future(release())
        try:
            while data := await reader.read(65536):
                held.put_nowait((self.loop.time() + self.delay, data))
        finally:
            held.put_nowait((0.0, None))
            await releasing

    def close(self):
        async def shutdown():
            self.server.close()
            relaying = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in relaying:
                t.cancel()
            await asyncio.gather(*relaying, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture
def delayed_net(tmp_path):
    """The hosts, host 3's broker reaching the NATS cluster only across a 20 ms link (each way) to host 1."""
    n = Net(tmp_path)
    link = None
    try:
        for h in n.hosts:
            n.start_nats(h, False)
        h1, h2, h3 = n.hosts
        link = DelayedLink(h3, 14222, (h1.addr, 4222), 0.020)
        n.start_broker(h1, False)
        n.start_broker(h2, False)
        n.start_broker(h3, False, urls="nats://127.0.0.1:14222")
        yield n, link
    finally:
        n.close()
        if link is not None:
            link.close()
        print(n.all_logs())


class Subscriber:
    """A subscriber's view: the numbered messages it got, and the losses it was told."""

    def __init__(self, host, channel):
        self.client = host.client()
        self.pubsub = self.client.pubsub()
        self.pubsub.subscribe(channel)
        assert self.pubsub.get_message(timeout=10)["type"] == "subscribe"
        self.numbers = []
        self.lost = 0
        self.probes = 0

    def poll(self, timeout=0.05):
        m = self.pubsub.get_message(timeout=timeout)
        if m is None or m["type"] != "message":
            return m is not None
        data = m["data"].decode()
        if m["channel"].decode() == LOSS:
            self.lost += int(re.search(r"lost=(\d+)", data).group(1))
        elif data == "probe":
            self.probes += 1
        else:
            self.numbers.append(int(data))
        return True

    def drain_until(self, number, timeout=30.0):
        end = time.monotonic() + timeout
        while (not self.numbers or self.numbers[-1] != number) and time.monotonic() < end:
            self.poll(0.2)
        assert self.numbers and self.numbers[-1] == number, f"never got {number}; last {self.numbers[-1:]}"

    def check(self, accepted):
        """Every accepted number received in order, or counted in a loss notice."""
        assert self.numbers == sorted(self.numbers), "out of order"
        assert len(set(self.numbers)) == len(self.numbers), "a message twice"
        assert set(self.numbers) <= set(accepted), "a refused message was delivered"
        missing = len(accepted) - len(self.numbers)
        assert missing == self.lost, f"{missing} accepted messages missing, {self.lost} reported lost"


def until_crossed(pub, subs, timeout=30.0):
    """Probes until each subscriber has seen one: interest has crossed the NATS routes."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        pub.publish("chat", "probe")
        for s in subs:
            s.poll(0.05)
        if all(s.probes > 0 for s in subs):
            return
    raise AssertionError("interest never crossed the routes")


def publish_numbers(pub, numbers):
    """PUBLISHes each number; returns those accepted (a CLUSTERDOWN refusal is not)."""
    accepted = []
    for n in numbers:
        try:
            pub.publish("chat", str(n))
            accepted.append(n)
        except redis.ResponseError as e:
            assert str(e).startswith("CLUSTERDOWN "), e
    return accepted


def test_publishes_on_one_host_reach_subscribers_on_the_others_in_order(net):
    h1, h2, h3 = net.hosts
    subs = [Subscriber(h2, "chat"), Subscriber(h3, "chat")]
    pub = h1.client()
    until_crossed(pub, subs)
    accepted = publish_numbers(pub, range(2000))
    assert accepted == list(range(2000))
    for s in subs:
        s.drain_until(1999)
        s.check(accepted)
        assert s.lost == 0


def test_a_killed_nats_server_fails_its_broker_over_and_every_loss_is_reported(net):
    h1, h2, h3 = net.hosts
    subs = [Subscriber(h2, "chat"), Subscriber(h3, "chat")]
    pub = h1.client()
    until_crossed(pub, subs)
    accepted = publish_numbers(pub, range(500))
    h1.nats.kill()  # kill -9 of the NATS server host 1's broker is connected to
    h1.nats.wait()
    accepted += publish_numbers(pub, range(500, 3000))
    # Back through another server: a message that crosses shows it.
    until_crossed(pub, subs)
    accepted += publish_numbers(pub, [3000])  # the marker: any gap before it shows
    assert accepted[-1] == 3000, "the broker never came back"
    for s in subs:
        s.drain_until(3000)
        s.check(accepted)


def test_a_partitioned_host_hears_everything_or_is_told_what_it_missed_after_healing(net):
    h1, h2, h3 = net.hosts
    far, near = Subscriber(h3, "chat"), Subscriber(h2, "chat")
    pub = h1.client()
    until_crossed(pub, [far, near])
    accepted = publish_numbers(pub, range(300))
    net.partition(h3, True)  # host 3's link down
    accepted += publish_numbers(pub, range(300, 2300))
    time.sleep(2)  # the partition lasts (no message is checked against this time)
    net.partition(h3, False)
    until_crossed(pub, [far, near])
    accepted += publish_numbers(pub, [2300])
    for s in (far, near):
        s.drain_until(2300)
        s.check(accepted)
    assert near.lost == 0, "host 2 was never cut off"


@pytest.mark.skipif(shutil.which("nft") is None, reason="needs nft (Debian nftables) to drop packets")
def test_five_percent_packet_loss_on_a_subscribers_link_delays_but_loses_nothing(net):
    h1, h2, h3 = net.hosts
    lossy, clean = Subscriber(h3, "chat"), Subscriber(h2, "chat")
    pub = h1.client()
    until_crossed(pub, [lossy, clean])
    net.lossy(h3, 5)  # every packet in or out of host 3, its NATS server's routes too
    accepted = publish_numbers(pub, range(10000))
    for s in (lossy, clean):
        s.drain_until(9999, timeout=60.0)
        s.check(accepted)
        assert s.lost == 0, "TCP retransmits what the link dropped: nothing is lost, only late"
    assert net.dropped(h3) > 0, "the link dropped nothing: the test tested nothing"


def test_twenty_ms_of_delay_on_a_brokers_link_loses_nothing_and_keeps_order(delayed_net):
    net, link = delayed_net
    h1, h2, h3 = net.hosts
    far, near = Subscriber(h3, "chat"), Subscriber(h2, "chat")
    pub = h1.client()
    until_crossed(pub, [far, near])
    accepted = publish_numbers(pub, range(5000))
    assert accepted == list(range(5000)), "a publisher's node refused while the cluster was up"
    for s in (far, near):
        s.drain_until(4999)
        s.check(accepted)
        assert s.lost == 0
    assert link.held > 0, "nothing crossed the delayed link: the test tested nothing"


def test_subscribers_of_a_killed_broker_reconnect_to_another_host_and_hear_on(net):
    h1, h2, h3 = net.hosts
    moving = Subscriber(h2, "chat")
    pub = h1.client()
    until_crossed(pub, [moving])
    h2.broker.kill()  # kill -9 of a broker node
    h2.broker.wait()
    with pytest.raises(redis.ConnectionError):
        while True:
            moving.pubsub.get_message(timeout=1)
    moved = Subscriber(h3, "chat")  # its client reconnects elsewhere
    until_crossed(pub, [moved])
    accepted = publish_numbers(pub, range(1000))
    moved.drain_until(999)
    moved.check(accepted)


# --- History across hosts (docs/cluster.md, "History") ----------------------------------------------

async def ws_connect(host):
    """A ringcast.v1 WebSocket client of `host`'s broker, its socket made inside the host's namespace."""
    sock = in_namespace(host.ns, lambda: socket.create_connection((host.addr, 8080), timeout=10))
    sock.setblocking(False)
    return await websockets.connect(f"ws://{host.addr}:8080/", sock=sock, subprotocols=["ringcast.v1"],
                                    open_timeout=10, max_size=None)


async def ws_next(ws, timeout=20):
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def subscribe_durable(ws, client_id, deadline):
    """A durable QoS 1 subscribe to room, retried while the cluster's session store cannot be asked for the
    session's owner (the KV bucket's leader not elected yet, or moving): the client is told to retry."""
    while time.monotonic() < deadline:
        await ws.send(json.dumps({"type": "subscribe", "topic": "room", "qos": 1, "client_id": client_id}))
        reply = await ws_next(ws, timeout=30)
        if reply["type"] == "subscribed":
            return
        assert "cannot be reached" in reply.get("message", ""), reply
        await asyncio.sleep(0.2)
    raise AssertionError(f"{client_id} never subscribed")


async def publish_acked(ws, payload, deadline):
    """QoS 1 publish, retried until a puback (at least once); returns its offset and how many tries it took."""
    tries = 0
    while time.monotonic() < deadline:
        tries += 1
        await ws.send(json.dumps({"type": "publish", "topic": "room", "payload": payload, "qos": 1}))
        reply = await ws_next(ws, timeout=30)
        if reply["type"] == "puback":
            return reply["message_id"], tries
        assert reply["type"] == "error", reply  # not stored: retried
        await asyncio.sleep(0.2)
    raise AssertionError(f"{payload} never acknowledged")


def history_of(host):
    """HISTORY room on `host`: [(offset, payload)] and the epoch."""
    epoch, _top, status, messages = host.client().execute_command("HISTORY", "room", "COUNT", "100000")
    assert status == b"ok", status
    return [(m[0], m[2].decode()) for m in messages], epoch.decode()


def test_history_outlives_a_killed_broker_and_a_killed_nats_server_and_loses_nothing_acked(history_net):
    h1, h2, h3 = history_net.hosts

    async def scenario():
        sub = await ws_connect(h2)
        await sub.send(json.dumps({"type": "subscribe", "topic": "room"}))
        confirmed = await ws_next(sub)
        assert confirmed["type"] == "subscribed", confirmed
        epoch = confirmed["epoch"]
        # A durable QoS 1 subscriber on the same host (docs/cluster.md, "Durable sessions").
        durable = await ws_connect(h2)
        await subscribe_durable(durable, "dur-h2", time.monotonic() + 60)
        pub = await ws_connect(h1)
        # The NATS server the publishing node is connected to (not always its own host's: it may have
        # connected before that one listened).
        server = h1.client().info("cluster")["cluster_server"]
        victim = next(h for h in history_net.hosts if f"//{h.addr}:" in server)
        deadline = time.monotonic() + 120
        acked = []  # (offset, payload), in publish order
        retried = set()
        for n in range(300):
            if n == 100:
                victim.nats.kill()  # kill -9 of it, mid-stream: the node fails over, the stream keeps 2 of 3
                victim.nats.wait()
            offset, tries = await publish_acked(pub, str(n), deadline)
            acked.append((offset, str(n)))
            if tries > 1:
                retried.add(str(n))
        # The subscriber on host 2 saw the first 50, then its broker is killed.
        seen = []
        while len(seen) < 50:
            m = await ws_next(sub)
            assert m["type"] == "message", m
            seen.append((m["message_id"], m["payload"]))
        # The durable one acks the first 40 it got (redeliveries aside), and reads 20 more unacked.
        durable_acked = []
        durable_seen = set()
        while len(durable_seen) < 60:
            m = await ws_next(durable)
            assert m["type"] == "message", m
            if m["message_id"] in durable_seen:
                continue
            durable_seen.add(m["message_id"])
            if len(durable_acked) < 40:
                await durable.send(json.dumps({"type": "ack", "topic": "room", "message_id": m["message_id"]}))
                durable_acked.append(m["message_id"])
        h2.broker.kill()
        h2.broker.wait()
        h1.broker.kill()  # and the publisher's: the history is not theirs
        h1.broker.wait()
        # It reconnects to host 3 and recovers from its last offset.
        moved = await ws_connect(h3)
        await moved.send(json.dumps({"type": "subscribe", "topic": "room",
                                     "since": {"offset": seen[-1][0], "epoch": epoch}}))
        r = await ws_next(moved)
        assert r["type"] == "subscribed" and r["recovered"] is True, r
        rest = []
        while not rest or rest[-1][1] != "299":
            # Generous: a node whose NATS server lost a peer gets the stream again once its ordered
            # consumer has been made anew, after JetStream's re-election (slow under ASan).
            m = await ws_next(moved, timeout=90)
            assert m["type"] == "message", m
            rest.append((m["message_id"], m["payload"]))
        # The durable one resumes its session on host 3: every message after its floor (at most its
        # last ack), acking as it goes.
        resumed_on = await ws_connect(h3)
        await subscribe_durable(resumed_on, "dur-h2", time.monotonic() + 60)
        resumed = []
        while not resumed or resumed[-1][1] != "299":
            m = await ws_next(resumed_on, timeout=90)
            assert m["type"] == "message", m
            if not m.get("dup"):
                resumed.append((m["message_id"], m["payload"]))
            await resumed_on.send(json.dumps({"type": "ack", "topic": "room", "message_id": m["message_id"]}))
        return epoch, acked, retried, seen, rest, durable_acked, resumed

    epoch, acked, retried, seen, rest, durable_acked, resumed = asyncio.run(scenario())
    history, history_epoch = history_of(h3)
    assert history_epoch == epoch
    delivered = seen + rest
    # Everything the subscriber got is exactly the history, in order, no gap and no duplicate at the seam.
    assert delivered == history
    offsets = [o for o, _ in history]
    assert offsets == sorted(set(offsets))
    # Nothing acknowledged was lost, each under the offset its puback named; a copy twice only of a retried one.
    assert set(acked) <= set(history)
    payloads = [p for _, p in history]
    twice = {p for p in payloads if payloads.count(p) > 1}
    assert twice <= retried, f"{twice - retried} stored twice but acknowledged at once"
    # The durable subscriber whose broker was killed got, on another host, a run of the history from just
    # after a message it had acked through the end: every one it had not acked and every one it missed.
    assert durable_acked == offsets[:40]
    first = offsets.index(resumed[0][0])
    assert first <= 40, f"resumed at {first}, after only 40 acks"
    assert resumed == history[first:]

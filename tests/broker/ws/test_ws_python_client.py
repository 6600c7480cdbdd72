"""A real WebSocket client library against the ringcast-broker executable.

Python's `websockets` (Debian python3-websockets) connects to --ws-port and
speaks ringcast's JSON protocol (it offers the subprotocol "ringcast.v1", as
ringcast's own clients do: subscribe confirmations, numeric ids) and, without
it, PopSub's: subscribe, publish, deliveries across transports, fragmented
sends, ping, the close handshake and the size limit.
Registered with ctest by tests/broker/CMakeLists.txt; RINGCAST_BROKER_EXE
names the executable.
"""
import asyncio
import json
import os
import re
import socket
import subprocess

import pytest
import websockets

BROKER = os.environ["RINGCAST_BROKER_EXE"]


@pytest.fixture
def broker():
    proc = subprocess.Popen(
        [BROKER, "--port", "0", "--ws-port", "0", "--io-threads", "2", "--ws-max-message", "64kb"],
        stdout=subprocess.PIPE, text=True)
    try:
        resp_line = proc.stdout.readline()
        ws_line = proc.stdout.readline()
        resp_port = int(re.search(r":(\d+)$", resp_line.strip()).group(1))
        ws_url = re.search(r"(ws://\S+)", ws_line).group(1)
        yield resp_port, ws_url
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0


RINGCAST = "ringcast.v1"  # the subprotocol that selects ringcast's richer frames (docs/broker.md)


def connect(url):
    return websockets.connect(url, subprotocols=[RINGCAST])


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, timeout=30))


async def recv_json(ws):
    return json.loads(await ws.recv())


async def subscribe(ws, topic):
    await ws.send(json.dumps({"type": "subscribe", "topic": topic}))
    assert await recv_json(ws) == {"type": "subscribed", "topic": topic}


def resp_publish(port, channel, payload):
    with socket.create_connection(("127.0.0.1", port)) as s:
        cmd = f"*3\r\n$7\r\nPUBLISH\r\n${len(channel)}\r\n{channel}\r\n${len(payload)}\r\n{payload}\r\n"
        s.sendall(cmd.encode())
        reply = b""
        while not reply.endswith(b"\r\n"):
            reply += s.recv(64)
        return int(reply[1:-2])


def test_publish_reaches_websocket_subscribers_with_popsub_fields(broker):
    _, url = broker

    async def main():
        async with connect(url) as sub, connect(url) as pub:
            await subscribe(sub, "chat")
            await pub.send(json.dumps({"type": "publish", "topic": "chat", "payload": "Hello"}))
            await pub.send(json.dumps({"type": "publish", "topic": "chat", "payload": "Important",
                                       "message_id": "id-123", "qos": 1}))
            first, second = await recv_json(sub), await recv_json(sub)
            assert first["type"] == "message" and first["topic"] == "chat" and first["payload"] == "Hello"
            assert second["payload"] == "Important"
            assert (first["message_id"], second["message_id"]) == (1, 2)
            assert first["timestamp"] <= second["timestamp"]
            assert first["qos"] == 0

    run(main())


def test_a_popsub_client_gets_popsub_frames_only(broker):
    # No subprotocol, as PopSub's clients connect: no subscribe confirmation,
    # message_id a string that an ack echoes, QoS 1 by default.
    _, url = broker

    async def main():
        async with websockets.connect(url) as sub, websockets.connect(url) as pub:
            assert sub.subprotocol is None
            await sub.send(json.dumps({"type": "subscribe", "topic": "chat"}))
            # PopSub confirms nothing; the error answering login, sent after
            # the subscribe, shows that the subscribe has taken effect.
            await sub.send(json.dumps({"type": "login", "username": "admin", "password": "password"}))
            err = await recv_json(sub)
            assert err["type"] == "error" and "token" in err["message"]
            await pub.send(json.dumps({"type": "publish", "topic": "chat", "payload": "Hello",
                                       "message_id": None, "qos": 1}))
            m = await recv_json(sub)
            assert (m["type"], m["payload"], m["message_id"], m["qos"]) == ("message", "Hello", "chat#1", 1)
            await sub.send(json.dumps({"type": "ack", "message_id": m["message_id"]}))
            # A publisher's own id is what the subscriber sees and acks, as PopSub's.
            await pub.send(json.dumps({"type": "publish", "topic": "chat", "payload": "Again",
                                       "message_id": "id-123", "qos": 1}))
            m = await recv_json(sub)
            assert (m["payload"], m["message_id"], m["qos"]) == ("Again", "id-123", 1)
            await sub.send(json.dumps({"type": "ack", "message_id": "id-123"}))
            await sub.send(json.dumps({"type": "login", "username": "admin", "password": "password"}))
            err = await recv_json(sub)
            assert err["type"] == "error" and err["message"].startswith("login:"), err  # both acks taken

    run(main())


def test_resp_publish_reaches_a_glob_subscriber(broker):
    resp_port, url = broker

    async def main():
        async with connect(url) as sub:
            await subscribe(sub, "md.*")
            assert await asyncio.to_thread(resp_publish, resp_port, "md.eu", "tick") == 1
            m = await recv_json(sub)
            assert (m["pattern"], m["topic"], m["payload"]) == ("md.*", "md.eu", "tick")

    run(main())


def test_fragmented_sends_and_pings(broker):
    _, url = broker

    async def main():
        async with connect(url) as ws:
            # A list of strings is sent as one fragmented text message.
            await ws.send(['{"type":"subscribe",', '"topic":', '"frag"}'])
            assert await recv_json(ws) == {"type": "subscribed", "topic": "frag"}
            pong = await ws.ping(b"abc")
            await pong

    run(main())


def test_errors_keep_the_connection_and_close_is_clean(broker):
    _, url = broker

    async def main():
        async with connect(url) as ws:
            await ws.send("not json")
            err = await recv_json(ws)
            assert err == {"type": "error", "message": "message is not valid JSON"}
            await subscribe(ws, "after.error")
            await ws.close()
            assert ws.close_code == 1000

    run(main())


def test_a_message_over_the_limit_closes_with_1009(broker):
    _, url = broker

    async def main():
        async with connect(url) as ws:
            await ws.send("x" * (64 * 1024 + 1))
            with pytest.raises(websockets.exceptions.ConnectionClosed) as closed:
                await ws.recv()
            assert closed.value.rcvd.code == 1009

    run(main())


RELAY = os.environ.get("RINGCAST_RELAY_EXE")
CLI = os.environ.get("RINGCAST_CLI_EXE")


@pytest.mark.skipif(not (RELAY and CLI), reason="needs ringcast-relay and the ringcast CLI")
def test_ring_traffic_reaches_a_websocket_client_through_the_relay(tmp_path):
    # A producer writes into shared memory; the relay's embedded broker serves it over WebSocket.
    ring = tmp_path / "ticks.ring"
    subprocess.run([CLI, "create", "-c", "64", "--lossy", str(ring)], check=True, stdout=subprocess.DEVNULL)
    relay = subprocess.Popen([RELAY, "--ring", f"{ring}=ticks", "--listen", "127.0.0.1:0", "--ws-port", "0",
                              "--io-threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        while url is None:
            line = relay.stdout.readline()
            assert line, "the relay exited before printing its websocket line"
            m = re.search(r"websocket on (ws://\S+)", line)
            url = m.group(1) if m else None
        # The relay reads the ring from where it registered: publish after that.
        while "registered as consumer" not in (line := relay.stderr.readline()):
            assert line, "the relay exited before registering on the ring"

        async def main():
            async with connect(url) as ws:
                await subscribe(ws, "ticks")
                await asyncio.to_thread(subprocess.run, [CLI, "pub", str(ring)], input=b"px=101.5\n",
                                        check=True, stdout=subprocess.DEVNULL)
                m = await recv_json(ws)
                assert (m["type"], m["topic"], m["payload"]) == ("message", "ticks", "px=101.5")

        run(main())
    finally:
        relay.terminate()
        assert relay.wait(timeout=20) == 0

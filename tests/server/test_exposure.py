"""What the server lets in from the network and from odd clients (issue 17 item 8, issue 18 item 7).

Raw sockets send what no HTTP library will (a malformed Host, two framings, a request that never
finishes its headers); curl sends its own default content type. No test here loads the model.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time

import httpx
import pytest

from fireside.engine.server import SecurityPolicy, ServerThread, create_app

KEY = "exposure-key-0123456789"


def raw(port: int, data: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as conn:
        conn.sendall(data)
        out = b""
        try:
            while chunk := conn.recv(65536):
                out += chunk
        except TimeoutError:
            pass
    return out


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else 0


def response(conn: socket.socket) -> bytes:
    """One whole HTTP response read from ``conn``: its head, then as many body bytes as it says (a loaded
    machine sends the two in separate segments, and a lone ``recv`` left the body for the next read)."""
    data = b""
    while b"\r\n\r\n" not in data:
        if not (part := conn.recv(65536)):
            return data
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length and (part := conn.recv(65536)):
        body += part
    return head + b"\r\n\r\n" + body


@pytest.fixture(scope="module")
def wildcard(runtime, server_settings, library):
    """A server on every interface with a key and no allowed hosts: the case that took any Host."""
    policy = SecurityPolicy(api_key=KEY, bind_host="0.0.0.0")
    thread = ServerThread(create_app(runtime, server_settings, library, policy=policy), "0.0.0.0", 0)
    thread.start()
    yield thread
    thread.stop()


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8765", "rebind.nip.io"])
def test_network_bind_refuses_a_foreign_host_even_with_the_key(wildcard, host):
    r = httpx.get(f"http://127.0.0.1:{wildcard.port}/v1/models",
                  headers={"Host": host, "Authorization": f"Bearer {KEY}"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "host_not_allowed"


def test_network_bind_serves_its_own_address_and_names(wildcard):
    from fireside.engine.server.policy import own_names

    auth = {"Authorization": f"Bearer {KEY}"}
    for host in (f"127.0.0.1:{wildcard.port}", "localhost", socket.gethostname()):
        r = httpx.get(f"http://127.0.0.1:{wildcard.port}/v1/models", headers={"Host": host, **auth})
        assert r.status_code == 200, host
    policy = SecurityPolicy(api_key=KEY, bind_host="0.0.0.0")
    assert policy.host_allowed("192.168.1.20:8765", local_address="192.168.1.20")  # the address dialled
    assert not policy.host_allowed("192.168.1.21:8765", local_address="192.168.1.20")
    assert SecurityPolicy(api_key=KEY, bind_host="0.0.0.0", allowed_hosts=["llm.lan"]).host_allowed("llm.lan")
    assert f"{socket.gethostname().split('.')[0].lower()}.local" in own_names()


@pytest.mark.parametrize("host", [b"[::1]evil", b"[::1]:80evil", b"localhost:80:80", b"[::1", b"local host",
                                  b"localhost:99999", b""])
def test_malformed_host_is_refused(server, host):
    out = raw(server.port, b"GET /api/tags HTTP/1.1\r\nHost: " + host + b"\r\nConnection: close\r\n\r\n")
    assert status(out) in (400, 403), out[:200]


def test_host_parsing():
    from fireside.engine.server.policy import host_name

    assert host_name("[::1]:8765") == "::1" and host_name("LOCALHOST:1") == "localhost"
    assert host_name("[::1]evil") is None and host_name("a:b:c") is None and host_name("[zz]") is None


def test_content_length_with_transfer_encoding_is_refused(server):
    smuggle = (b"POST /api/show HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
               b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"13\r\n{\"model\":\"starter\"}\r\n0\r\n\r\n")
    out = raw(server.port, smuggle)
    assert status(out) == 400 and b"Content-Length and Transfer-Encoding" in out
    assert b"connection: close" in out.lower()


def test_half_open_connections_are_closed_at_the_header_deadline(runtime, server_settings, library):
    thread = ServerThread(create_app(runtime, server_settings, library), "127.0.0.1", 0, header_timeout_s=1.0)
    thread.start()
    try:
        conns = [socket.create_connection(("127.0.0.1", thread.port)) for _ in range(50)]
        for conn in conns:
            conn.sendall(b"GET /api/tags HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never finished
            conn.settimeout(6.0)
        trickler = conns[0]
        started = time.monotonic()
        for _ in range(4):  # a byte now and then must not keep a connection alive
            time.sleep(0.4)
            try:
                trickler.sendall(b"X")
            except OSError:
                break
        closed = sum(1 for conn in conns if _closed(conn))
        waited = time.monotonic() - started
        assert closed == 50 and waited < 6.0
        assert httpx.get(f"{thread.url}/api/version").status_code == 200  # a prompt client is still served
    finally:
        for conn in conns:
            conn.close()
        thread.stop()


def test_a_kept_alive_connection_outlasts_the_header_deadline_but_its_next_request_does_not(runtime, server_settings,
                                                                                           library):
    """Idle after a reply, a connection is uvicorn's keep-alive to close, so a listener may keep it
    longer than the header deadline (the shared listener does, for paired devices); the next request's
    headers still have the deadline from their first byte, trickled or not."""
    thread = ServerThread(create_app(runtime, server_settings, library), "127.0.0.1", 0, header_timeout_s=1.0,
                          keep_alive_s=5)
    thread.start()
    conn = socket.create_connection(("127.0.0.1", thread.port), timeout=3.0)
    ask = b"GET /api/version HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    try:
        conn.sendall(ask)
        assert status(response(conn)) == 200
        time.sleep(1.6)  # idle past the header deadline
        conn.sendall(ask)
        assert status(response(conn)) == 200  # still open: served
        conn.sendall(b"GET /api/version HTTP/1.1\r\n")  # then a request that never finishes its headers
        started = time.monotonic()
        for _ in range(6):  # a byte now and then must not keep it alive
            time.sleep(0.4)
            try:
                conn.sendall(b"X")
            except OSError:
                break
        conn.settimeout(3.0)
        assert _closed(conn) and time.monotonic() - started < 4.0
    finally:
        conn.close()
        thread.stop()


def test_a_body_that_trickles_after_its_headers_is_cut_at_the_deadline(runtime, server_settings, library):
    thread = ServerThread(create_app(runtime, server_settings, library), "127.0.0.1", 0, header_timeout_s=1.0,
                          body_timeout_s=1.5)
    thread.start()
    conn = socket.create_connection(("127.0.0.1", thread.port))
    try:
        conn.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 100000\r\n\r\n{")  # headers complete, then a byte now and then
        conn.settimeout(0.3)
        started, answer = time.monotonic(), b""
        while time.monotonic() - started < 6.0:
            try:
                conn.sendall(b" ")
                data = conn.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            if not data:
                break
            answer += data
        waited = time.monotonic() - started
        assert waited < 4.0, "the trickling body was still being read"
        assert status(answer) == 408 and b"did not arrive within 1.5 s" in answer
        assert httpx.get(f"{thread.url}/api/version").status_code == 200
    finally:
        conn.close()
        thread.stop()


def _closed(conn: socket.socket) -> bool:
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


@pytest.mark.parametrize(("method", "path", "body"), [
    ("POST", "/api/pull", {"model": "fake/pulled:Q8_0"}),
    ("DELETE", "/api/delete", {"model": "starter"}),
])
def test_model_management_is_off_by_default(base_url, library, method, path, body):
    r = httpx.request(method, f"{base_url}{path}", json=body, timeout=30)
    assert r.status_code == 403 and "--allow-management" in r.json()["error"]
    assert "starter" in [m.id for m in library.list()]


def curl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=30)


def post_plain(url: str, body: str, **headers: str) -> tuple[int, str]:
    """POST as curl's -d does: application/x-www-form-urlencoded (httpx where there is no curl)."""
    if shutil.which("curl"):
        out = curl(url, "-d", body, *(f"-H{k.replace('_', '-')}: {v}" for k, v in headers.items())).stdout
        text, _, code = out.rpartition("\n")
        return int(code), text
    r = httpx.post(url, content=body, timeout=30, headers={"Content-Type": "application/x-www-form-urlencoded",
                                                           **{k.replace("_", "-"): v for k, v in headers.items()}})
    return r.status_code, r.text


def test_curl_default_content_type_is_taken_as_json(base_url):
    code, text = post_plain(f"{base_url}/api/show", '{"model": "starter"}')
    assert code == 200 and json.loads(text)["details"]["format"] == "gguf"
    code, text = post_plain(f"{base_url}/api/show", "model=starter")  # a real form body is not JSON
    assert code == 400


@pytest.mark.parametrize("browser", [{"Origin": "SELF"}, {"Sec-Fetch-Site": "same-site"},
                                     {"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}])
def test_browser_requests_still_need_json(base_url, browser):
    headers = {k: base_url if v == "SELF" else v for k, v in browser.items()}
    code, _ = post_plain(f"{base_url}/api/show", '{"model": "starter"}', **headers)
    assert code in (403, 415)

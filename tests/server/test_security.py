"""Safe by default: Host allowlist, Origin checks, JSON only, body cap, API key, model ids never paths.

Every refusal here happens in the middleware before any route runs, so none of these tests needs
the model; the ones that let a request through use cheap routes (``/v1/models``, ``/api/tags``).
"""

from __future__ import annotations

import logging

import anthropic
import httpx
import ollama
import openai
import pytest

from fireside.engine.errors import ServerError
from fireside.engine.server import SecurityPolicy, create_app
from fireside.engine.server.security import DEFAULT_MAX_BODY, check_bind
from tests.helpers.driving import API_KEY

CHAT = {"model": "starter", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}


def post(url: str, path: str, **kw) -> httpx.Response:
    return httpx.post(f"{url}{path}", timeout=30, **kw)


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:8765", "127.0.0.1.nip.io"])
def test_foreign_host_is_refused_before_any_handler(base_url, host):
    r = httpx.get(f"{base_url}/v1/models", headers={"Host": host})
    assert r.status_code == 403
    assert r.json()["error"]["code"] == "host_not_allowed"
    r = post(base_url, "/api/chat", json=CHAT, headers={"Host": host})
    assert r.status_code == 403 and "not allowed" in r.json()["error"]  # Ollama's shape on /api


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]", "localhost:8765", "[::1]:8765"])
def test_loopback_hosts_are_served(base_url, host):
    assert httpx.get(f"{base_url}/v1/models", headers={"Host": host}).status_code == 200


def test_foreign_origin_is_refused(base_url):
    r = httpx.get(f"{base_url}/v1/models", headers={"Origin": "https://evil.example"})
    assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"


def test_simple_text_plain_post_from_a_page_is_refused(base_url):
    # A form or fetch with text/plain skips CORS preflight; the Origin check must still stop it.
    r = post(base_url, "/v1/chat/completions", content=b'{"model":"starter"}',
             headers={"Content-Type": "text/plain", "Origin": "https://evil.example"})
    assert r.status_code == 403


def test_cross_site_fetch_without_origin_is_refused(base_url):
    r = httpx.get(f"{base_url}/api/tags", headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403


def test_same_origin_page_is_served(base_url, server):
    r = httpx.get(f"{base_url}/v1/models", headers={"Origin": base_url})
    assert r.status_code == 200


def test_listed_origin_gets_cors_and_preflight(keyed_server):
    url, origin = keyed_server.url, "http://allowed.example"
    pre = httpx.options(f"{url}/v1/chat/completions", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type"})
    assert pre.status_code == 204 and pre.headers["access-control-allow-origin"] == origin
    r = httpx.get(f"{url}/v1/models", headers={"Origin": origin, "Authorization": f"Bearer {API_KEY}"})
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == origin


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None])
def test_non_json_body_from_a_browser_gets_415(base_url, ctype):
    headers = {"Content-Type": ctype, "Origin": base_url} if ctype else {"Origin": base_url}
    r = post(base_url, "/v1/chat/completions", content=b'{"model": "starter"}', headers=headers)
    assert r.status_code == 415
    assert r.json()["error"]["code"] == "unsupported_media_type"


def test_oversized_body_gets_413(base_url):
    big = b'{"model": "starter", "pad": "' + b"x" * DEFAULT_MAX_BODY + b'"}'
    r = post(base_url, "/v1/chat/completions", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413


def test_oversized_chunked_body_gets_413(base_url):
    def pieces():
        yield b'{"pad": "'
        for _ in range(DEFAULT_MAX_BODY // 65536 + 2):
            yield b"x" * 65536

    r = post(base_url, "/v1/chat/completions", content=pieces(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"x-api-key": "wrong"},
                                     {"Authorization": API_KEY}, {"Authorization": f"Bearer {API_KEY}x"}])
def test_missing_or_wrong_key_gets_401(keyed_server, headers):
    r = httpx.get(f"{keyed_server.url}/v1/models", headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "invalid_api_key"


def test_key_works_as_bearer_and_x_api_key(keyed_server):
    oc = openai.OpenAI(base_url=f"{keyed_server.url}/v1", api_key=API_KEY, max_retries=0)
    assert "starter" in [m.id for m in oc.models.list()]
    ac = anthropic.Anthropic(base_url=keyed_server.url, api_key=API_KEY, max_retries=0)  # sends x-api-key
    assert ac.messages.count_tokens(model="starter", messages=[{"role": "user", "content": "hi"}]).input_tokens > 0
    r = httpx.get(f"{keyed_server.url}/api/tags", headers={"x-api-key": API_KEY})
    assert r.status_code == 200
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=f"{keyed_server.url}/v1", api_key="nope", max_retries=0).models.list()


def test_anthropic_sdk_sees_auth_error_in_its_shape(keyed_server):
    ac = anthropic.Anthropic(base_url=keyed_server.url, api_key="nope", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as err:
        ac.messages.create(model="starter", max_tokens=1, messages=[{"role": "user", "content": "hi"}])
    assert err.value.body["error"]["type"] == "authentication_error"


def test_management_routes_need_the_key(keyed_server):
    oc = ollama.Client(host=keyed_server.url)
    with pytest.raises(ollama.ResponseError) as err:
        oc.pull("fake/pulled:Q8_0")
    assert err.value.status_code == 401
    with pytest.raises(ollama.ResponseError) as err:
        oc.delete("starter")
    assert err.value.status_code == 401


def test_the_key_is_never_logged(keyed_server, caplog):
    caplog.set_level(logging.DEBUG)
    httpx.get(f"{keyed_server.url}/v1/models", headers={"Authorization": f"Bearer {API_KEY}"})
    httpx.get(f"{keyed_server.url}/v1/models", headers={"Authorization": f"Bearer {API_KEY}-wrong"})
    assert API_KEY not in caplog.text


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "C:\\Windows\\x.gguf", "~/x.gguf",
                                  "a/./b", "starter/../starter", "..\\x"])
def test_path_like_model_ids_get_404(base_url, name):
    r = post(base_url, "/v1/chat/completions", json={**CHAT, "model": name})
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"


def test_existing_file_path_is_still_404(base_url, smollm2_path):
    for path in ("/v1/chat/completions", "/api/chat", "/v1/messages"):
        body = {**CHAT, "model": str(smollm2_path)}
        assert post(base_url, path, json=body).status_code == 404
    assert httpx.get(f"{base_url}/v1/models/{smollm2_path}").status_code == 404


def test_network_bind_without_key_is_refused(runtime, server_settings, library):
    with pytest.raises(ServerError, match="API key"):
        create_app(runtime, server_settings, library, policy=SecurityPolicy(bind_host="0.0.0.0"))
    with pytest.raises(ServerError):
        check_bind("192.168.1.20", None)
    check_bind("0.0.0.0", "a-key")  # with a key it is allowed
    check_bind("::1", None)


def test_network_bind_with_key_accepts_its_own_address_and_needs_the_key():
    policy = SecurityPolicy(api_key="k", bind_host="0.0.0.0")
    assert policy.host_allowed("192.168.1.20:8765", local_address="192.168.1.20")
    assert not policy.host_allowed("attacker.example:8765", local_address="192.168.1.20")
    assert not SecurityPolicy(bind_host="127.0.0.1").host_allowed("192.168.1.20:8765")
    assert not policy.key_matches(None) and not policy.key_matches("K") and policy.key_matches("k")


def test_docs_are_served(base_url):
    r = httpx.get(f"{base_url}/openapi.json")
    assert r.status_code == 200 and "/v1/chat/completions" in r.json()["paths"]

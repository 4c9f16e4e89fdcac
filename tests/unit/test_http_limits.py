"""The HTTP server's own limits: requests per minute per token and per peer (429 with
Retry-After), and the address `jarvis serve --http` takes (loopback by default)."""

import anyio
import pytest

from jarvis_query.mcp_http import LOOPBACK, RateLimit, parse_address


async def _asgi_app(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def statuses(limit: RateLimit, requests: list[tuple[str, bytes | None]]) -> list[tuple]:
    """Status and Retry-After of each request (peer address, authorization header)."""
    answers = []

    async def run():
        for peer, authorization in requests:
            sent: list[dict] = []

            async def send(message, sent=sent):
                sent.append(message)

            headers = [(b"authorization", authorization)] if authorization else []
            await limit({"type": "http", "client": (peer, 5000), "headers": headers},
                        None, send)
            start = sent[0]
            answers.append((start["status"], dict(start["headers"]).get(b"retry-after")))

    anyio.run(run)
    return answers


def test_each_token_gets_its_rate_then_429_with_retry_after():
    limit = RateLimit(_asgi_app, per_minute=60)  # bursts of 6
    answers = statuses(limit, [("10.0.0.1", b"Bearer a")] * 7 + [("10.0.0.1", b"Bearer b")])
    assert [status for status, _ in answers] == [200] * 6 + [429, 200]
    assert answers[6][1] == b"1"


def test_a_peer_is_limited_whatever_tokens_it_tries():
    limit = RateLimit(_asgi_app, per_minute=60)  # a peer: bursts of 24
    answers = statuses(limit, [("10.0.0.2", f"Bearer {n}".encode()) for n in range(25)])
    assert [status for status, _ in answers] == [200] * 24 + [429]
    assert statuses(limit, [("10.0.0.3", None)]) == [(200, None)]


@pytest.mark.parametrize("value, expected", [
    ("8765", (LOOPBACK, 8765)), ("0.0.0.0:80", ("0.0.0.0", 80)), ("[::1]:9000", ("::1", 9000)),
    ("localhost:1", ("localhost", 1))])
def test_addresses_default_to_loopback(value, expected):
    assert parse_address(value) == expected


@pytest.mark.parametrize("value", ["", "host:", "host:0", "host:70000", "host:http"])
def test_bad_addresses_are_refused(value):
    with pytest.raises(ValueError, match=r"is not \[HOST:\]PORT"):
        parse_address(value)

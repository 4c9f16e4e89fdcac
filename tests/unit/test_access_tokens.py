"""HTTP bearer tokens: stored as digests only, verified in constant time, revoked for every
server at once (a server rereads the file when it changes), naming a client and a profile."""

import json
import stat

import anyio
import pytest

from jarvis_core.access_tokens import TokenError, TokenStore
from jarvis_core.config import config_from_mapping
from jarvis_query.mcp_http import StoredTokenVerifier


@pytest.fixture
def store(tmp_path) -> TokenStore:
    return TokenStore(tmp_path / "tokens.json")


def test_a_token_proves_its_client_and_profile_and_is_stored_hashed(store):
    token, record = store.create("alice", "notes")
    assert token.startswith(f"jv_{record.id}_")
    assert store.verify(token) == record
    stored = store.path.read_text()
    secret = token.removeprefix(f"jv_{record.id}_")  # url-safe base64: may hold "_" itself
    assert token not in stored and secret not in stored
    assert json.loads(stored)["tokens"][0]["sha256"] == record.sha256
    assert stat.S_IMODE(store.path.stat().st_mode) == 0o600
    assert "sha256" not in record.public()


@pytest.mark.parametrize("attempt", ["", "Bearer", "jv_00000000_" + "a" * 43, "nonsense",
                                     None, 42])
def test_malformed_or_unknown_tokens_prove_nothing(store, attempt):
    store.create("alice", "notes")
    assert store.verify(attempt) is None


def test_a_wrong_secret_or_a_revoked_token_proves_nothing(store, tmp_path):
    token, record = store.create("alice", "notes")
    wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert store.verify(wrong) is None
    server_side = TokenStore(tmp_path / "tokens.json")  # another process's view
    assert server_side.verify(token) == record
    revoked = store.revoke(record.id)
    assert revoked.revoked_at is not None
    assert server_side.verify(token) is None
    assert [r.id for r in store.records()] == [record.id]  # kept, marked revoked


def test_bad_requests_are_refused(store):
    with pytest.raises(TokenError, match="client name"):
        store.create("two words", "notes")
    with pytest.raises(TokenError, match="no token with id 'ffffffff'"):
        store.revoke("ffffffff")


def test_the_verifier_refuses_a_token_whose_profile_left_the_configuration(store, tmp_path):
    (tmp_path / "v").mkdir()
    config = config_from_mapping({"vaults": {"v": str(tmp_path / "v")},
                                  "profiles": {"notes": ["v"]}}, base_dir=tmp_path)
    kept, _ = store.create("alice", "notes")
    orphan, _ = store.create("bob", "gone")
    verifier = StoredTokenVerifier(store, config)
    access = anyio.run(verifier.verify_token, kept)
    assert (access.client_id, access.claims, access.subject) == (
        "alice", {"profile": "notes"}, kept.split("_")[1])
    assert anyio.run(verifier.verify_token, orphan) is None

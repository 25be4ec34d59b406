"""Link tokens are made by a faster path than itsdangerous' own, and must stay readable by it."""

from __future__ import annotations

from itsdangerous import URLSafeSerializer

from app.mail.sending.tokens import MailTokens

SECRET = "tokens-test-secret-key-long-enough-to-sign"
TOKENS = MailTokens(SECRET)


def test_tokens_are_what_itsdangerous_makes_and_reads() -> None:
    for deliverable_id in (1, 42, 987654):
        assert TOKENS.open_token(deliverable_id) == URLSafeSerializer(SECRET, salt="tidings.open").dumps(
            deliverable_id
        )
        assert TOKENS.read_open(TOKENS.open_token(deliverable_id)) == deliverable_id
        assert TOKENS.read_unsubscribe(TOKENS.unsubscribe_token(deliverable_id)) == deliverable_id
    url = "https://example.com/a?x=1&y=2"
    assert TOKENS.click_token(7, url) == URLSafeSerializer(SECRET, salt="tidings.click").dumps([7, url])


def test_long_and_odd_urls_round_trip() -> None:
    for url in (
        "https://example.com/" + "utm_source=newsletter&" * 40,  # long and repetitive: compressed
        'https://example.com/ü?q="quoted"&back=\\slash</script>',
        "https://example.com/" + "x" * 3000,
    ):
        token = TOKENS.click_token(12, url)
        assert TOKENS.read_click(token) == (12, url)
    assert TOKENS.click_token(12, "https://example.com/" + "utm_source=newsletter&" * 40).startswith(".")


def test_a_token_of_one_kind_or_key_is_refused_as_another() -> None:
    assert TOKENS.read_open(TOKENS.unsubscribe_token(5)) is None
    assert TOKENS.read_click(TOKENS.open_token(5)) is None
    assert MailTokens("another-secret-key-long-enough-to-sign!").read_open(TOKENS.open_token(5)) is None


def test_verp_tokens_are_a_truncated_hmac_sha256_read_back_in_any_case() -> None:
    import hashlib
    import hmac

    secret = "verp-secret-key-long-enough-to-sign-things"
    tokens = MailTokens(secret)
    key = hashlib.sha256(b"tidings.verp\0" + secret.encode()).digest()
    for deliverable_id in (1, 42, 2**31 - 1):
        token = tokens.verp_token(deliverable_id)
        mac = hmac.new(key, str(deliverable_id).encode(), "sha256").hexdigest()[:12]
        assert token == f"{deliverable_id}-{mac}"
        assert tokens.read_verp(token) == tokens.read_verp(token.upper()) == deliverable_id
    token = tokens.verp_token(42)
    for forged in (
        f"43-{token[3:]}",
        f"42-{'0' * 12}",
        token[:-1],
        token + "0",
        f"{2**31}-{token[3:]}",
        "",
        "42",
        "0-000000000000",
    ):
        assert tokens.read_verp(forged) is None, forged
    assert MailTokens("another-secret-key-long-enough-to-sign").read_verp(token) is None

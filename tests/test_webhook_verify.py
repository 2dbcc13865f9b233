"""Tests for memfs.domain.webhook_verify; the standardwebhooks package is the oracle."""

from __future__ import annotations

import base64
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
from hypothesis import given, settings
from hypothesis import strategies as st

from memfs.domain.webhook_verify import generate_secret, parse_secret, sign, verify
from memfs.errors import InvalidRequest, Unauthorized

# The official Standard Webhooks test vector.
VEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
VEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
VEC_TS = 1614265330
VEC_BODY = b'{"test": 2432232314}'
VEC_SIG = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

TOL = 300
OTHER_SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def headers(
    webhook_id: str = VEC_ID, ts: int | str = VEC_TS, signature: str = VEC_SIG
) -> dict[str, str]:
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(ts),
        "webhook-signature": signature,
    }


def check(
    hdrs: dict[str, str],
    body: bytes = VEC_BODY,
    *,
    secrets: tuple[str, ...] = (VEC_SECRET,),
    now: float = VEC_TS,
) -> str:
    return verify(secrets, hdrs, body, now=now, tolerance_seconds=TOL)


def refused(
    hdrs: dict[str, str],
    body: bytes = VEC_BODY,
    *,
    secrets: tuple[str, ...] = (VEC_SECRET,),
    now: float = VEC_TS,
) -> str:
    with pytest.raises(Unauthorized) as info:
        check(hdrs, body, secrets=secrets, now=now)
    return info.value.message


# --- secrets -------------------------------------------------------------------


def test_official_vector_sign_and_verify() -> None:
    assert sign(VEC_SECRET, VEC_ID, VEC_TS, VEC_BODY) == VEC_SIG
    assert check(headers()) == VEC_ID


def test_generate_secret_round_trips() -> None:
    secret = generate_secret()
    assert secret.startswith("whsec_")
    assert len(parse_secret(secret)) == 32
    assert secret != generate_secret()


def test_parse_secret_accepts_unpadded_base64() -> None:
    padded = "whsec_" + base64.b64encode(b"abcde").decode()
    assert padded.endswith("=")
    assert parse_secret(padded.rstrip("=")) == parse_secret(padded) == b"abcde"


@pytest.mark.parametrize(
    "secret",
    [
        "",
        "whsec_",
        "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        "whsec_a",
        "whsec_ab$d",
        "whsec_é",
    ],
)
def test_parse_secret_rejects_malformed(secret: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_secret(secret)
    assert info.value.field == "secret"


# --- bodies ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [b"\xff\xfe\x00\x80binary\xc3", b"", b"\xef\xbb\xbf{}", "héllo ✓".encode()],
    ids=["binary", "empty", "bom", "utf8"],
)
def test_raw_bodies_verify(body: bytes) -> None:
    sig = sign(VEC_SECRET, VEC_ID, VEC_TS, body)
    assert check(headers(signature=sig), body) == VEC_ID
    assert "webhook-signature" in refused(headers(signature=sig), body + b"x")


def test_header_names_are_case_insensitive() -> None:
    hdrs = {k.title(): v for k, v in headers().items()}
    assert check(hdrs) == VEC_ID


# --- oracle: the standardwebhooks package ----------------------------------------


@pytest.mark.parametrize(
    "payload", ['{"a": 1}', "", "plain text", "ünïcødé ✓", "\ufeff{}"]
)
def test_library_signed_deliveries_verify(payload: str) -> None:
    now = int(time.time())
    hook = standardwebhooks.Webhook(OTHER_SECRET)
    sig = hook.sign("msg_1", datetime.fromtimestamp(now, tz=UTC), payload)
    hdrs = headers("msg_1", now, sig)
    body = payload.encode()
    assert verify([OTHER_SECRET], hdrs, body, now=now, tolerance_seconds=TOL) == "msg_1"
    hook.verify(body, hdrs, json_parse=False)  # the library agrees


@settings(max_examples=50, deadline=None)
@given(
    payload=st.text(max_size=200),
    webhook_id=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1),
    tamper=st.booleans(),
)
def test_oracle_agrees_on_text_bodies(
    payload: str, webhook_id: str, tamper: bool
) -> None:
    now = int(time.time())
    hook = standardwebhooks.Webhook(OTHER_SECRET)
    sig = hook.sign(webhook_id, datetime.fromtimestamp(now, tz=UTC), payload)
    body = (payload + "!" if tamper else payload).encode()
    hdrs = headers(webhook_id, now, sig)
    ours_ok = lib_ok = True
    try:
        verify([OTHER_SECRET], hdrs, body, now=now, tolerance_seconds=TOL)
    except Unauthorized:
        ours_ok = False
    try:
        hook.verify(body, hdrs, json_parse=False)
    except standardwebhooks.webhooks.WebhookVerificationError:
        lib_ok = False
    assert ours_ok == lib_ok == (not tamper)


# --- signature lists -------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        "",
        "v1",
        "v1,",
        "v1,!!!notbase64",
        "v1,YWJj",  # valid base64, wrong length
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE",  # missing padding
        "v1,ünï",
        "nocomma",
        "v1," + base64.b64encode(b"\0" * 32).decode(),  # right shape, wrong MAC
    ],
)
def test_malformed_entries_are_skipped(garbage: str) -> None:
    assert check(headers(signature=f"{garbage} {VEC_SIG}")) == VEC_ID
    message = refused(headers(signature=garbage))
    assert "webhook-signature" in message


def test_only_garbage_is_refused() -> None:
    message = refused(headers(signature="v1 ,, v1,@@ x,y  v1,AAAA"))
    assert "no valid signature" in message


def test_unknown_versions_are_ignored() -> None:
    mac = VEC_SIG.partition(",")[2]
    assert check(headers(signature=f"v1a,{mac} v2,xyz {VEC_SIG}")) == VEC_ID
    refused(headers(signature=f"v1a,{mac} v2,{mac} V1,{mac}"))


def test_rotation_accepts_any_secret() -> None:
    assert check(headers(), secrets=(OTHER_SECRET, VEC_SECRET)) == VEC_ID
    refused(headers(), secrets=(OTHER_SECRET,))
    refused(headers(), secrets=())
    other = sign(OTHER_SECRET, VEC_ID, VEC_TS, VEC_BODY)
    both = headers(signature=f"{other} {VEC_SIG}")
    assert check(both, secrets=(OTHER_SECRET,)) == VEC_ID


def test_malformed_configured_secret_is_invalid_request() -> None:
    with pytest.raises(InvalidRequest):
        check(headers(), secrets=("not-a-secret",))


def test_signature_covers_id_and_timestamp() -> None:
    refused(headers(webhook_id="msg_other"))
    refused(headers(ts=VEC_TS + 1), now=VEC_TS)


# --- headers ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "webhook_id", ["", "has space", "tab\t", "ctl\x7f", "ünï", "x" * 257]
)
def test_malformed_id_is_refused(webhook_id: str) -> None:
    assert "webhook-id" in refused(headers(webhook_id=webhook_id))


def test_id_length_limit_is_inclusive() -> None:
    long_id = "x" * 256
    sig = sign(VEC_SECRET, long_id, VEC_TS, VEC_BODY)
    assert check(headers(long_id, VEC_TS, sig)) == long_id


@pytest.mark.parametrize(
    "name", ["webhook-id", "webhook-timestamp", "webhook-signature"]
)
def test_missing_header_is_named(name: str) -> None:
    hdrs = headers()
    del hdrs[name]
    assert name in refused(hdrs)


@pytest.mark.parametrize(
    "stamp",
    [
        "1.5",
        "+1",
        "1_0",
        " 1",
        "1 ",
        "-1",
        "",
        "١٦١٤٢٦٥٣٣٠",
        "１２",
        "1e9",
        "0x10",
        "9" * 17,
    ],
)
def test_malformed_timestamp_is_refused(stamp: str) -> None:
    message = refused(headers(ts=stamp))
    assert "webhook-timestamp" in message and "malformed" in message


def test_millisecond_timestamp_is_too_new() -> None:
    assert "too new" in refused(headers(ts=VEC_TS * 1000))


@pytest.mark.parametrize("offset", [-TOL, TOL])
def test_tolerance_boundary_is_inclusive(offset: int) -> None:
    ts = VEC_TS + offset
    sig = sign(VEC_SECRET, VEC_ID, ts, VEC_BODY)
    assert check(headers(ts=ts, signature=sig)) == VEC_ID


@pytest.mark.parametrize(
    ("offset", "word"), [(-TOL - 1, "too old"), (TOL + 1, "too new")]
)
def test_tolerance_exceeded_by_one_second(offset: int, word: str) -> None:
    ts = VEC_TS + offset
    sig = sign(VEC_SECRET, VEC_ID, ts, VEC_BODY)
    message = refused(headers(ts=ts, signature=sig))
    assert "webhook-timestamp" in message and word in message


# --- property tests --------------------------------------------------------------

_names = st.sampled_from(
    ["webhook-id", "Webhook-Timestamp", "WEBHOOK-SIGNATURE", "content-type"]
) | st.text(max_size=20)
_values = st.one_of(
    st.text(max_size=80),
    st.integers(-(10**20), 10**20).map(str),
    st.lists(
        st.one_of(
            st.just(VEC_SIG),
            st.text(max_size=50),
            st.binary(max_size=40).map(lambda b: "v1," + base64.b64encode(b).decode()),
        ),
        max_size=4,
    ).map(" ".join),
)


@settings(max_examples=300, deadline=None)
@given(hdrs=st.dictionaries(_names, _values, max_size=6), body=st.binary(max_size=64))
def test_random_input_raises_only_unauthorized(
    hdrs: dict[str, str], body: bytes
) -> None:
    try:
        result = check(hdrs, body)
    except Unauthorized as exc:
        assert exc.message
    else:
        assert isinstance(result, str)


@settings(max_examples=100, deadline=None)
@given(secret=st.text(max_size=60))
def test_random_secret_raises_only_invalid_request(secret: str) -> None:
    try:
        parse_secret(secret)
    except InvalidRequest as exc:
        assert exc.field == "secret"


@settings(max_examples=100, deadline=None)
@given(
    webhook_id=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1),
    offset=st.integers(-TOL, TOL),
    body=st.binary(max_size=200),
)
def test_sign_verify_round_trip(webhook_id: str, offset: int, body: bytes) -> None:
    ts = VEC_TS + offset
    sig = sign(VEC_SECRET, webhook_id, ts, body)
    assert check(headers(webhook_id, ts, sig), body) == webhook_id


@settings(max_examples=200, deadline=None)
@given(signature=_values, body=st.binary(max_size=64))
def test_random_signature_header_raises_only_unauthorized(
    signature: str, body: bytes
) -> None:
    # Valid id and timestamp so the fuzzing reaches the signature parser.
    try:
        check(headers(signature=signature), body)
    except Unauthorized as exc:
        assert "webhook-signature" in exc.message

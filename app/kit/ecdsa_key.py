"""An ECDSA public key as a webhook's sender shows it (SendGrid's verification key): base64 DER or PEM.
Below the settings, which check the key with it when the service starts."""

from __future__ import annotations

import base64
import binascii

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


def ecdsa_public_key(text: str) -> ec.EllipticCurvePublicKey:
    """The key in `text` (surrounding blanks ignored); ValueError when it is not an ECDSA public key."""
    text = text.strip()
    try:
        if text.startswith("-----BEGIN"):
            key = serialization.load_pem_public_key(text.encode())
        else:
            key = serialization.load_der_public_key(base64.b64decode(text, validate=True))
    except (ValueError, binascii.Error, TypeError) as exc:
        raise ValueError("not an ECDSA public key") from exc
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise ValueError("not an ECDSA public key")
    return key

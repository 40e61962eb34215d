"""Standard Webhooks signatures (`webhook-signature: v1,<base64 HMAC-SHA256>`), keyed by a `whsec_` secret.
Receivers can verify with any Standard Webhooks library or the recipe in docs/api.md."""

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"


def secret_generate() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def signature(*, secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def signed_headers(*, secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    return {
        "Webhook-Id": message_id,
        "Webhook-Timestamp": str(timestamp),
        "Webhook-Signature": signature(secret=secret, message_id=message_id, timestamp=timestamp, body=body),
    }

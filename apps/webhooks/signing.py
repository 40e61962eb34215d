"""Standard Webhooks signatures (`webhook-signature: v1,<base64 HMAC-SHA256>`), keyed by a `whsec_` secret.
Receivers can verify with any Standard Webhooks library or the recipe in docs/api.md."""

import base64
import hashlib
import hmac
import secrets

SECRET_PREFIX = "whsec_"


def secret_generate() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def signed_headers(*, secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    signature = "v1," + base64.b64encode(digest).decode()
    return {"Webhook-Id": message_id, "Webhook-Timestamp": str(timestamp), "Webhook-Signature": signature}

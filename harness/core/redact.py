"""No secret ever reaches the record: tokens, certificates, keys, kubeconfig contents, Secret data."""

from __future__ import annotations

import re
from typing import Any

REDACTED = "[REDACTED]"
_PATTERNS = [
    re.compile(r"-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----", re.S),           # PEM certificates and keys
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),                            # Authorization headers
    re.compile(r"(?i)((?:token|password|client-key-data|client-certificate-data|certificate-authority-data)"
               r"['\"]?\s*[:=]\s*['\"]?)[^\s'\",}\\]{6,}"),  # kubeconfig and config fields (a JSON file's \" kept)
    re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),   # JWTs (service-account tokens)
]


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    for secret in secrets:
        if len(secret) >= 6:
            text = text.replace(secret, REDACTED)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """Redact every string inside a JSON-like value."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, list):
        return [redact(v, secrets) for v in value]
    if isinstance(value, tuple):
        return tuple(redact(v, secrets) for v in value)
    if isinstance(value, dict):
        return {k: redact(v, secrets) for k, v in value.items()}
    return value


# names that say "secret" as a word of the name: MY_API_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY (not GIT_AUTHOR_NAME)
SECRET_NAME = re.compile(r"(?i)(^|_)(token|secret|password|passwd|credentials?|api_?key|private_?key)(_|$)")
MIN_ENV_SECRET_LEN = 8
KUBECONFIG_SECRET_FIELDS = ("token", "password", "client-key-data", "client-certificate-data")
MIN_SECRET_LEN = 6


def known_secrets(api: Any) -> tuple[str, ...]:
    """Credentials the harness itself holds for the target: they are redacted wherever they appear."""
    config = getattr(api, "configuration", None)
    found = []
    for key in ("api_key",):
        values = getattr(config, key, None) or {}
        found += [str(v).removeprefix("Bearer ").strip() for v in values.values()]
    return tuple(s for s in found if s)


def environment_secrets(environ: dict[str, str]) -> tuple[str, ...]:
    """Pure: values of environment variables whose names say they are secret (…TOKEN, …PASSWORD, …SECRET…)."""
    return tuple(v for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_ENV_SECRET_LEN)


def kubeconfig_secrets(text: str) -> tuple[str, ...]:
    """Pure: the credentials in a kubeconfig's users (tokens, passwords, client keys and certificates)."""
    import yaml  # only when a kubeconfig is given
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return ()
    found = []
    for entry in data.get("users") or [] if isinstance(data, dict) else []:
        user = (entry or {}).get("user") or {}
        found += [str(user[f]) for f in KUBECONFIG_SECRET_FIELDS if user.get(f)]
        provider = ((user.get("auth-provider") or {}).get("config") or {})  # OIDC and friends
        found += [str(v) for k, v in provider.items() if k in ("id-token", "refresh-token", "client-secret") and v]
    return tuple(v for v in found if len(v) >= MIN_SECRET_LEN)

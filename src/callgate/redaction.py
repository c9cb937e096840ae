"""The one rule for text that comes from outside callgate (a target, an MCP server, an
environment, a model or judge endpoint) before it reaches a terminal, the store, a report or the
web page (`clean`), and the one rule for what reads as a credential (`looks_secret`,
`credential_in`), which a target spec, a candidate's `extra` and its headers are refused for.

`clean` replaces with `[redacted]`:
- the secrets the caller knows (a client's own key; the values of the environment variables
  whose names read as credentials, `secrets_in`), also a head of one cut off by a shortened
  message just before its `…`;
- what reads as a key whoever's it is: a token with a known key prefix (`sk-`, `ghp_`, `xoxb-`,
  `AKIA`, `AIza`, `hf_`, a JWT, ...), the value after `Bearer` or `Basic`, and the value of a
  `NAME=value` or `NAME: value` whose name reads as a credential;

and neutralises terminal control: every C0 and C1 control character but newline and tab (ESC
starts a title change, a screen clear or a cursor move; CR overwrites a line) is shown as its
`\\xNN` escape, so it is printed, never obeyed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

REDACTED = "[redacted]"
MIN_SECRET = 8  # shorter values of secret-named variables are not looked for
CUT = "…"  # where a message was shortened
MIN_CUT = 4  # a shorter head of a secret says nothing worth hiding

_SECRET_WORDS = frozenset({
    "key", "keys", "apikey", "secret", "secrets", "token", "password", "passwd", "passphrase",
    "authorization", "auth", "credential", "credentials", "bearer", "cookie",
})
NOT_SECRETS = frozenset({"prompt_cache_key", "stop_token_ids", "allowed_token_ids"})

# Key shapes of the common providers and code hosts, and JSON Web Tokens.
_KEY_SHAPES = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-[A-Za-z0-9_\-]{8,}|sk_(?:live|test)_[A-Za-z0-9]{8,}|rk_(?:live|test)_[A-Za-z0-9]{8,}"
    r"|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|glpat-[A-Za-z0-9_\-]{16,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{8,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{20,}"
    r"|hf_[A-Za-z0-9]{16,}|gsk_[A-Za-z0-9]{16,}|pplx-[A-Za-z0-9]{16,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"
    r")")
_SCHEME_VALUE = re.compile(r"(?i)\b(bearer|basic|token)(\s+)([A-Za-z0-9._~+/=\-]{6,})")
# NAME=value, NAME: value, "NAME": "value", --NAME value is not read (too many false alarms).
_NAMED_VALUE = re.compile(
    r"""(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*)(?P<quote>["']?)(?P<sep>\s*[=:]\s*)"""
    r"""(?P<open>["']?)(?P<value>[^\s"',;&}]{4,})""")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def looks_secret(name: str) -> bool:
    """True when a parameter, header or variable name reads as a credential (api_key,
    X-Api-Key, aws_secret_access_key, Authorization, OPENAI_API_KEY, ...). Words of a name
    (snake, kebab or camel case) are checked; counts such as max_tokens are "tokens"."""
    if name in NOT_SECRETS:
        return False
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    words = [word for word in re.split(r"[^a-z0-9]+", spaced) if word]
    return any(word in _SECRET_WORDS or word.endswith(("key", "secret")) for word in words)


def secrets_in(environ: Mapping[str, str]) -> list[str]:
    """The values of the environment variables whose names read as credentials, longest first
    (an agent's error, an HTTP body or a server's stderr may quote its key)."""
    found = {value for name, value in environ.items()
             if looks_secret(name) and len(value) >= MIN_SECRET}
    return sorted(found, key=len, reverse=True)


def clean(text: str, secrets: Iterable[str | None] = ()) -> str:
    """A message from outside (an error, a status line, a server's stderr) as it may be shown
    or stored: every secret and key-like value replaced, terminal control neutralised (the
    module's docstring has the rule)."""
    text = _KEY_SHAPES.sub(REDACTED, without_secrets(text, secrets))
    text = _SCHEME_VALUE.sub(lambda m: f"{m[1]}{m[2]}{REDACTED}", text)
    text = _NAMED_VALUE.sub(_named, text)
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", text)


def without_secrets(text: str, secrets: Iterable[str | None]) -> str:
    """`text` with the given secrets (and a head of one cut off before a `…`) replaced, and
    nothing else changed: for a payload that is data (a model's reply body), not a message."""
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
        if CUT in text:
            text = _cut_secret(text, secret)
    return text


def _named(found: re.Match[str]) -> str:
    if not looks_secret(found["name"]) or found["value"] == REDACTED:
        return found[0]
    return f"{found['name']}{found['quote']}{found['sep']}{found['open']}{REDACTED}"


def _cut_secret(text: str, secret: str) -> str:
    """Hide the head of a secret that a shortened message cut off just before its `…`."""
    at = text.find(CUT)
    while at != -1:
        for length in range(min(len(secret) - 1, at), MIN_CUT - 1, -1):
            if text.endswith(secret[:length], 0, at):
                text = text[:at - length] + REDACTED + text[at:]
                at += len(REDACTED) - length
                break
        at = text.find(CUT, at + 1)
    return text


def credential_in(text: str, secrets: Iterable[str] = ()) -> str | None:
    """What in `text` (a target spec, a command line, a URL) reads as a credential, described
    without its value; None when nothing does. The same rule as `clean`: a known secret, a
    key-shaped token, a Bearer/Basic value, a `NAME=value` or `NAME: value` whose name reads as a
    credential, or an option (`--api-key`) whose name does."""
    if any(secret and secret in text for secret in secrets):
        return "the value of an environment variable whose name reads as a credential"
    for named in _NAMED_VALUE.finditer(text):
        if looks_secret(named["name"]):
            return f"a value for {named['name'].lstrip('-')!r}, which reads as a credential"
    for option in re.finditer(r"(?<!\S)--?([A-Za-z][A-Za-z0-9_\-]*)", text):
        if looks_secret(option[1]):
            return f"the option {option[1]!r}, which reads as a credential"
    found = _SCHEME_VALUE.search(text)
    if found:
        return f"a {found[1]} credential"
    if _KEY_SHAPES.search(text):
        return "a value shaped like an API key or token"
    return None

"""Who is calling, and may they (on the replicas and the shuffler alike): bearer tokens, mutual-TLS
identities, roles and collections.

Contract (docs/contract.md): every call carries ``authorization: Bearer <token>``. With a
tokens file, the token names a client entry (its id is the *credential* quotas count); tokens
are compared with :func:`hmac.compare_digest` against every entry, so the time taken does not
depend on which entry (if any) matched. Missing or unknown token -> UNAUTHENTICATED; a known
token without the role or the collection -> PERMISSION_DENIED. Without a tokens file, the
credential is the client certificate's subject CN under mutual TLS, else ``anonymous``
(loopback demos). The tokens file is refused when its group or others have any access to it (use mode 600).

The check runs per call inside the handlers (an aio interceptor sees neither the TLS peer
identity nor the collection a batch names). The health and reflection services are not
authenticated: they reveal no data. Tokens never appear in messages, logs or the store.
"""

from __future__ import annotations

import hmac
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ldpsynth.serving.errors import ConfigError, PermissionDenied, Unauthenticated
from ldpsynth.shared import jsonio
from ldpsynth.shared.errors import ValidationError

SUBMIT = "submit"
QUERY = "query"
#: A shuffler tier forwarding shuffled batches of sealed reports (``SubmitShuffled``, docs/contract.md §16).
SHUFFLER = "shuffler"
#: An operator of the running server: ``QueryService.AdvanceRound`` closes a discovery collection's open round.
OPERATE = "operate"
ROLES = frozenset({SUBMIT, QUERY, SHUFFLER, OPERATE})
ANONYMOUS_ID = "anonymous"


@dataclass(frozen=True)
class Credential:
    """An authenticated caller: its id, its roles, and its collections (``None``: all)."""

    id: str
    roles: frozenset[str]
    collections: frozenset[str] | None

    def require_role(self, *roles: str) -> None:
        """PERMISSION_DENIED unless the credential has one of ``roles``."""
        if not self.roles.intersection(roles):
            raise PermissionDenied(f"credential {self.id!r} lacks the role {' or '.join(roles)}")

    def require_collection(self, collection: str) -> None:
        """PERMISSION_DENIED unless the credential may use ``collection``."""
        if self.collections is not None and collection not in self.collections:
            raise PermissionDenied(f"credential {self.id!r} may not use collection {collection[:128]!r}")


ANONYMOUS = Credential(ANONYMOUS_ID, ROLES, None)


def read_secret(path: Path, flag: str = "--tokens") -> bytes:
    """The bytes of a file holding secrets, refused (naming ``flag`` and the mode) when its group or
    others have any access: every token in it is a bearer secret, whoever reads it can call as that
    client. The mode is checked on the open file, so it is the mode of what is read.

    Parameters
    ----------
    path : Path
        The file.
    flag : str, default "--tokens"
        The option that named it (for the message).

    Returns
    -------
    bytes
        Its contents.
    """
    try:
        with open(path, "rb") as handle:
            mode = stat.S_IMODE(os.fstat(handle.fileno()).st_mode)
            if os.name == "posix" and mode & 0o077:
                raise ConfigError(f"{flag}: {path}: mode {mode:04o} lets group or others access it; the tokens are "
                                  f"bearer secrets (whoever reads one can call as that client): chmod 600 {path}")
            return handle.read()
    except OSError as exc:
        raise ConfigError(f"{flag}: {path}: cannot read ({exc.strerror})") from None


def _entry(obj: Any, i: int, seen_ids: set[str]) -> tuple[bytes, Credential]:
    where = f"clients[{i}]"
    if not isinstance(obj, Mapping):
        raise ConfigError(f"{where}: an object with id, token, collections, roles")
    extra = set(obj) - {"id", "token", "collections", "roles"}
    if extra:
        raise ConfigError(f"{where}: only the fields id, token, collections, roles; got {sorted(extra)}")
    cid, token, collections, roles = obj.get("id"), obj.get("token"), obj.get("collections"), obj.get("roles")
    if not isinstance(cid, str) or not cid or len(cid) > 256:
        raise ConfigError(f"{where}.id: a non-empty string of at most 256 characters")
    if cid in seen_ids:
        raise ConfigError(f"{where}.id: distinct ids, {cid!r} repeats")
    if not isinstance(token, str) or not token:
        raise ConfigError(f"{where}.token: a non-empty string")
    if collections == "*":
        allowed = None
    elif isinstance(collections, list) and all(isinstance(c, str) for c in collections):
        allowed = frozenset(collections)
    else:
        raise ConfigError(f'{where}.collections: "*" or a list of collection names')
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles) or not set(roles) <= ROLES:
        raise ConfigError(f"{where}.roles: a list of roles from {sorted(ROLES)}")
    seen_ids.add(cid)
    return token.encode("utf-8"), Credential(cid, frozenset(roles), allowed)


class TokenTable:
    """The clients of a tokens file (docs/contract.md)."""

    def __init__(self, entries: Sequence[tuple[bytes, Credential]]):
        tokens = [t for t, _ in entries]
        if len(set(tokens)) != len(tokens):
            raise ConfigError("tokens: every client needs its own token (two entries share one)")
        self._entries = list(entries)

    @classmethod
    def load(cls, path: str | Path) -> TokenTable:
        """The clients of the tokens file at ``path``, which only its owner may read or write."""
        try:
            obj = jsonio.loads(read_secret(Path(path)), "--tokens", 'a JSON object {"clients": [...]}')
        except ValidationError as exc:
            raise ConfigError(f"--tokens: {path}: {exc.problem}; legal range: {exc.legal}") from None
        clients = obj.get("clients") if isinstance(obj, Mapping) else None
        if not isinstance(clients, list) or not clients:
            raise ConfigError(f'--tokens {path}: an object {{"clients": [...]}} with at least one client')
        seen: set[str] = set()
        return cls([_entry(c, i, seen) for i, c in enumerate(clients)])

    def with_views(self, views: Mapping[str, Sequence[str]]) -> TokenTable:
        """The table where a client that may use a wide collection (a key of ``views``) may also use its view
        sub-collections (its value): a device submits to its view under the parent's token. (A discovery
        collection's rounds are passed the same way: a device reports to its round under the parent's token.)"""
        def widened(credential: Credential) -> Credential:
            if credential.collections is None:
                return credential
            subs = {sub for parent in credential.collections & set(views) for sub in views[parent]}
            return replace(credential, collections=credential.collections | subs)
        return TokenTable([(token, widened(credential)) for token, credential in self._entries])

    def lookup(self, token: bytes) -> Credential | None:
        """The credential whose token equals ``token`` (compared with every entry)."""
        found = None
        for candidate, credential in self._entries:
            if hmac.compare_digest(candidate, token):
                found = credential
        return found


def _metadata_value(metadata: Sequence[tuple[str, str | bytes]], key: str) -> list[str | bytes]:
    return [value for k, value in metadata if k.lower() == key]


class Authenticator:
    """Turns a call's metadata and TLS peer identity into a :class:`Credential`."""

    def __init__(self, tokens: TokenTable | None, mutual_tls: bool):
        self._tokens = tokens
        self._mutual_tls = mutual_tls

    def authenticate(self, metadata: Sequence[tuple[str, str | bytes]],
                     auth_context: Mapping[str, Sequence[bytes]]) -> Credential:
        """The caller's credential, or UNAUTHENTICATED."""
        if self._tokens is not None:
            return self._from_token(self._tokens, metadata)
        if self._mutual_tls:
            names = auth_context.get("x509_common_name") or []
            if len(names) != 1 or not names[0]:
                raise Unauthenticated("client certificate: a subject CN is required")
            return Credential(names[0].decode("utf-8", "replace"), ROLES, None)
        return ANONYMOUS

    @staticmethod
    def _from_token(tokens: TokenTable, metadata: Sequence[tuple[str, str | bytes]]) -> Credential:
        values = _metadata_value(metadata, "authorization")
        if len(values) != 1 or not isinstance(values[0], str):
            raise Unauthenticated("authorization: one 'Bearer <token>' header is required")
        scheme, _, token = values[0].partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("authorization: expected 'Bearer <token>'")
        credential = tokens.lookup(token.strip().encode("utf-8"))
        if credential is None:
            raise Unauthenticated("authorization: unknown token")
        return credential

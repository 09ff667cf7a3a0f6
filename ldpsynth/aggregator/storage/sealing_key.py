"""The aggregator's sealing key on disk: the HPKE private key its replicas open sealed reports with.

One file format for both deployments: a checked file (:mod:`~ldpsynth.aggregator.storage.checked_file`:
magic, kind, CRC-32) of kind ``ldpsynth.sealing-key/1`` whose header names the suite, the public key and
the key id, and whose one array is the 32-byte X25519 private key.

* **One machine** (``--data-dir``): ``DIR/sealing-key``, created at the first start (mode 0600 from the
  first byte) and read at every later one.
* **Cluster** (``--nats``): the file given with ``--shuffle-key``, the same on every replica (made with
  ``ldpsynth aggregator sealing-key --out FILE``, or the ``DIR/sealing-key`` of a one-machine aggregator).

A key file is refused, never replaced: one that its group or others may access (the private key
opens every sealed report), one that is damaged (checksum), of another kind (a foreign file), or
whose private key does not give the public key and key id its header names (edited, or two files
spliced). A data directory whose key file is missing while its log names a key is refused too
(:mod:`ldpsynth.aggregator.runtime.backend`): a new key would leave every report sealed to the old
one undecryptable.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np

from ldpsynth.aggregator.storage.checked_file import CheckedFileError, read_checked, write_checked
from ldpsynth.shared.errors import LdpsynthError
from ldpsynth.shared.sealing import PRIVATE_KEY_BYTES, SUITE_NAME, OpeningKey

KIND = "ldpsynth.sealing-key/1"
#: The key file's name in a one-machine data directory.
FILE_NAME = "sealing-key"


class SealingKeyError(LdpsynthError):
    """A sealing key file is missing, readable by others, damaged, foreign or inconsistent."""


def write_key_file(path: str | Path, key: OpeningKey) -> None:
    """Write ``key`` to a new key file at ``path`` (0600 from its creation; fsynced, renamed into place)."""
    path = Path(path)
    meta = {"suite": SUITE_NAME, "public_key": key.public.public_key.hex(), "key_id": key.key_id.hex()}
    write_checked(path, KIND, meta, {"private_key": np.frombuffer(key.private_bytes(), np.uint8)}, mode=0o600)


def read_key_file(path: str | Path, what: str) -> OpeningKey:
    """The key of the key file ``path`` (``what`` names it in errors: a flag, or the data directory's file)."""
    path = Path(path)
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        raise SealingKeyError(f"{what} {path}: missing") from None
    except OSError as exc:
        raise SealingKeyError(f"{what} {path}: cannot read ({exc.strerror})") from None
    if os.name == "posix" and mode & 0o077:
        raise SealingKeyError(f"{what} {path}: mode {mode:04o} lets group or others access it; the private key "
                              f"opens every sealed report: chmod 600 {path}")
    try:
        meta, arrays = read_checked(path, KIND, mmap=False)
    except CheckedFileError as exc:
        raise SealingKeyError(f"{what} {exc}: not a usable sealing key; restore the key file from a backup "
                              "(never replace it with a new key: reports sealed to this one would not open)") from None
    private = arrays.get("private_key")
    if private is None or private.dtype != np.uint8 or private.shape != (PRIVATE_KEY_BYTES,):
        raise SealingKeyError(f"{what} {path}: no {PRIVATE_KEY_BYTES}-byte private key in it")
    key = OpeningKey(private.tobytes())
    if meta.get("suite") != SUITE_NAME:
        raise SealingKeyError(f"{what} {path}: a key of the suite {str(meta.get('suite'))[:100]!r}, not {SUITE_NAME}")
    if meta.get("public_key") != key.public.public_key.hex() or meta.get("key_id") != key.key_id.hex():
        raise SealingKeyError(f"{what} {path}: its private key does not give the public key and key id it names "
                              "(the file was edited or put together from two keys)")
    return key


def data_dir_key(directory: Path, registered: str | None, create: bool) -> tuple[OpeningKey | None, bool]:
    """The key of a one-machine data directory, checked as ``serve`` checks it at start (``verify``
    makes the same check in the same words): ``registered`` is the key id the log names (``None``:
    none yet). A missing file is created when ``create`` and no key is registered (else ``(None,
    False)`` for ``verify``); a missing or replaced file while the log names a key is
    :class:`SealingKeyError`. Returns ``(key, created)``."""
    path = directory / FILE_NAME
    if not path.exists() and not path.is_symlink():
        if registered is not None:
            raise SealingKeyError(f"{path}: missing, but the log is served with sealing key {registered}: restore the "
                                  "file from a backup of the data directory (a new key would leave every report "
                                  "sealed to that one undecryptable)")
        if not create:
            return None, False
        key = OpeningKey.generate()
        try:
            write_key_file(path, key)
        except OSError as exc:
            raise SealingKeyError(f"--data-dir {directory}: cannot write {FILE_NAME} ({exc.strerror})") from None
        return key, True
    key = read_key_file(path, "--data-dir")
    if registered is not None and key.key_id.hex() != registered:
        raise SealingKeyError(f"{path}: holds sealing key {key.key_id.hex()}, but the log is served with sealing key "
                              f"{registered}: the file was replaced; restore this data directory's own key file from "
                              "a backup (reports sealed to that key open only with it)")
    return key, False

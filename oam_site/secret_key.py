"""The Django ``SECRET_KEY`` when ``DJANGO_SECRET_KEY`` is not set: random, per install, never a constant.

A key that is a public constant lets anyone forge signed values (sessions,
signed cookies, password-reset tokens): a public default key rendered a forged signed
message on a staff page. The embedded default must still start with no
configuration (``make serve``), so the first start writes
``secrets.token_urlsafe(50)`` to a file readable by its owner only and every
later start reads it back. Several hosts serving one database must share one
key: set ``DJANGO_SECRET_KEY`` (or point ``DJANGO_SECRET_KEY_FILE`` at a shared
file) there.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

MIN_LENGTH = 50  # Django's check --deploy (security.W009) asks for 50+ characters


def load_or_create(path: Path) -> str:
    """Return the key stored in ``path``, creating the file (mode 0600) with a new key when missing.

    Creation is atomic (``O_EXCL``): two processes starting at once end with the
    same key. Raises ``ImproperlyConfigured`` naming ``DJANGO_SECRET_KEY`` when the
    file cannot be read or written, or holds a key shorter than 50 characters.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as handle:
                handle.write(secrets.token_urlsafe(MIN_LENGTH))
        key = path.read_text().strip()
    except OSError as exc:
        raise ImproperlyConfigured(
            f"cannot keep the secret key in {path}: {exc.strerror or exc}. Set DJANGO_SECRET_KEY, "
            "or DJANGO_SECRET_KEY_FILE / OAM_VAR_DIR to a writable place."
        ) from exc
    if len(key) < MIN_LENGTH:
        raise ImproperlyConfigured(
            f"the secret key in {path} is shorter than {MIN_LENGTH} characters: delete the file to make a "
            "new one, or set DJANGO_SECRET_KEY"
        )
    return key

"""Where a JWKS comes from: ``sasl.oauthbearer.jwks.endpoint.url`` as a fetch function.

The one place in ``tierlog.security`` that does I/O for OAUTHBEARER: ``fetcher(url)``
returns a callable giving the JWKS bytes, from a ``file:`` URL or over ``http(s)``
(urllib, with a timeout). ``JwksKeys`` calls it; nothing else does.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path

from tierlog.security.errors import SecurityConfigError

__all__ = ["fetcher"]

_KEY = "sasl.oauthbearer.jwks.endpoint.url"


def fetcher(url: str, timeout_s: float = 10.0) -> Callable[[], bytes]:
    """A function returning the JWKS at ``url``.

    Raises:
        SecurityConfigError: a scheme other than file, http or https.
    """
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))
        return path.read_bytes
    if parsed.scheme in ("http", "https"):

        def fetch() -> bytes:
            request = urllib.request.Request(url, headers={"Accept": "application/json"})
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                body: bytes = response.read()
                return body

        return fetch
    raise SecurityConfigError(_KEY, f"{url!r}: the JWKS URL must be file:, http: or https:")

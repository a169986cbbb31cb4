"""On-disk HTTP cache for the crawler: one file per URL, with what it takes to revalidate it.

Each file is named by the sha256 of the URL and holds one JSON header line (URL, content type,
ETag, Last-Modified, fetch time, body size) followed by the body's raw bytes. A repeat crawl sends
the stored ETag / Last-Modified back as ``If-None-Match`` / ``If-Modified-Since`` and, on a 304,
reads the body from here instead of transferring it again. A missing, truncated or unreadable
file is a cache miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import attrs

__all__ = ["CachedResponse", "HttpCache"]


@attrs.frozen(kw_only=True)
class CachedResponse:
    """A successful response as stored: the body and its validators.

    ``fetched_at`` is when the body was last fetched or revalidated, in seconds since the epoch.
    """

    url: str
    body: bytes = attrs.field(repr=lambda body: f"<{len(body)} bytes>")
    content_type: str = ""
    etag: str = ""
    last_modified: str = ""
    fetched_at: float = 0.0

    @property
    def validators(self) -> dict[str, str]:
        """The conditional-request headers that revalidate this response (empty when it has none)."""
        headers = {}
        if self.etag:
            headers["If-None-Match"] = self.etag
        if self.last_modified:
            headers["If-Modified-Since"] = self.last_modified
        return headers


@attrs.frozen
class HttpCache:
    """A directory of cached responses, one file per URL (created on the first write)."""

    directory: Path = attrs.field(converter=Path)

    def path_for(self, url: str) -> Path:
        """The file that holds ``url``'s response."""
        return self.directory / f"{hashlib.sha256(url.encode('utf-8')).hexdigest()}.http"

    def get(self, url: str) -> CachedResponse | None:
        """The stored response for ``url``, or None when there is none (or it is unreadable)."""
        try:
            data = self.path_for(url).read_bytes()
            header_line, _, body = data.partition(b"\n")
            header = json.loads(header_line)
            if header.get("url") != url or header.get("size") != len(body):
                return None
            return CachedResponse(
                url=url,
                body=body,
                content_type=str(header.get("content_type", "")),
                etag=str(header.get("etag", "")),
                last_modified=str(header.get("last_modified", "")),
                fetched_at=float(header.get("fetched_at", 0.0)),
            )
        except (OSError, ValueError, TypeError, AttributeError):
            return None

    def put(self, response: CachedResponse) -> None:
        """Store ``response``, replacing the URL's previous one atomically."""
        header = {
            "url": response.url,
            "content_type": response.content_type,
            "etag": response.etag,
            "last_modified": response.last_modified,
            "fetched_at": response.fetched_at,
            "size": len(response.body),
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.path_for(response.url)
        handle, temporary = tempfile.mkstemp(dir=self.directory, prefix=f".{target.name}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as stream:
                stream.write(json.dumps(header, sort_keys=True).encode("utf-8") + b"\n")
                stream.write(response.body)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

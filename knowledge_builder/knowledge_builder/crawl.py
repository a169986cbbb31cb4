"""Online crawler: fetches a profiler's documentation pages from the web, politely.

From each start URL, :func:`crawl` walks links breadth first, to a depth and a page limit, staying
on the start URL's site (same scheme, host and port). It follows only the links of a page's main
content (navigation menus would drag in the whole site), reads each host's robots.txt once and
obeys it (with its Crawl-delay), waits between two requests to the same host, and keeps only pages
a format reader exists for. Every response is kept in an :class:`~knowledge_builder.http_cache.HttpCache`;
a repeat crawl revalidates it with ``If-None-Match`` / ``If-Modified-Since`` and reuses the cached
body on a 304. A failing URL (HTTP error, timeout, network error) is recorded and skipped; it never
stops the crawl.
"""

from __future__ import annotations

import re
import time
import urllib.robotparser
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

import attrs
import httpx

from .documents import Page
from .formats import format_of
from .formats.html import content_links
from .http_cache import CachedResponse, HttpCache

__all__ = ["USER_AGENT", "CrawlSettings", "CrawlStats", "CrawlIssue", "CrawlResult", "crawl"]

USER_AGENT = "pragma-knowledge-builder/0.1"

_REDIRECTS = frozenset((301, 302, 303, 307, 308))
_MAX_REDIRECTS = 5
_MAX_CRAWL_DELAY_S = 60.0
_ASSET_EXTENSIONS = frozenset(
    (
        ".png",
        ".jpg",
        ".jpeg",
        ".gif",
        ".svg",
        ".ico",
        ".webp",
        ".bmp",
        ".pdf",
        ".zip",
        ".gz",
        ".tgz",
        ".bz2",
        ".xz",
        ".tar",
        ".whl",
        ".css",
        ".js",
        ".mjs",
        ".map",
        ".woff",
        ".woff2",
        ".ttf",
        ".eot",
        ".mp4",
        ".webm",
        ".mp3",
        ".ogg",
        ".exe",
        ".dmg",
        ".deb",
        ".rpm",
        ".bin",
        ".so",
        ".ipynb",
    )
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?([A-Za-z0-9_.:-]+)""", re.I)


@attrs.frozen(kw_only=True)
class CrawlSettings:
    """How far and how fast to crawl.

    ``max_depth`` counts link hops from a start page (0 fetches the start pages only);
    ``max_pages`` bounds the pages returned over all start URLs. ``rate_limit_s`` is the least
    time between two requests to one host (a robots.txt Crawl-delay, up to a minute, can raise
    it). ``cache_max_age_s`` > 0 lets a cached response that young be used with no request at
    all; at 0 every cached response is revalidated. Bodies larger than ``max_bytes`` are refused.
    """

    max_depth: int = attrs.field(default=1, validator=attrs.validators.ge(0))
    max_pages: int = attrs.field(default=50, validator=attrs.validators.ge(1))
    rate_limit_s: float = attrs.field(default=1.0, validator=attrs.validators.ge(0))
    timeout_s: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))
    cache_max_age_s: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))
    max_bytes: int = attrs.field(default=20_000_000, validator=attrs.validators.gt(0))
    user_agent: str = USER_AGENT


@attrs.define
class CrawlStats:
    """What a crawl did over the network, robots.txt files and redirect hops included.

    ``requests`` HTTP requests were sent; ``fetched`` of them returned a body (``bytes_fetched``
    bytes in all); ``not_modified`` were answered 304 and the cached body reused; ``cache_hits``
    responses came from the cache with no request (see ``CrawlSettings.cache_max_age_s``).
    """

    requests: int = 0
    fetched: int = 0
    not_modified: int = 0
    cache_hits: int = 0
    bytes_fetched: int = 0


@attrs.frozen
class CrawlIssue:
    """A URL the crawl could not use, and why."""

    url: str
    reason: str


def _pages(items: Iterable[Page]) -> tuple[Page, ...]:
    return tuple(items)


def _issues(items: Iterable[CrawlIssue]) -> tuple[CrawlIssue, ...]:
    return tuple(items)


@attrs.frozen(kw_only=True)
class CrawlResult:
    """The pages a crawl kept, in the order reached, with its statistics.

    ``errors`` are failures (HTTP errors, timeouts, network errors, an unreachable robots.txt);
    ``skipped`` are URLs left alone on purpose (disallowed by robots.txt, no reader for their
    content type, redirected off the site).
    """

    pages: tuple[Page, ...] = attrs.field(converter=_pages)
    stats: CrawlStats
    errors: tuple[CrawlIssue, ...] = attrs.field(converter=_issues)
    skipped: tuple[CrawlIssue, ...] = attrs.field(converter=_issues)


def crawl(
    start_urls: Iterable[str],
    profiler_of: Mapping[str, str] | Callable[[str], str],
    *,
    cache_dir: Path,
    settings: CrawlSettings | None = None,
    client: httpx.Client | None = None,
    on_page: Callable[[Page], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> CrawlResult:
    """Crawl from ``start_urls`` and return the documentation pages found.

    ``profiler_of`` names the profiler a start URL documents (a mapping, or a function of the
    start URL); every page reached from that start URL gets it. A page's ``url`` is its final URL
    after redirects, without fragment. ``client`` is used as given (and left open) when passed;
    ``on_page`` is called with each page kept, as it is kept; ``clock`` and ``sleep`` time the
    waits between requests to a host.
    """
    profiler = profiler_of if callable(profiler_of) else profiler_of.__getitem__
    own_client = client is None
    client = client if client is not None else httpx.Client()
    try:
        crawler = _Crawler(
            settings or CrawlSettings(),
            HttpCache(cache_dir),
            client,
            clock=clock,
            sleep=sleep,
        )
        return crawler.run([(url, profiler(url)) for url in start_urls], on_page)
    finally:
        if own_client:
            client.close()


@attrs.frozen
class _Visit:
    url: str
    depth: int
    profiler: str
    site: str | None  # the origin links must stay on; None lets a start URL redirect anywhere


@attrs.frozen
class _Response:
    url: str
    status: int
    body: bytes = b""
    content_type: str = ""
    location: str = ""


@attrs.frozen
class _Robots:
    """A host's robots.txt: its rules (None allows everything), or why the host is skipped."""

    rules: urllib.robotparser.RobotFileParser | None = None
    unavailable: str = ""


class _TooLarge(Exception):
    pass


class _Crawler:
    """One crawl's state: the queue's bookkeeping, each host's robots.txt and last request time."""

    def __init__(
        self,
        settings: CrawlSettings,
        cache: HttpCache,
        client: httpx.Client,
        *,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> None:
        self._settings = settings
        self._cache = cache
        self._client = client
        self._clock = clock
        self._sleep = sleep
        self._stats = CrawlStats()
        self._errors: list[CrawlIssue] = []
        self._skipped: list[CrawlIssue] = []
        self._robots: dict[str, _Robots] = {}
        self._last_request: dict[str, float] = {}
        self._seen: set[str] = set()  # URLs queued or answered, so none is queued twice
        self._kept: set[str] = set()  # final URLs of the pages kept

    def run(self, starts: list[tuple[str, str]], on_page: Callable[[Page], None] | None) -> CrawlResult:
        queue: deque[_Visit] = deque()
        for url, profiler in starts:
            normal = _normalise(url, keep_query=True)
            if normal and normal not in self._seen:
                self._seen.add(normal)
                queue.append(_Visit(normal, 0, profiler, None))
        pages: list[Page] = []
        while queue and len(pages) < self._settings.max_pages:
            visit = queue.popleft()
            response = None if visit.url in self._kept else self._fetch_page(visit)
            page = self._page(visit, response) if response is not None else None
            if page is None:
                continue
            self._kept.add(page.url)
            pages.append(page)
            if on_page is not None:
                on_page(page)
            if page.format == "html" and visit.depth < self._settings.max_depth:
                site = visit.site or _origin(page.url)
                for link in content_links(page):
                    target = _normalise(link, keep_query=False)
                    if target and target not in self._seen and _origin(target) == site and not _is_asset(target):
                        self._seen.add(target)
                        queue.append(_Visit(target, visit.depth + 1, visit.profiler, site))
        return CrawlResult(pages=pages, stats=self._stats, errors=self._errors, skipped=self._skipped)

    def _page(self, visit: _Visit, response: _Response) -> Page | None:
        fmt = format_of(urlsplit(response.url).path, response.content_type)
        if fmt is None:
            self._skipped.append(CrawlIssue(response.url, f"no reader for content type {response.content_type!r}"))
            return None
        return Page(
            url=response.url, profiler=visit.profiler, format=fmt, text=_decode(response.body, response.content_type)
        )

    def _fetch_page(self, visit: _Visit) -> _Response | None:
        """The page's 200 response after redirects, or None: with the reason recorded, or silently
        when it redirects to a page already kept."""
        url = visit.url
        try:
            for _ in range(_MAX_REDIRECTS + 1):
                refusal = self._robots_refusal(url)
                if refusal:
                    self._skipped.append(CrawlIssue(url, refusal))
                    return None
                response = self._get(url)
                if response.status in _REDIRECTS and response.location:
                    target = _normalise(urljoin(url, response.location), keep_query=True)
                    if not target or (visit.site is not None and _origin(target) != visit.site):
                        self._skipped.append(CrawlIssue(url, f"redirects off the site to {response.location}"))
                        return None
                    if target in self._kept:
                        return None
                    self._seen.add(target)
                    url = target
                    continue
                if response.status != 200:
                    self._errors.append(CrawlIssue(url, f"HTTP {response.status}"))
                    return None
                return response
            self._errors.append(CrawlIssue(visit.url, f"more than {_MAX_REDIRECTS} redirects"))
        except httpx.TimeoutException:
            self._errors.append(CrawlIssue(url, f"timed out after {self._settings.timeout_s:g} s"))
        except (httpx.HTTPError, httpx.InvalidURL) as error:
            self._errors.append(CrawlIssue(url, f"network error: {type(error).__name__}: {error}"))
        except _TooLarge:
            self._errors.append(CrawlIssue(url, f"larger than {self._settings.max_bytes} bytes"))
        return None

    def _robots_refusal(self, url: str) -> str:
        """Why robots.txt forbids fetching ``url`` ("" when it may be fetched)."""
        origin = _origin(url)
        if origin not in self._robots:
            self._robots[origin] = self._load_robots(origin)
        robots = self._robots[origin]
        if robots.unavailable:
            return f"host skipped: {robots.unavailable}"
        if robots.rules is not None and not robots.rules.can_fetch(self._settings.user_agent, url):
            return "disallowed by robots.txt"
        return ""

    def _load_robots(self, origin: str) -> _Robots:
        """The host's robots.txt, fetched once. Per RFC 9309 a 4xx allows everything; a 5xx or a
        network error makes the host unreachable, so it is skipped with the reason recorded."""
        url = f"{origin}/robots.txt"
        try:
            for _ in range(_MAX_REDIRECTS + 1):
                response = self._get(url)
                if response.status in _REDIRECTS and response.location:
                    url = _normalise(urljoin(url, response.location), keep_query=True)
                    continue
                break
            else:
                return _Robots()
        except (httpx.HTTPError, httpx.InvalidURL, _TooLarge) as error:
            reason = f"robots.txt unavailable ({type(error).__name__}: {error})"
            self._errors.append(CrawlIssue(url, reason))
            return _Robots(unavailable=reason)
        if response.status >= 500:
            reason = f"robots.txt unavailable (HTTP {response.status})"
            self._errors.append(CrawlIssue(url, reason))
            return _Robots(unavailable=reason)
        if response.status != 200:
            return _Robots()
        rules = urllib.robotparser.RobotFileParser(url)
        rules.parse(_decode(response.body, response.content_type).splitlines())
        return _Robots(rules=rules)

    def _get(self, url: str) -> _Response:
        """One GET through the cache: a fresh cached copy, a revalidated one, or a new download."""
        cached = self._cache.get(url)
        max_age = self._settings.cache_max_age_s
        if cached is not None and max_age > 0 and time.time() - cached.fetched_at < max_age:
            self._stats.cache_hits += 1
            return _Response(url, 200, cached.body, cached.content_type)
        headers = {"User-Agent": self._settings.user_agent, **(cached.validators if cached else {})}
        request = self._client.build_request("GET", url, headers=headers, timeout=self._settings.timeout_s)
        self._wait_turn(url)
        self._stats.requests += 1
        response = self._client.send(request, stream=True, follow_redirects=False)
        try:
            if response.status_code == 304 and cached is not None:
                self._stats.not_modified += 1
                self._cache.put(
                    attrs.evolve(
                        cached,
                        fetched_at=time.time(),
                        etag=response.headers.get("etag", cached.etag),
                        last_modified=response.headers.get("last-modified", cached.last_modified),
                    )
                )
                return _Response(url, 200, cached.body, cached.content_type)
            if response.status_code != 200:
                return _Response(url, response.status_code, location=response.headers.get("location", ""))
            body = self._read_body(response)
            content_type = response.headers.get("content-type", "")
            self._stats.fetched += 1
            self._stats.bytes_fetched += len(body)
            self._cache.put(
                CachedResponse(
                    url=url,
                    body=body,
                    content_type=content_type,
                    etag=response.headers.get("etag", ""),
                    last_modified=response.headers.get("last-modified", ""),
                    fetched_at=time.time(),
                )
            )
            return _Response(url, 200, body, content_type)
        finally:
            response.close()

    def _read_body(self, response: httpx.Response) -> bytes:
        limit = self._settings.max_bytes
        if int(response.headers.get("content-length", "0") or 0) > limit:
            raise _TooLarge
        body = bytearray()
        for piece in response.iter_bytes():
            body += piece
            if len(body) > limit:
                raise _TooLarge
        return bytes(body)

    def _wait_turn(self, url: str) -> None:
        """Sleep until the host's last request is at least the rate limit (or Crawl-delay) ago."""
        host = urlsplit(url).netloc
        interval = self._settings.rate_limit_s
        robots = self._robots.get(_origin(url))
        if robots is not None and robots.rules is not None:
            delay = robots.rules.crawl_delay(self._settings.user_agent)
            if delay:
                interval = max(interval, min(float(delay), _MAX_CRAWL_DELAY_S))
        last = self._last_request.get(host)
        if last is not None:
            remaining = last + interval - self._clock()
            if remaining > 0:
                self._sleep(remaining)
        self._last_request[host] = self._clock()


def _normalise(url: str, *, keep_query: bool) -> str:
    """``url`` without fragment (and without query unless kept), scheme and host in lower case,
    default port dropped, dot segments resolved; "" when it is not an http(s) URL."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in ("http", "https") or not host:
        return ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None or (scheme, port) in (("http", 80), ("https", 443)) else f"{host}:{port}"
    path = urlsplit(urljoin(f"{scheme}://{netloc}/", parts.path or "/")).path
    return urlunsplit((scheme, netloc, path, parts.query if keep_query else "", ""))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _is_asset(url: str) -> bool:
    name = urlsplit(url).path.rsplit("/", 1)[-1].lower()
    return "." in name and name[name.rindex(".") :] in _ASSET_EXTENSIONS


def _decode(body: bytes, content_type: str) -> str:
    """The body as text: by the charset the response (or an HTML meta tag) declares, else UTF-8."""
    charset = ""
    for parameter in content_type.split(";")[1:]:
        key, _, value = parameter.partition("=")
        if key.strip().lower() == "charset":
            charset = value.strip().strip("\"'")
    if not charset and (declared := _META_CHARSET.search(body[:4096])):
        charset = declared.group(1).decode("ascii")
    if body.startswith(b"\xef\xbb\xbf"):
        charset = "utf-8-sig"
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")

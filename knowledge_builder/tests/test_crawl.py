"""The crawler against a real HTTP server on 127.0.0.1, serving a small doc site built from the mirror.

The site's pages wrap real text in doc-site chrome: the Nsight Compute Profiling Guide's intro and
its Launch Metrics and Units tables (``ncu/docs/ProfilingGuide.md``), and the kernel's
``perf/upstream/topdown.txt`` served as it is, as a plain-text page. The server answers with ETags
and 304s, a robots.txt, a redirect, a 404 and a 500. Every other host is refused by the test client's
transport, so nothing here can reach the real network.
"""

from __future__ import annotations

import hashlib
import html
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import attrs
import httpx
import pytest

from knowledge_builder.crawl import USER_AGENT, CrawlSettings, crawl
from knowledge_builder.formats import read_page
from knowledge_builder.http_cache import CachedResponse, HttpCache

NVIDIA_LINK = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#programming-model"
_CONTENT_TYPES = {".html": "text/html; charset=utf-8", ".txt": "text/plain; charset=utf-8"}


# --- the site ----------------------------------------------------------------------------------


@attrs.define
class Site:
    """A directory served over HTTP, with the requests it received."""

    root: Path
    base: str = ""
    requests: list[tuple[str, dict[str, str]]] = attrs.Factory(list)
    redirects: dict[str, str] = attrs.Factory(dict)
    failures: dict[str, int] = attrs.Factory(dict)
    slow: dict[str, float] = attrs.Factory(dict)
    elsewhere: Site | None = None  # another site, that links point to but the crawl must not visit

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]


def _serve(site: Site):
    class Handler(BaseHTTPRequestHandler):
        disable_nagle_algorithm = True  # headers and body go out as two writes; don't wait for an ACK

        def do_GET(self) -> None:  # noqa: N802 - the http.server hook's name
            path = urlsplit(self.path).path
            site.requests.append((self.path, {key.lower(): value for key, value in self.headers.items()}))
            time.sleep(site.slow.get(path, 0))
            if path in site.redirects:
                self.send_response(301)
                self.send_header("Location", site.redirects[path])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            file = site.root / path.lstrip("/")
            if path in site.failures or not file.is_file():
                self.send_error(site.failures.get(path, 404))
                return
            body = file.read_bytes()
            etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
            if self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Type", _CONTENT_TYPES.get(file.suffix, "application/octet-stream"))
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", etag)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    return server


def _md_inline(text: str) -> str:
    text = html.escape(text, quote=False)
    text = re.sub(r"\[([^\]]*)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', text)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


def _md_rows(md: str, heading: str) -> list[tuple[str, str]]:
    section = md[md.index(heading) :]
    section = section[: section.index("\n### ", 1)]
    return re.findall(r"^> (?:[A-Z][\w ]* )?`([^`]+)` \| (.*?)\s*$", section, re.M)


def _page(title: str, content: str) -> str:
    """Real content in the chrome a doc site wraps around it."""
    return f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>{title} - Nsight Compute</title>
<script src="../_static/searchtools.js"></script><script>var DOCUMENTATION_OPTIONS = {{}};</script></head>
<body><a class="skip-link" href="#content">Skip to main content</a>
<nav class="wy-nav-side" role="navigation"><ul>
<li><a href="nav-only.html">1. Release Notes</a></li><li><a href="index.html">2. Profiling Guide</a></li></ul></nav>
<div class="sphinxsidebar"><a href="nav-only.html">Archives</a></div>
<div role="main" class="document"><section id="content">{content}</section></div>
<footer><a href="nav-only.html">Copyright and Licenses</a></footer></body></html>"""


@pytest.fixture
def site(tmp_path: Path, docs_mirror: Path):
    md = (docs_mirror / "ncu/docs/ProfilingGuide.md").read_text(encoding="utf-8")
    intro = md[md.index("## 2.1. Introduction") : md.index("### 2.1.1.")]
    paragraphs = [block for block in intro.split("\n\n")[1:] if not block.lstrip().startswith("*")]
    root = tmp_path / "site"
    (root / "ncu").mkdir(parents=True)
    (root / "private").mkdir()
    (root / "perf").mkdir()
    (root / "robots.txt").write_text("User-agent: *\nDisallow: /private/\n")
    table = "".join(
        f"<tr><td><code>{name}</code></td><td>{_md_inline(text)}</td></tr>"
        for name, text in _md_rows(md, "### 2.4.2. Launch Metrics")
    )
    units = "".join(
        f"<tr><td><code>{name}</code></td><td>{_md_inline(text)}</td></tr>"
        for name, text in _md_rows(md, "### 2.3.4. Units")
    )
    other = Site(tmp_path / "elsewhere")
    other_server = _serve(other)
    links = " ".join(
        (
            '<a href="launch.html">Launch Metrics</a>',
            '<a href="units.html#units">Units</a>',
            '<a href="units.html?highlight=lts">lts</a>',
            '<a href="old-launch.html">launch (old address)</a>',
            '<a href="../private/notes.html">notes</a>',
            '<a href="missing.html">missing</a>',
            '<a href="broken.html">broken</a>',
            '<a href="images/memory-chart.png">chart</a>',
            f'<a href="{other.base}/ncu/index.html">mirror</a>',
            f'<a href="{NVIDIA_LINK}">Programming Model</a>',
        )
    )
    (root / "ncu/index.html").write_text(
        _page(
            "Profiling Guide",
            ("<h1>2.1. Introduction</h1>" + "".join(f"<p>{_md_inline(p)}</p>" for p in paragraphs) + f"<p>{links}</p>"),
        )
    )
    (root / "ncu/launch.html").write_text(
        _page(
            "Launch Metrics",
            (
                f'<h2 id="launch-metrics">2.4.2. Launch Metrics</h2><table><caption>Launch Metrics</caption>{table}</table>'
                '<p>See also <a href="deep.html">Occupancy Metrics</a>.</p>'
            ),
        )
    )
    (root / "ncu/units.html").write_text(_page("Units", f'<h2 id="units">2.3.4. Units</h2><table>{units}</table>'))
    (root / "ncu/deep.html").write_text(_page("Occupancy Metrics", "<h2>2.4.3. Occupancy Metrics</h2>"))
    (root / "ncu/nav-only.html").write_text(_page("Release Notes", "<h1>1. Release Notes</h1>"))
    (root / "private/notes.html").write_text(_page("Notes", "<h1>Notes</h1>"))
    (root / "perf/topdown.txt").write_bytes((docs_mirror / "perf/upstream/topdown.txt").read_bytes())
    served = Site(
        root,
        redirects={"/ncu/start": "/ncu/index.html", "/ncu/old-launch.html": "/ncu/launch.html"},
        failures={"/ncu/broken.html": 500},
        elsewhere=other,
    )
    server = _serve(served)
    yield served
    for running in (server, other_server):
        running.shutdown()
        running.server_close()


class RefusingTransport(httpx.BaseTransport):
    """Stands in for the network: any host but 127.0.0.1 is refused, and remembered."""

    def __init__(self) -> None:
        self.refused: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.refused.append(str(request.url))
        raise httpx.ConnectError("the tests never reach the network", request=request)


class FakeClock:
    """A monotonic clock that only moves when the crawler sleeps."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def guard() -> RefusingTransport:
    return RefusingTransport()


def _client(guard: RefusingTransport, **options) -> httpx.Client:
    return httpx.Client(transport=guard, mounts={"all://127.0.0.1": httpx.HTTPTransport()}, trust_env=False, **options)


def _crawl(
    site: Site,
    guard: RefusingTransport,
    cache_dir: Path,
    clock: FakeClock | None = None,
    *,
    client: httpx.Client | None = None,
    **settings,
):
    clock = clock or FakeClock()
    starts = {f"{site.base}/ncu/start#metrics-reference": "ncu", f"{site.base}/perf/topdown.txt": "perf"}
    with client or _client(guard) as http:
        return crawl(
            list(starts),
            starts,
            cache_dir=cache_dir,
            settings=CrawlSettings(**settings),
            client=http,
            clock=clock,
            sleep=clock.sleep,
        )


# --- crawling ----------------------------------------------------------------------------------


def test_crawl_follows_same_site_content_links_to_the_depth_limit(site, guard, tmp_path, docs_mirror):
    result = _crawl(site, guard, tmp_path / "cache", rate_limit_s=0.5)
    urls = [page.url for page in result.pages]
    assert urls == [
        f"{site.base}/ncu/index.html",
        f"{site.base}/perf/topdown.txt",
        f"{site.base}/ncu/launch.html",
        f"{site.base}/ncu/units.html",
    ]
    requested = site.paths()
    assert "/ncu/deep.html" not in requested  # two links away with max_depth=1
    assert "/ncu/nav-only.html" not in requested  # linked from the navigation and the footer only
    assert "/private/notes.html" not in requested  # robots.txt disallows /private/
    assert not any(path.endswith(".png") for path in requested)
    assert requested.count("/robots.txt") == 1 and requested.count("/ncu/launch.html") == 1
    assert not site.elsewhere.requests and guard.refused == []  # off-site links are not followed
    assert all(headers["user-agent"] == USER_AGENT for _, headers in site.requests)
    assert {(issue.url, issue.reason) for issue in result.errors} == {
        (f"{site.base}/ncu/missing.html", "HTTP 404"),
        (f"{site.base}/ncu/broken.html", "HTTP 500"),
    }
    assert [(issue.url, issue.reason) for issue in result.skipped] == [
        (f"{site.base}/private/notes.html", "disallowed by robots.txt")
    ]


def test_pages_carry_their_start_urls_profiler_format_and_text(site, guard, tmp_path, docs_mirror):
    result = _crawl(site, guard, tmp_path / "cache", rate_limit_s=0)
    pages = {page.url.rsplit("/", 1)[-1]: page for page in result.pages}
    assert [page.profiler for page in result.pages] == ["ncu", "perf", "ncu", "ncu"]
    assert pages["topdown.txt"].format == "txt"
    assert pages["topdown.txt"].text == (docs_mirror / "perf/upstream/topdown.txt").read_text(encoding="utf-8")
    assert pages["index.html"].format == "html" and pages["index.html"].path == ""
    definitions = {d.term: d for chunk in read_page(pages["launch.html"]) for d in chunk.definitions}
    assert definitions["launch__grid_size"].text == "Maximum total number of blocks for the kernel launch."


def test_a_second_crawl_revalidates_the_cache_and_transfers_no_body(site, guard, tmp_path):
    first = _crawl(site, guard, tmp_path / "cache", rate_limit_s=0)
    assert first.stats.fetched == 5 and first.stats.not_modified == 0  # robots.txt and four pages
    site.requests.clear()
    second = _crawl(site, guard, tmp_path / "cache", rate_limit_s=0)
    assert second.pages == first.pages
    assert second.stats.not_modified == 5
    assert second.stats.fetched == 0 and second.stats.bytes_fetched == 0
    conditional = [path for path, headers in site.requests if "if-none-match" in headers]
    assert sorted(conditional) == [
        "/ncu/index.html",
        "/ncu/launch.html",
        "/ncu/units.html",
        "/perf/topdown.txt",
        "/robots.txt",
    ]


def test_a_fresh_cache_is_used_without_any_request(site, guard, tmp_path):
    _crawl(site, guard, tmp_path / "cache", rate_limit_s=0)
    site.requests.clear()
    again = _crawl(site, guard, tmp_path / "cache", rate_limit_s=0, cache_max_age_s=3600)
    assert again.stats.cache_hits == 5 and again.stats.not_modified == 0 and again.stats.fetched == 0
    # Only what was never cached is asked for again: the redirects, the 404 and the 500.
    assert sorted(site.paths()) == ["/ncu/broken.html", "/ncu/missing.html", "/ncu/old-launch.html", "/ncu/start"]
    assert len(again.pages) == 4


def test_requests_to_a_host_are_spaced_by_the_rate_limit(site, guard, tmp_path):
    clock = FakeClock()
    sent: list[float] = []
    client = _client(guard, event_hooks={"request": [lambda request: sent.append(clock.now)]})
    result = _crawl(site, guard, tmp_path / "cache", clock, client=client, rate_limit_s=2.0)
    assert len(sent) == result.stats.requests == len(site.requests) == 9
    assert [later - earlier for earlier, later in zip(sent, sent[1:])] == [2.0] * 8
    assert clock.sleeps == [2.0] * 8


def test_a_robots_crawl_delay_slows_the_crawl_down(site, guard, tmp_path):
    (site.root / "robots.txt").write_text("User-agent: *\nCrawl-delay: 5\nDisallow: /private/\n")
    clock = FakeClock()
    sent: list[float] = []
    client = _client(guard, event_hooks={"request": [lambda request: sent.append(clock.now)]})
    _crawl(site, guard, tmp_path / "cache", clock, client=client, rate_limit_s=1.0, max_depth=0)
    assert [later - earlier for earlier, later in zip(sent, sent[1:])] == [5.0] * (len(sent) - 1)


def test_robots_txt_that_is_missing_allows_everything(site, guard, tmp_path):
    (site.root / "robots.txt").unlink()
    result = _crawl(site, guard, tmp_path / "cache", rate_limit_s=0)
    assert f"{site.base}/private/notes.html" in [page.url for page in result.pages]
    assert result.skipped == ()


def test_robots_txt_that_fails_skips_the_host(site, guard, tmp_path):
    site.failures["/robots.txt"] = 503
    result = _crawl(site, guard, tmp_path / "cache", rate_limit_s=0)
    assert result.pages == ()
    assert site.paths() == ["/robots.txt"]
    assert [(issue.url, issue.reason) for issue in result.errors] == [
        (f"{site.base}/robots.txt", "robots.txt unavailable (HTTP 503)")
    ]
    assert {issue.reason for issue in result.skipped} == {"host skipped: robots.txt unavailable (HTTP 503)"}


def test_a_timeout_is_recorded_and_the_crawl_goes_on(site, guard, tmp_path):
    site.slow["/ncu/launch.html"] = 1.0
    result = _crawl(site, guard, tmp_path / "cache", rate_limit_s=0, timeout_s=0.2)
    assert (f"{site.base}/ncu/launch.html", "timed out after 0.2 s") in [(i.url, i.reason) for i in result.errors]
    assert f"{site.base}/ncu/units.html" in [page.url for page in result.pages]


def test_unreachable_start_urls_are_errors_not_failures(site, guard, tmp_path):
    result = crawl(
        ["https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html"],
        {"https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html": "ncu"},
        cache_dir=tmp_path / "cache",
        client=_client(guard),
        clock=FakeClock(),
        sleep=FakeClock().sleep,
    )
    assert result.pages == ()
    assert guard.refused == ["https://docs.nvidia.com/robots.txt"]
    assert result.errors[0].reason.startswith("robots.txt unavailable (ConnectError")


def test_limits_on_depth_and_pages(site, guard, tmp_path):
    shallow = _crawl(site, guard, tmp_path / "a", rate_limit_s=0, max_depth=0)
    assert [page.url.rsplit("/", 1)[-1] for page in shallow.pages] == ["index.html", "topdown.txt"]
    few = _crawl(site, guard, tmp_path / "b", rate_limit_s=0, max_pages=3)
    assert len(few.pages) == 3


def test_progress_callback_and_a_profiler_function(site, guard, tmp_path):
    seen = []
    with _client(guard) as client:
        result = crawl(
            [f"{site.base}/ncu/start", f"{site.base}/perf/topdown.txt"],
            lambda url: "perf" if url.endswith(".txt") else "ncu",
            cache_dir=tmp_path / "cache",
            settings=CrawlSettings(rate_limit_s=0),
            client=client,
            on_page=seen.append,
        )
    assert tuple(seen) == result.pages
    assert [page.profiler for page in seen] == ["ncu", "perf", "ncu", "ncu"]


# --- the cache ---------------------------------------------------------------------------------


def test_cache_round_trip_and_unreadable_files(tmp_path):
    cache = HttpCache(tmp_path / "cache")
    url = "https://docs.nvidia.com/nsight-compute/ProfilingGuide/index.html"
    assert cache.get(url) is None
    stored = CachedResponse(
        url=url,
        body=b"<html>\n\x00\xff</html>",
        content_type="text/html",
        etag='"abc"',
        last_modified="Wed, 21 Oct 2015 07:28:00 GMT",
        fetched_at=12.5,
    )
    cache.put(stored)
    assert cache.get(url) == stored
    assert cache.path_for(url).name == hashlib.sha256(url.encode()).hexdigest() + ".http"
    assert stored.validators == {"If-None-Match": '"abc"', "If-Modified-Since": "Wed, 21 Oct 2015 07:28:00 GMT"}
    cache.path_for(url).write_bytes(cache.path_for(url).read_bytes()[:-3])  # truncated
    assert cache.get(url) is None
    cache.path_for(url).write_bytes(b"not json\nbody")
    assert cache.get(url) is None
    assert [path.name for path in (tmp_path / "cache").iterdir()] == [cache.path_for(url).name]

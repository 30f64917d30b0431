"""Dead-link check over the built site: every internal href and src in site/**/*.html must name a file of
the site and, when it has a #fragment, an id on that page. External links (with a scheme or //host) are not
fetched. Exit 1 and one line per dead link otherwise. ``python docs/gen/check_links.py [SITE_DIR]``."""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name == "id" or (name == "name" and tag == "a"):
                self.ids.add(value)
            elif name in ("href", "src"):
                self.links.append(value)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def _target(site: Path, page: Path, url: str) -> tuple[Path, str] | None:
    """The file and fragment an internal link points at; None for external links."""
    parts = urlsplit(url)
    if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:", "data:")):
        return None
    if not parts.path:
        return page, unquote(parts.fragment)
    base = site if parts.path.startswith("/") else page.parent
    target = (base / unquote(parts.path.lstrip("/"))).resolve()
    if target.is_dir():
        target = target / "index.html"
    return target, unquote(parts.fragment)


def dead_links(site: Path) -> list[str]:
    site = site.resolve()
    pages = {p.resolve(): _parse(p) for p in sorted(site.rglob("*.html"))}
    dead = []
    for path, page in pages.items():
        for url in page.links:
            found = _target(site, path, url)
            if found is None:
                continue
            target, fragment = found
            where = f"{path.relative_to(site)}: {url}"
            if not target.is_relative_to(site) or not target.exists():
                dead.append(f"{where} (no such file)")
            elif fragment and target.suffix == ".html" and fragment not in pages[target].ids:
                dead.append(f"{where} (no id {fragment!r} on the page)")
    return dead


def main(argv: list[str]) -> int:
    site = Path(argv[1] if len(argv) > 1 else "site")
    if not (site / "index.html").exists():
        print(f"{site}/index.html missing: build the site first (make docs)", file=sys.stderr)
        return 2
    dead = dead_links(site)
    for line in dead:
        print(f"dead link: {line}", file=sys.stderr)
    pages = sum(1 for _ in site.rglob("*.html"))
    print(f"checked the links of {pages} pages in {site}: {len(dead)} dead")
    return 1 if dead else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

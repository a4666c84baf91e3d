"""The page needs no internet: what Chainlit's page would fetch from other hosts, the app serves itself.

Chainlit 2.12's `index.html` links the Inter font from Google Fonts (with connections opened ahead to its two
hosts) and KaTeX's stylesheet from jsDelivr; at a client site without internet those requests fail or
hang. `serve_page_offline` makes Chainlit's page template point at the copies in `public/vendor/` (the
same KaTeX version Chainlit's bundle renders with, and Inter, both from npm, with their licences) and drops
the connections ahead. If a Chainlit upgrade changes these lines it stops the app at start-up rather than
letting the page reach out again.
"""

from __future__ import annotations

from web.chainlit_patches import chainlit_page, rewrite_page

LOCAL_COPIES = {
    '<link rel="preconnect" href="https://fonts.googleapis.com" />': "",
    '<link rel="preconnect" href="https://fonts.gstatic.com" crossorigin />': "",
    "https://fonts.googleapis.com/css2?family=Inter:wght@400;500;700&display=swap": "/public/vendor/inter/inter.css",
    "https://cdn.jsdelivr.net/npm/katex@0.16.22/dist/katex.min.css": "/public/vendor/katex/katex.min.css",
}


def serve_page_offline() -> None:
    missing = [line for line in LOCAL_COPIES if line not in chainlit_page()]
    if missing:
        raise RuntimeError(f"Chainlit's page no longer has {missing}: update web/offline.py for this Chainlit version.")

    def offline(page: str, root_path: str) -> str:
        for remote, local in LOCAL_COPIES.items():
            page = page.replace(remote, f"{root_path}{local}" if local else "")
        return page

    rewrite_page(offline)

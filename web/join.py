"""Join by QR code: where the app listens beyond this machine (`CHAT_HOST=0.0.0.0`, or one of its addresses; read
from Chainlit's own record of the address it serves on, so `chainlit run app.py --host 0.0.0.0` counts too), the
addresses visitors can open, printed with a QR code in the terminal as the app starts, and `GET /join`, a page for
the presenter to project: the same code, large, with the address in text (and, with logins on, that visitors need an
account). Codes are drawn by `segno`; the page is the app's own, offline.
"""

from __future__ import annotations

import html
import io
import ipaddress
import socket
import sys

import psutil
import segno
from chainlit.config import config
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from web.chainlit_patches import route_first

EVERY_NETWORK = ("0.0.0.0", "::", "")


def addresses(host: str, port: int) -> list[str]:
    """The addresses other machines reach the app at: this machine's IPv4 addresses on its networks (private ones,
    a LAN's, first) where it listens on all of them, else the one it listens on; none where it listens on this
    machine only."""
    if host not in EVERY_NETWORK:
        try:
            return [] if ipaddress.ip_address(host).is_loopback else [f"http://{host}:{port}"]
        except ValueError:  # a name
            return [] if host == "localhost" else [f"http://{host}:{port}"]
    found = {ipaddress.ip_address(entry.address) for entries in psutil.net_if_addrs().values() for entry in entries
             if entry.family == socket.AF_INET}
    usable = [address for address in found if not (address.is_loopback or address.is_link_local)]
    return [f"http://{address}:{port}" for address in sorted(usable, key=lambda address: (not address.is_private,
                                                                                           address))]


def code(url: str) -> segno.QRCode:
    return segno.make(url, error="m")


def listening() -> tuple[str, int]:
    """The host and port Chainlit serves on (its command line, or `CHAINLIT_HOST` / `CHAINLIT_PORT`)."""
    return config.run.host, config.run.port


def announce(logins: bool) -> None:
    """Print the addresses, and a QR code of the first, to the terminal the app was started in."""
    urls = addresses(*listening())
    if not urls:
        if listening()[0] in EVERY_NETWORK:
            print("==> Visitors: this machine has no network address; connect it to the LAN and restart.", flush=True)
        return
    print(f"==> Visitors join at: {'  '.join(urls)}" + ("  (logins on: visitors need an account)" if logins else ""))
    print(f"==> Scan to join {urls[0]} (for a projector: {urls[0]}/join):", flush=True)
    code(urls[0]).terminal(out=sys.stdout, compact=True)
    sys.stdout.flush()


def add_join_page(logins: bool) -> None:
    """`GET /join`: the page to project, and `GET /join/qr.png`, its code (sharp however large the projector draws
    it: the page scales it pixelated)."""
    urls = addresses(*listening())

    async def page(request: Request) -> Response:
        return HTMLResponse(projection(urls, logins))

    async def qr(request: Request) -> Response:
        if not urls:
            return Response("The app listens on this machine only: start it with CHAT_HOST=0.0.0.0.", status_code=404)
        image = io.BytesIO()
        code(urls[0]).save(image, kind="png", scale=8, border=4)
        return Response(image.getvalue(), media_type="image/png")

    route_first(Route("/join", page), Route("/join/qr.png", qr))


def projection(urls: list[str], logins: bool) -> str:
    """The page to project: the first address's code and the addresses in text; or how to let visitors in."""
    name = html.escape(config.ui.name)
    if urls:
        body = (f'<img src="/join/qr.png" alt="QR code: {html.escape(urls[0])}">'
                f'<p class="address" data-join-address>{html.escape(urls[0])}</p>'
                + "".join(f'<p class="other">{html.escape(url)}</p>' for url in urls[1:])
                + "<p>用手机扫码，或在浏览器中输入上面的地址（与本机在同一网络）。<br>"
                  "Scan with your phone's camera, or type the address (on the same network as this machine).</p>"
                + ("<p data-join-logins><strong>需要账号</strong>：请向工作人员索取。<br>"
                   "Visitors need an account: ask the staff.</p>" if logins else ""))
    else:
        body = ("<p>本应用只在本机监听，其他设备无法访问。用 <code>CHAT_HOST=0.0.0.0 ./run.sh</code> 启动后，访客即可扫码加入。<br>"
                "The app listens on this machine only. Start it with <code>CHAT_HOST=0.0.0.0 ./run.sh</code> for "
                "visitors to join by QR code.</p>")
    return f"""<!doctype html>
<html lang="zh-CN"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>扫码加入 Join · {name}</title>
<style>
  body {{ margin: 0; min-height: 100vh; display: flex; flex-direction: column; align-items: center;
         justify-content: center; gap: 1vh; font-family: sans-serif; text-align: center; background: #fff; color: #111; }}
  h1 {{ font-size: 5vh; margin: 0; }}
  img {{ width: min(62vh, 90vw); height: auto; image-rendering: pixelated; }}
  .address {{ font: bold 5vh monospace; margin: 0; }}
  .other {{ font: 2.5vh monospace; margin: 0; color: #555; }}
  p {{ font-size: 2.5vh; margin: 0.5vh 2vw; }}
</style></head>
<body><h1>扫码提问 · {name}<br><small>Scan to ask</small></h1>{body}</body></html>"""

"""The live dashboard: one static page and its script, shipped in the package (no
CDN, works offline). It polls the API; the data endpoints keep their auth.

The page shows only what the API answers (never a setting), sets text with
``textContent`` only, and is served with a Content-Security-Policy that lets it
load and fetch from this origin alone: even a key or value crafted to look like
markup cannot make it run a script or send the API token elsewhere.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

router = APIRouter(tags=["dashboard"], include_in_schema=False)
STATIC = Path(__file__).resolve().parent.parent / "static"
# The page's <style> is inline; everything else comes from this origin.
HEADERS = {
    "Content-Security-Policy": "default-src 'self'; style-src 'self' 'unsafe-inline'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
}


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/dashboard")


@router.get("/dashboard")
async def page() -> FileResponse:
    return FileResponse(STATIC / "dashboard.html", media_type="text/html", headers=HEADERS)


@router.get("/dashboard.js")
async def script() -> FileResponse:
    return FileResponse(STATIC / "dashboard.js", media_type="text/javascript", headers=HEADERS)

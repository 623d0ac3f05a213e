"""The live dashboard: one static page and its script, shipped in the package (no
CDN, works offline). It polls the API; the data endpoints keep their auth."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, RedirectResponse

router = APIRouter(tags=["dashboard"], include_in_schema=False)
STATIC = Path(__file__).resolve().parent.parent / "static"


@router.get("/")
async def root() -> RedirectResponse:
    return RedirectResponse("/dashboard")


@router.get("/dashboard")
async def page() -> FileResponse:
    return FileResponse(STATIC / "dashboard.html", media_type="text/html")


@router.get("/dashboard.js")
async def script() -> FileResponse:
    return FileResponse(STATIC / "dashboard.js", media_type="text/javascript")

"""The digest's charts as PNG images, for email: mail clients drop inline SVG, but show an image
attached to the message and referenced by ``cid:``. Drawn with Pillow at twice the size they
are shown at, so they stay sharp on high-density screens; the same geometry as the SVG ones."""

from __future__ import annotations

import io
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from PIL.Image import Image
    from PIL.ImageFont import FreeTypeFont, ImageFont

#: Pixels drawn per pixel shown.
SCALE = 2
BACKGROUND = "#ffffff"


@cache
def _font(size: int) -> FreeTypeFont | ImageFont:
    from PIL import ImageFont as Fonts

    return Fonts.load_default(size)


def _png(image: Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def sparkline_png(values: list[int], colour: str, width: int = 112, height: int = 28) -> bytes:
    """A line over ``values`` (oldest first), the last point marked; ``width`` × ``height`` as
    shown."""
    from PIL import Image as Images
    from PIL import ImageDraw

    w, h = width * SCALE, height * SCALE
    image = Images.new("RGB", (w, h), BACKGROUND)
    draw = ImageDraw.Draw(image)
    top = max(values) or 1
    step = (w - 8) / max(len(values) - 1, 1)
    points = [(4 + i * step, h - 6 - (v / top) * (h - 12)) for i, v in enumerate(values)]
    draw.line(points, fill=colour, width=2 * SCALE, joint="curve")
    x, y = points[-1]
    r = 2.5 * SCALE
    draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
    return _png(image)


def bars_png(rows: list[tuple[str, int]], ink: str, muted: str, colour: str, width: int = 560,
             bar_height: int = 18) -> bytes:
    """Horizontal bars, one per ``(name, value)``, named on the left, the value at the end."""
    from PIL import Image as Images
    from PIL import ImageDraw

    gap, name_width = 6, 170
    font = _font(13 * SCALE)
    w, h = width * SCALE, max(1, len(rows) * (bar_height + gap)) * SCALE
    image = Images.new("RGB", (w, h), BACKGROUND)
    draw = ImageDraw.Draw(image)
    top = max((value for _, value in rows), default=0) or 1
    room = (width - name_width - 48) * SCALE
    for i, (name, value) in enumerate(rows):
        y = i * (bar_height + gap) * SCALE
        middle = y + bar_height * SCALE / 2
        label = name.replace("_", " ")
        draw.text(((name_width - 8) * SCALE, middle), label, fill=ink, font=font, anchor="rm")
        length = max(2.0 * SCALE, room * value / top)
        left = name_width * SCALE
        draw.rounded_rectangle((left, y, left + length, y + bar_height * SCALE), radius=3 * SCALE, fill=colour)
        draw.text((left + length + 6 * SCALE, middle), str(value), fill=muted, font=font, anchor="lm")
    return _png(image)

"""The live classroom (``shapetrace live``): students predict each step on their own devices, the projector
shows what the class thought. Above app/ and render/ (it reuses their predict moments, answer checking and
page data), below cli/. The server needs the ``live`` extra (Starlette, Uvicorn, websockets, segno)."""

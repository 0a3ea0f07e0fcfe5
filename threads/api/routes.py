"""The root router of the JSON API: every resource router joined with ``add_router``, mounted by ``oam_site.api``.

``ROUTERS`` is the order they are joined in: the order of the OpenAPI
document's paths and of Django's URL patterns. No two resource routers share
a path (ninja answers a path from the first router holding it: a method only
the second one has would be a 405), so the order decides nothing else.
"""

from ninja import Router

from threads.api import (
    context,
    erasure,
    export,
    extraction,
    history,
    images,
    keys,
    links,
    memories,
    messages,
    profiles,
    records,
    review,
    search,
    threads,
)

#: The resource routers, each with its own tag, in the order they are joined.
ROUTERS = (
    threads.router,
    messages.router,
    memories.router,
    images.router,
    links.router,
    search.router,
    context.router,
    extraction.router,
    records.router,
    profiles.router,
    keys.router,
    erasure.router,
    history.router,
    export.router,
    review.router,
)

#: What ``oam_site.api`` mounts at ``/api/``: no tag of its own, so each operation carries its router's only.
router = Router()
for resource in ROUTERS:
    router.add_router("", resource)

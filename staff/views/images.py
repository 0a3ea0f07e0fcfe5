"""A thread's standalone images: the stored image (or a thumbnail), inline edit and delete, through the thread's
``memory.client.Thread``."""

from __future__ import annotations

from django.contrib import messages as flash
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from memory.reports import browse
from staff.forms import ImageEditForm, add_service_error
from staff.templatetags.staff_tags import domid
from staff.thumbnails import thumbnail
from staff.views.common import (
    DETAIL,
    INVALID,
    SERVICE_ERRORS,
    Edit,
    confirm,
    detail_url,
    found,
    open_thread,
    record_url,
    staff_required,
)
from staff.views.regions import detail_context, images_response


@require_POST
@staff_required
def image_edit(request: HttpRequest, project: str, thread_id: str, image_id: str) -> HttpResponse:
    """Edit a standalone image's description and metadata through ``Thread.update_image`` (spec: update_image).

    A new description is re-embedded (the image's search chunks are rewritten);
    new metadata is copied to its chunks. Only changed fields are sent. An
    image in a message is edited with its message. htmx: the ``#images`` region.
    """
    handle = open_thread(request, project, thread_id)
    row = found(browse.standalone_image_row, handle.row, image_id)
    form = ImageEditForm(request.POST)
    if form.is_valid():
        try:
            changes = form.changes(row)
            if changes:
                handle.api.update_image(image_id, **changes)
        except SERVICE_ERRORS as exc:
            add_service_error(form, exc)
    key = f"image-{domid(image_id)}"
    if not form.is_valid():
        edit = Edit("image", image_id, form)
        if request.htmx:
            return images_response(request, handle, edit=edit, status=INVALID, focus=key)
        return render(request, DETAIL, detail_context(handle, request, edit=edit), status=INVALID)
    if request.htmx:
        return images_response(request, handle, focus=key)
    flash.success(request, "Image saved.")
    return redirect(detail_url(handle, key))


@require_http_methods(["GET", "HEAD", "POST"])
@staff_required
def image_delete(request: HttpRequest, project: str, thread_id: str, image_id: str) -> HttpResponse:
    """GET: ask for confirmation. POST: ``Thread.delete_image`` (its search chunks go with it).

    Standalone images only: one in a message goes with its message (404 here).
    """
    handle = open_thread(request, project, thread_id)
    row = found(browse.standalone_image_row, handle.row, image_id)
    if request.method != "POST":
        return confirm(request, handle, kind="image", record=row,
                       action=record_url(handle, "image_delete", image_id),
                       text=f"{row.mime_type}, {row.width}×{row.height} px: {row.description or '(no description)'}")
    if not handle.api.delete_image(image_id):  # expired meanwhile: the spec's delete sees live images only
        raise Http404(f"no live image {image_id!r}")
    if request.htmx:
        return images_response(request, handle, focus="images-heading")
    flash.success(request, "Image deleted.")
    return redirect(detail_url(handle, "images"))


@require_safe
@staff_required
def image(request: HttpRequest, project: str, thread_id: str, image_id: str) -> HttpResponse:
    """An image of the thread as stored (``?thumb=1``: a PNG thumbnail of at most 160 px a side).

    Served with its validated MIME type, ``nosniff`` and a CSP that runs nothing.
    """
    handle = open_thread(request, project, thread_id)
    row = found(browse.image_data, handle.row, image_id)
    data, mime_type = bytes(row.data), row.mime_type
    if "thumb" in request.GET:
        try:
            data, mime_type = thumbnail(data)
        except OSError:
            raise Http404(f"image {image_id!r} cannot be decoded") from None
    response = HttpResponse(data, content_type=mime_type)
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'"
    response["Cache-Control"] = "private, max-age=300"
    return response

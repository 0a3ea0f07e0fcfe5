"""Forms of the staff pages: they parse what a person typed; ``memory`` validates what it means.

Each form turns its fields into the keyword arguments of one ``memory``
call (``memory.client`` spec methods or ``memory.services``), leaving out
what was not given so the spec's defaults apply. Rules the engine owns (id
lengths, TTL limits, the metadata-filter grammar, relation endpoints) are
checked there; ``add_service_error`` puts the ``ValueError``/``TypeError``/
``KeyError`` it raises next to the field it names.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.forms.renderers import DjangoTemplates
from django.forms.utils import flatatt
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from memory.context.cards import CARD_RECORD_TYPES
from memory.core.errors import DomainError
from memory.core.valid_time import WINDOW_FIELDS, as_instant
from memory.llm.prompts import BUILTIN_RELATIONS
from memory.models import MEMORY_TYPES, RECORD_TYPES, STATUSES
from memory.records.metadata_filter import compile_filter

CUSTOM_RELATION = "custom"
TTL_ANCHORS = [("", "creation time (default)"), ("created_at", "creation time"), ("timestamp", "event timestamp")]


class JsonObjectField(forms.CharField):
    """A JSON object typed into a textarea: blank is None, anything but an object is an error."""

    widget = forms.Textarea(attrs={"rows": 2, "spellcheck": "false"})

    def __init__(self, **kwargs: Any):
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_python(self, value: Any) -> dict[str, Any] | None:
        text = (super().to_python(value) or "").strip()
        if not text:
            return None
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
        if not isinstance(data, dict):
            raise ValidationError('must be a JSON object, like {"source": "chat"}')
        return data


class StaffFormRenderer(DjangoTemplates):
    """Django's form rendering, with each field group in a ``<div class="field">`` (``staff/field.html``)."""

    field_template_name = "staff/field.html"


class PlainSelect(forms.Select):
    """A ``<select>`` rendered in Python: Django renders each option through a template, slow for long lists.

    Attributes (``id``, ``aria-invalid``, ``aria-describedby`` ...) are the ones Django passes in.
    """

    def render(self, name, value, attrs=None, renderer=None):
        final = {**self.build_attrs(self.attrs, attrs), "name": name}
        chosen = "" if value is None else str(value)
        options = format_html_join("", '<option value="{}"{}>{}</option>', (
            (choice, mark_safe(" selected") if str(choice) == chosen else "", label) for choice, label in self.choices))
        return format_html("<select{}>{}</select>", flatatt(final), options)


class StaffForm(forms.Form):
    """Base of the staff forms: rendered by ``StaffFormRenderer``, labels without a trailing colon."""

    default_renderer = StaffFormRenderer()

    def __init__(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("label_suffix", "")
        super().__init__(*args, **kwargs)


def add_service_error(form: forms.Form, exc: Exception, aliases: dict[str, str] | None = None) -> None:
    """Show an error raised by ``memory`` next to the form field it names, else above the form.

    ``exc.field`` (``memory.core.errors``) is a parameter name, possibly a path
    (``metadata_filter.tags.$not``, ``messages[0].role``); its root is looked
    up among the form's fields, through ``aliases`` first. A path keeps its
    full name in the message.
    """
    field = getattr(exc, "field", None) or ""
    message = getattr(exc, "message", None) or str(exc)
    root = re.split(r"[\[.]", field, maxsplit=1)[0]
    name = (aliases or {}).get(root, root)
    if field and field != root:
        message = f"{field}: {message}"
    if name in form.fields:
        form.add_error(name, message)
    else:
        form.add_error(None, f"{field}: {message}" if field and field == root else message)


def given(data: dict[str, Any], *names: str) -> dict[str, Any]:
    """The entries of ``data`` among ``names`` whose value is not None or "" (omitted ones keep spec defaults)."""
    return {name: data[name] for name in names if data.get(name) not in (None, "")}


# --- threads ------------------------------------------------------------------------------


class ThreadFilterForm(StaffForm):
    """Thread list filters (GET): id substring, exact user/agent, a metadata filter on the thread."""

    q = forms.CharField(required=False, label="Thread, user or agent id contains", max_length=255)
    user_id = forms.CharField(required=False, label="User id", max_length=255)
    agent_id = forms.CharField(required=False, label="Agent id", max_length=255)
    metadata = JsonObjectField(label="Metadata filter (JSON)", help_text='e.g. {"sample_id": "conv-26"}')

    def clean_metadata(self) -> dict[str, Any] | None:
        """Check the filter against the spec's grammar here, so the error shows next to the field."""
        value = self.cleaned_data["metadata"]
        try:
            compile_filter(value)
        except DomainError as exc:
            raise ValidationError(str(exc)) from None
        return value


# --- messages and memories ----------------------------------------------------------------


class MessageEditForm(StaffForm):
    """Inline edit of a message (spec: update_message): content and metadata.

    A message stored as ordered parts (text and images) is edited part by part:
    one ``part-<i>`` field per text part; image parts are kept as they are
    (sent back by id, so ``update_message`` keeps them rather than deleting them).
    """

    content = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    metadata = JsonObjectField()

    def __init__(self, *args: Any, message=None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.message = message
        self.parts = list(message.parts or []) if message is not None else []
        for i, part in enumerate(self.parts):
            if part.get("type") == "text":
                self.fields[f"part-{i}"] = forms.CharField(required=False, strip=False, widget=forms.Textarea)

    def changes(self) -> dict[str, Any]:
        """``update_message`` keywords for what differs from the stored message (unchanged: omitted).

        Omitting unchanged content matters: new content is re-embedded and re-extracted.
        """
        data, message = self.cleaned_data, self.message
        out: dict[str, Any] = {}
        if self.parts:
            new_parts = [
                {"type": "text", "id": part["id"], "text": data[f"part-{i}"], "timestamp": part.get("timestamp")}
                if part.get("type") == "text" else {"type": "image", "id": part["id"]}
                for i, part in enumerate(self.parts)
            ]
            if any(part.get("type") == "text" and data[f"part-{i}"] != part["text"]
                   for i, part in enumerate(self.parts)):
                out["content"] = new_parts
        elif data["content"] != message.content:
            out["content"] = data["content"]
        if (data["metadata"] or {}) != (message.metadata or {}):
            out["metadata"] = data["metadata"] or {}
        return out


class _TtlFields(StaffForm):
    ttl_days = forms.IntegerField(required=False, label="TTL (days)")
    ttl_anchor = forms.ChoiceField(required=False, choices=TTL_ANCHORS, label="TTL counted from")


class _WindowFields(StaffForm):
    """A memory's validity window (issue #32): ISO-8601 dates or date-times, empty for an open side; the
    service checks them (``memory.core.valid_time``) and its error lands on the field it names."""

    valid_from = forms.CharField(required=False, max_length=64, label="Valid from (ISO-8601; empty: open)")
    valid_to = forms.CharField(required=False, max_length=64, label="Valid to, excluded (ISO-8601; empty: open)")


class MemoryEditForm(_TtlFields, _WindowFields):
    """Inline edit of a memory: content, type, status, TTL and validity window (spec: update_memory; type:
    services; the window: issue #32)."""

    content = forms.CharField(strip=False, widget=forms.Textarea)
    memory_type = forms.ChoiceField(choices=[(t, t) for t in MEMORY_TYPES])
    status = forms.ChoiceField(choices=[(s, s) for s in STATUSES])
    no_expiry = forms.BooleanField(required=False, label="No expiry (or the maximum TTL when one is configured)")

    def clean(self):
        data = super().clean()
        if data.get("no_expiry") and data.get("ttl_days") is not None:
            self.add_error("ttl_days", "leave empty when 'No expiry' is ticked")
        return data

    def changes(self, memory) -> dict[str, Any]:
        """``services.memory_update`` keywords for what differs from the stored ``memory``.

        A TTL refresh happens only when days are given or "no expiry" is ticked
        (spec: ``ttl_days=None`` clears the expiry, or applies the maximum). A
        window bound is sent when the form posted its field and it names another
        instant than the stored one (empty: clear it); a post without the field
        keeps it.
        """
        data = self.cleaned_data
        out: dict[str, Any] = {}
        for name in ("content", "memory_type", "status"):
            if data[name] != getattr(memory, name):
                out[name] = data[name]
        for name in WINDOW_FIELDS:
            given_value = (data[name].strip() or None) if name in self.data else getattr(memory, name)
            given = as_instant(given_value) if given_value is not None else None
            if given != getattr(memory, name) or (given_value is not None and given is None):
                out[name] = given_value  # an unreadable value too (as_instant: None): the service names the field
        if data["no_expiry"]:
            out["ttl_days"] = None
        elif data["ttl_days"] is not None:
            out["ttl_days"] = data["ttl_days"]
        if data["ttl_anchor"]:  # spec: an anchor alone refreshes with the default duration
            out["ttl_anchor"] = data["ttl_anchor"]
        return out


class MemoryAddForm(_TtlFields, _WindowFields):
    """A manual memory (spec: add_memory): content, type, status, metadata, event timestamp, TTL, validity window.

    Field names carry the prefix ``add-`` (``add-content`` ...): the thread page holds other forms too.
    """

    prefix = "add"

    content = forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 2}))
    memory_type = forms.ChoiceField(choices=[(t, t) for t in MEMORY_TYPES], initial="memory", label="Type")
    status = forms.ChoiceField(choices=[(s, s) for s in STATUSES], initial="valid")
    metadata = JsonObjectField(label="Metadata (JSON)")
    timestamp = forms.CharField(required=False, label="Event timestamp (ISO-8601)", max_length=64)

    def arguments(self) -> dict[str, Any]:
        """``Thread.add_memory`` keywords (content first); omitted optional fields keep spec defaults."""
        data = self.cleaned_data
        out = {"content": data["content"], "memory_type": data["memory_type"], "status": data["status"]}
        out.update(given(data, "metadata", "timestamp", "ttl_days", "ttl_anchor", *WINDOW_FIELDS))
        return out


class ImageEditForm(StaffForm):
    """Inline edit of a standalone image (spec: update_image): its description and metadata.

    A blank description is sent as "" (the image then has no search chunk);
    ``update_image`` reads None as "ask the LLM", which this form never sends.
    """

    description = forms.CharField(required=False, strip=False, widget=forms.Textarea)
    metadata = JsonObjectField()

    def changes(self, image) -> dict[str, Any]:
        """``Thread.update_image`` keywords for what differs from the stored ``image`` (unchanged: omitted).

        Omitting an unchanged description matters: a new one is re-embedded.
        """
        data = self.cleaned_data
        out: dict[str, Any] = {}
        if data["description"] != (image.description or ""):
            out["description"] = data["description"]
        if (data["metadata"] or {}) != (image.metadata or {}):
            out["metadata"] = data["metadata"] or {}
        return out


class RelationForm(StaffForm):
    """A relation between two memories of the thread (spec: link_records). Field names: ``rel-...``."""

    prefix = "rel"

    source_record_id = forms.ChoiceField(label="Source memory", widget=PlainSelect)
    relation_type = forms.ChoiceField(
        label="Relation", choices=[(k, k) for k in BUILTIN_RELATIONS] + [(CUSTOM_RELATION, "custom…")])
    custom_relation_type = forms.CharField(required=False, label="Custom relation name", max_length=64)
    target_record_id = forms.ChoiceField(label="Target memory", widget=PlainSelect)

    def __init__(self, *args: Any, memories=(), **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.types = {m.public_id: m.memory_type for m in memories}
        choices = [("", "— choose —")] + [(m.public_id, f"[{m.memory_type}] {m.content[:60]}") for m in memories]
        self.fields["source_record_id"].choices = choices
        self.fields["target_record_id"].choices = choices

    def clean(self):
        data = super().clean()
        if data.get("relation_type") == CUSTOM_RELATION and not (data.get("custom_relation_type") or "").strip():
            self.add_error("custom_relation_type", "name the custom relation")
        return data

    def arguments(self) -> dict[str, Any]:
        """``Thread.link_records`` keywords, record types taken from the stored memories."""
        data = self.cleaned_data
        kind = data["relation_type"]
        return {
            "source_record_id": data["source_record_id"],
            "source_record_type": self.types[data["source_record_id"]],
            "target_record_id": data["target_record_id"],
            "target_record_type": self.types[data["target_record_id"]],
            "relation_type": data["custom_relation_type"].strip() if kind == CUSTOM_RELATION else kind,
        }


# --- search and context cards ---------------------------------------------------------------


class SearchForm(StaffForm):
    """The search playground (``AgentMemory.search_project``: an omitted id leaves its dimension open)."""

    query = forms.CharField(label="Query", max_length=2000)
    user_id = forms.CharField(required=False, label="User id", max_length=255)
    agent_id = forms.CharField(required=False, label="Agent id", max_length=255)
    thread_id = forms.CharField(required=False, label="Thread id", max_length=255)
    record_types = forms.MultipleChoiceField(
        required=False, choices=[(t, t) for t in RECORD_TYPES], widget=forms.CheckboxSelectMultiple,
        label="Record types (none ticked: all)")
    metadata_filter = JsonObjectField(label="Metadata filter (JSON)", help_text='e.g. {"session": 3}')
    max_results = forms.IntegerField(required=False, label="Max results", help_text="default 10")
    num_hops = forms.IntegerField(required=False, label="Relation hops (0-5)")
    include_invalid_results = forms.BooleanField(required=False, initial=True, label="Include invalid records")

    def arguments(self) -> dict[str, Any]:
        """``AgentMemory.search_project`` keywords (query first)."""
        data = self.cleaned_data
        out = {"query": data["query"], "include_invalid_results": data["include_invalid_results"]}
        out.update(given(data, "user_id", "agent_id", "thread_id", "metadata_filter", "max_results", "num_hops"))
        if data["record_types"]:
            out["record_types"] = list(data["record_types"])
        return out


class ContextCardForm(StaffForm):
    """``get_context_card`` options (spec); blank fields take the spec's defaults."""

    fallback_message_count = forms.IntegerField(required=False, help_text="default 5")
    max_relevant_results = forms.IntegerField(required=False, help_text="default 5")
    token_budget = forms.IntegerField(required=False, help_text="default: the search config's; <= 0 disables")
    soft_token_budget = forms.IntegerField(required=False, help_text="default: the search config's; <= 0 disables")
    max_recent_messages = forms.IntegerField(required=False, help_text="default 0")
    except_last_messages = forms.IntegerField(required=False, help_text="default 0")
    metadata_filter = JsonObjectField(label="Metadata filter (JSON)")
    include_invalid_results = forms.BooleanField(required=False, initial=True, label="Include invalid records")

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for record_type in CARD_RECORD_TYPES:
            self.fields[f"min_{record_type}"] = forms.IntegerField(
                required=False, label=f"Minimum {record_type} results")

    @property
    def minimum_fields(self):
        """The per-type minimum fields, for the template."""
        return [self[f"min_{t}"] for t in CARD_RECORD_TYPES]

    @property
    def option_fields(self):
        """The count and budget fields, for the template."""
        return [self[name] for name in ("fallback_message_count", "max_relevant_results", "token_budget",
                                        "soft_token_budget", "max_recent_messages", "except_last_messages")]

    def arguments(self) -> dict[str, Any]:
        """``Thread.get_context_card`` keywords."""
        data = self.cleaned_data
        out = given(data, "fallback_message_count", "max_relevant_results", "token_budget", "soft_token_budget",
                    "max_recent_messages", "except_last_messages", "metadata_filter")
        minimums = {t: data[f"min_{t}"] for t in CARD_RECORD_TYPES if data.get(f"min_{t}") is not None}
        if minimums:
            out["min_relevant_results_by_type"] = minimums
        out["include_invalid_results"] = data["include_invalid_results"]
        return out



# --- the quality dashboard ----------------------------------------------------------------------


#: The ranges ``memory.reports.quality`` offers, as the dashboard names them.
QUALITY_RANGES = [(1, "last 24 hours (hourly)"), (7, "last 7 days (daily)"), (30, "last 30 days (daily)"),
                  (90, "last 90 days (weekly)"), (365, "last year (weekly)")]


class QualityForm(StaffForm):
    """The quality dashboard's range (GET ``days``; the view puts ``memory.reports.quality.DEFAULT_DAYS`` in for
    a blank)."""

    days = forms.TypedChoiceField(required=False, coerce=int, empty_value=None, label="Range",
                                  choices=[(str(d), label) for d, label in QUALITY_RANGES], widget=PlainSelect)

    def arguments(self) -> dict[str, Any]:
        """``memory.reports.quality.dashboard`` keywords: ``days`` when given."""
        return given(self.cleaned_data, "days")


# --- the review queue (memory.records.review_rules) -------------------------------------------------------------


class ReviewFilterForm(StaffForm):
    """Review queue filters (GET): one thread (exact public id), one memory type."""

    thread_id = forms.CharField(required=False, label="Thread id", max_length=255)
    memory_type = forms.ChoiceField(required=False, choices=[("", "any"), *[(t, t) for t in MEMORY_TYPES]],
                                    label="Type")

    def arguments(self) -> dict[str, Any]:
        """``memory.records.review_rules.pending_queryset`` filters for what was given."""
        return given(self.cleaned_data, "thread_id", "memory_type")


class ReviewDecisionForm(StaffForm):
    """Approve or reject a pending memory: an optional note, kept as the reason of the history entry."""

    reason = forms.CharField(required=False, label="Note (kept in the history)", max_length=400)

    def arguments(self) -> dict[str, Any]:
        """``services.memory_approve``/``memory_reject`` keywords."""
        return {"reason": self.cleaned_data["reason"]}


class ReviewEditForm(ReviewDecisionForm):
    """Edit a pending memory, then approve it: content, type and an optional note."""

    content = forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 3}))
    memory_type = forms.ChoiceField(choices=[(t, t) for t in MEMORY_TYPES], label="Type")

    def arguments(self, memory=None) -> dict[str, Any]:
        """``services.memory_edit_approve`` keywords: the content and the type when they differ from ``memory``'s."""
        data = self.cleaned_data
        out = {"reason": data["reason"]}
        for name in ("content", "memory_type"):
            if memory is None or data[name] != getattr(memory, name):
                out[name] = data[name]
        return out

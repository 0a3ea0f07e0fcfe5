"""A small relation graph as server-rendered SVG geometry (no JavaScript library).

``relation_graph`` places the memories that take part in relations on a
circle and draws each relation as an arrow from source to target with its
label at the middle. The template ``staff/partials/relation_graph.html``
turns the result into ``<svg>``. Coordinates are SVG user units (pixels at
100 % zoom).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memory.core.ids import public_id

#: Nodes drawn at most; relations touching others are listed only (``Graph.omitted``).
MAX_NODES = 16
NODE_RADIUS = 18
#: Smallest ring radius, arc between neighbouring node centres, room around the ring for labels.
MIN_RING = 110
NODE_SPACING = 3.4 * NODE_RADIUS
LABEL_MARGIN = 96
LABEL_CHARS = 16


@dataclass
class Node:
    """One memory: centre ``x``/``y``, its id, type, status, a short label at ``lx``/``ly`` anchored ``anchor``."""

    record_id: str
    x: float
    y: float
    memory_type: str
    status: str
    label: str
    lx: float = 0.0
    ly: float = 0.0
    anchor: str = "middle"


@dataclass
class Edge:
    """One relation: a line between two node rims and the label's position."""

    relation_type: str
    x1: float
    y1: float
    x2: float
    y2: float
    lx: float
    ly: float


@dataclass
class Graph:
    """SVG geometry: ``size`` x ``size`` canvas, nodes and edges; ``omitted`` relations not drawn."""

    size: int
    nodes: list[Node]
    edges: list[Edge]
    omitted: int


def _short(text: str, limit: int = LABEL_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def relation_graph(relations) -> Graph | None:
    """Lay out ``relations`` (``memory.reports.browse.RelationView`` items); None when there is nothing to draw.

    Nodes are the relations' endpoints in first-seen order, at most
    ``MAX_NODES``; relations touching a node beyond that are counted in
    ``omitted``. Endpoints missing from the thread are drawn with their (public) id.
    """
    order: dict[str, tuple[str, str, str]] = {}
    for view in relations:
        for rid, row in ((view.link.source_id, view.source), (view.link.target_id, view.target)):
            if rid not in order:
                order[rid] = ((row.memory_type, row.status, _short(row.content)) if row
                              else ("memory", "gone", _short(public_id(rid))))
    if not order:
        return None
    ids = list(order)[:MAX_NODES]
    # Neighbours stay NODE_SPACING apart along the ring; labels sit outside it, pointing away from the centre.
    ring = max(MIN_RING, len(ids) * NODE_SPACING / (2 * math.pi)) if len(ids) > 1 else 0
    size = int(2 * (ring + NODE_RADIUS + LABEL_MARGIN))
    centre = size / 2
    nodes: dict[str, Node] = {}
    for i, rid in enumerate(ids):
        angle = 2 * math.pi * i / len(ids) - math.pi / 2
        cos, sin = math.cos(angle), math.sin(angle)
        kind, status, label = order[rid]
        reach = ring + NODE_RADIUS + 6
        nodes[rid] = Node(record_id=rid, x=round(centre + ring * cos, 1), y=round(centre + ring * sin, 1),
                          memory_type=kind, status=status, label=label,
                          lx=round(centre + reach * cos, 1), ly=round(centre + reach * sin + 3 + 6 * sin, 1),
                          anchor="start" if cos > 0.3 else "end" if cos < -0.3 else "middle")
    edges: list[Edge] = []
    omitted = 0
    for view in relations:
        a, b = nodes.get(view.link.source_id), nodes.get(view.link.target_id)
        if a is None or b is None:
            omitted += 1
            continue
        if a is b:  # a self-relation cannot be stored (link_records refuses it); never draw one
            continue
        dx, dy = b.x - a.x, b.y - a.y
        length = math.hypot(dx, dy) or 1.0
        ux, uy = dx / length, dy / length
        gap = NODE_RADIUS + 4  # the arrow head stops at the target's rim
        edges.append(Edge(
            relation_type=view.link.relation_type,
            x1=round(a.x + ux * NODE_RADIUS, 1), y1=round(a.y + uy * NODE_RADIUS, 1),
            x2=round(b.x - ux * gap, 1), y2=round(b.y - uy * gap, 1),
            lx=round((a.x + b.x) / 2, 1), ly=round((a.y + b.y) / 2 - 4, 1),
        ))
    return Graph(size=size, nodes=list(nodes.values()), edges=edges, omitted=omitted)

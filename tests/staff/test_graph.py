"""The relation graph's SVG geometry (staff.graph): no database, plain values."""

import itertools
import math
from types import SimpleNamespace

from staff.graph import MAX_NODES, NODE_RADIUS, relation_graph


def view(source, target, kind="supports", rows=True):
    row = (lambda rid: SimpleNamespace(memory_type="fact", status="valid", content=f"memory {rid} " * 5)) if rows \
        else (lambda rid: None)
    return SimpleNamespace(link=SimpleNamespace(source_id=source, target_id=target, relation_type=kind),
                           source=row(source), target=row(target))


def test_nothing_to_draw():
    assert relation_graph([]) is None


def test_arrows_run_rim_to_rim_and_nodes_never_overlap():
    chain = [view(f"m{i}", f"m{i - 1}") for i in range(1, 12)]
    graph = relation_graph(chain)
    assert len(graph.nodes) == 12 and len(graph.edges) == 11 and graph.omitted == 0
    nodes = {n.record_id: n for n in graph.nodes}
    for a, b in itertools.combinations(graph.nodes, 2):
        assert math.dist((a.x, a.y), (b.x, b.y)) >= 3 * NODE_RADIUS
    for edge, relation in zip(graph.edges, chain):
        source, target = nodes[relation.link.source_id], nodes[relation.link.target_id]
        assert math.isclose(math.dist((edge.x1, edge.y1), (source.x, source.y)), NODE_RADIUS, abs_tol=0.2)
        assert math.isclose(math.dist((edge.x2, edge.y2), (target.x, target.y)), NODE_RADIUS + 4, abs_tol=0.2)
    for node in graph.nodes:  # everything inside the canvas, labels short
        assert NODE_RADIUS <= node.x <= graph.size - NODE_RADIUS and NODE_RADIUS <= node.y <= graph.size - NODE_RADIUS
        assert len(node.label) <= 16


def test_big_threads_draw_the_first_nodes_and_count_the_rest():
    star = [view("hub", f"m{i}") for i in range(40)]
    graph = relation_graph(star)
    assert len(graph.nodes) == MAX_NODES and graph.omitted == 40 - (MAX_NODES - 1)
    assert len(graph.edges) == MAX_NODES - 1


def test_missing_endpoints_are_drawn_with_their_id():
    # stored ids (memory.records.tenancy); labels show public ones
    graph = relation_graph([view("1:a", "1:b", rows=False)])
    assert [(n.record_id, n.status, n.label) for n in graph.nodes] == [("1:a", "gone", "a"), ("1:b", "gone", "b")]

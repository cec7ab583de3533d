"""sg.to_dot / sg.render: DOT text parsed by a small DOT parser and checked structurally."""

from __future__ import annotations

import html
import os
import re
import shutil
import stat
import subprocess
from dataclasses import dataclass, field

import numpy as np
import pytest

import srcgrad as sg
from srcgrad.base.errors import SrcgradError

# ---------------------------------------------------------------- a small DOT parser

_TOKEN = re.compile(
    r'\s*(?:(->)|("(?:[^"\\]|\\.)*")|(<)|([A-Za-z_][A-Za-z0-9_]*|-?[0-9.]+)|([{}\[\];=,:]))'
)


def _html_end(text: str, pos: int) -> int:
    """The end of the HTML string `<...>` that starts at `pos` (its brackets balance)."""
    depth = 0
    for k in range(pos, len(text)):
        depth += {"<": 1, ">": -1}.get(text[k], 0)
        if depth == 0:
            return k + 1
    raise AssertionError("an HTML label is not closed")


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m is not None, f"bad DOT at {text[pos : pos + 40]!r}"
        if m.group(3):  # an HTML-like label, kept whole
            end = _html_end(text, m.start(3))
            out.append(text[m.start(3) : end])
            pos = end
            continue
        out.append(next(g for g in m.groups() if g is not None))
        pos = m.end()
    return out


@dataclass
class Graph:
    """What the parser collects: nodes (with attrs and cluster path), edges, clusters."""

    nodes: dict[str, dict[str, str]] = field(default_factory=dict)
    node_cluster: dict[str, tuple[str, ...]] = field(default_factory=dict)
    edges: list[tuple[str, str | None, str, str | None, dict[str, str]]] = field(
        default_factory=list
    )
    clusters: dict[str, dict[str, str]] = field(default_factory=dict)
    cluster_parent: dict[str, str | None] = field(default_factory=dict)


def _unquote(tok: str) -> str:
    if tok.startswith("<"):  # an HTML-like label: its markup, without the outer brackets
        return tok[1:-1]
    if not tok.startswith('"'):
        return tok
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), tok[1:-1])


def parse(text: str) -> Graph:
    """A recursive-descent parser for the DOT subset: digraph, subgraphs, node and edge
    statements with attribute lists, graph attributes `a=b;`, ports `n:p`."""
    toks, g = _tokens(text), Graph()
    i = 0

    def take(expected: str | None = None) -> str:
        nonlocal i
        tok = toks[i]
        assert expected is None or tok == expected, (expected, tok, toks[i - 5 : i + 5])
        i += 1
        return tok

    def attrs() -> dict[str, str]:
        out: dict[str, str] = {}
        take("[")
        while toks[i] != "]":
            k = take()
            take("=")
            out[k] = _unquote(take())
            if toks[i] in (",", ";"):
                take()
        take("]")
        return out

    def endpoint() -> tuple[str, str | None]:
        tok = take()
        assert re.match(r'[A-Za-z_"]', tok), f"a node name expected, got {tok!r}"
        name = _unquote(tok)
        port = None
        if toks[i] == ":":
            take(":")
            port = take()
        return name, port

    def body(path: tuple[str, ...]) -> None:
        take("{")
        while toks[i] != "}":
            if toks[i] == "subgraph":
                take()
                name = take()
                g.clusters[name] = {}
                g.cluster_parent[name] = path[-1] if path else None
                body(path + (name,))
                continue
            if toks[i] in ("node", "edge", "graph") and toks[i + 1] == "[":
                take()
                attrs()
            elif toks[i + 1] == "=":  # a graph attribute
                k = take()
                take("=")
                if path:
                    g.clusters[path[-1]][k] = _unquote(take())
                else:
                    take()
            else:
                src = endpoint()
                if toks[i] == "->":
                    take()
                    dst = endpoint()
                    a = attrs() if toks[i] == "[" else {}
                    g.edges.append((src[0], src[1], dst[0], dst[1], a))
                else:
                    g.nodes[src[0]] = attrs() if toks[i] == "[" else {}
                    g.node_cluster[src[0]] = path
            if toks[i] == ";":
                take()
        take("}")

    try:
        take("digraph")
        take()
        body(())
    except IndexError:
        raise AssertionError("the text ends inside the graph") from None
    assert i == len(toks), "text after the graph"
    return g


def _ports(label: str) -> set[str]:
    return set(re.findall(r'PORT="([A-Za-z0-9_]+)"', label))


def check_wellformed(g: Graph) -> None:
    """Edges join declared nodes at ports their HTML labels declare."""
    for src, sp, dst, dp, _ in g.edges:
        assert src in g.nodes and dst in g.nodes, (src, dst)
        for node, port in ((src, sp), (dst, dp)):
            if port is not None:
                assert port in _ports(g.nodes[node]["label"]), (node, port, g.nodes[node]["label"])


def op_nodes(g: Graph) -> dict[str, str]:
    """Op node id -> op type."""
    return {
        n: re.search(r"<B>(\w+)</B>", a["label"]).group(1)  # type: ignore[union-attr]
        for n, a in g.nodes.items()
        if a.get("shape") == "plain"
    }


def test_parser_rejects_broken_text() -> None:
    with pytest.raises(AssertionError):
        parse('digraph g { a -> b [label="x"]; ')
    with pytest.raises(AssertionError):
        parse("digraph g { a -> ; }")


# ---------------------------------------------------------------- programs


def _fluid_program() -> tuple[sg.Program, list]:
    prog = sg.Program()
    with sg.program_guard(prog):
        x = sg.data("x", shape=(4, 3), dtype="float32")
        w = sg.parameter("w", shape=(3, 2), dtype="float32")
        b = sg.parameter("b", shape=(2,), dtype="float32")
        loss = sg.mean(sg.relu(x @ w + b))
        pg = sg.append_backward(loss)
    return prog, pg


def test_fluid_program_forward_and_backward_clusters() -> None:
    prog, pg = _fluid_program()
    text = sg.to_dot(prog)
    g = parse(text)
    check_wellformed(g)
    assert set(g.clusters) == {"cluster_b0", "cluster_b0_forward", "cluster_b0_backward"}
    assert g.clusters["cluster_b0_forward"]["label"] == "forward"
    assert g.clusters["cluster_b0_backward"]["label"] == "backward"
    ops = op_nodes(g)
    fwd = [t for n, t in ops.items() if g.node_cluster[n][-1] == "cluster_b0_forward"]
    bwd = [n for n in ops if g.node_cluster[n][-1] == "cluster_b0_backward"]
    assert fwd == ["matmul", "add", "relu", "reduce_sum", "constant", "divide"]
    assert len(fwd) + len(bwd) == len(prog.global_block().ops)
    assert ops[bwd[0]] == "fill_constant"  # the seed of the loss's gradient is backward
    # every input port of every op has one edge in, from an output port or an input's box
    for op_id in ops:
        ins = [e for e in g.edges if e[2] == op_id and e[3] is not None and "style" not in e[4]]
        assert sorted(e[3] for e in ins) == sorted(
            p for p in _ports(g.nodes[op_id]["label"]) if p.startswith("i")
        )
        assert all(e[1] is not None or g.nodes[e[0]]["shape"] == "box" for e in ins)
    boxes = {n: a["label"].split("\n")[0] for n, a in g.nodes.items() if a["shape"] == "box"}
    assert sorted(boxes.values()) == ["b", "w", "x"]
    # w -> the op that makes w@GRAD, dashed
    grads = {
        (boxes[s], g.nodes[d]["label"]) for s, _, d, _, a in g.edges if a.get("style") == "dashed"
    }
    for p, gv in pg:
        assert any(name == p.name and f"{gv.name}:" in label for name, label in grads), p.name


def test_traced_program_with_loop_has_one_cluster_per_block() -> None:
    def f(x):
        def body(c):
            i, v = c
            return i + 1, sg.sin(v) * 1.5

        return sg.sum(sg.while_loop(lambda c: c[0] < 3, body, (0, x))[1])

    prog = sg.trace(sg.grad(f), np.ones(3))
    g = parse(sg.to_dot(prog))
    check_wellformed(g)
    blocks = {name for name in g.clusters if re.fullmatch(r"cluster_b\d+", name)}
    assert blocks == {f"cluster_b{b.idx}" for b in prog.blocks}
    grad_blocks = [b for b in prog.blocks if b.forward_block_idx >= 0]
    assert grad_blocks
    for b in prog.blocks:
        label = g.clusters[f"cluster_b{b.idx}"]["label"]
        assert label.startswith("grad block") == (b.forward_block_idx >= 0), label
        drawn = [n for n in op_nodes(g) if f"cluster_b{b.idx}" in g.node_cluster[n]]
        assert len(drawn) == len(b.ops)
    bodies = [e for e in g.edges if e[4].get("lhead")]
    assert {e[4]["lhead"] for e in bodies} == {
        f"cluster_b{b.idx}" for b in prog.blocks[1:] if b.ops
    }


def _newton_sqrt(a):
    return sg.while_loop(lambda x: sg.abs(x * x - a) > 1e-6 * a, lambda x: 0.5 * (x + a / x), a)


def _halve_or_step(x):
    def body(c):
        return sg.cond(c > 1.0, lambda v: v * 0.5, lambda v: v - 0.1, c)

    return sg.while_loop(lambda c: c > 0.5, body, x)


def _lays_out(text: str) -> None:
    """Graphviz's dot lays `text` out without losing an edge (where dot is installed)."""
    dot = shutil.which("dot")
    if dot is None:
        return
    done = subprocess.run(
        [dot, "-Tsvg", "-o", os.devnull],
        input=text.encode(),
        capture_output=True,
        check=False,
        timeout=60,
    )
    err = done.stderr.decode(errors="replace")
    assert done.returncode == 0 and "lost" not in err and "Error" not in err, err


@pytest.mark.parametrize("fun", [_newton_sqrt, _halve_or_step], ids=["newton_sqrt", "while_cond"])
def test_grad_of_loops_and_branches_lays_out(fun) -> None:
    """The README's newton_sqrt gradient and a gradient of a while holding a cond: every
    block a cluster, every op one HTML-labelled node, every edge at a declared port; and
    dot lays them out (it lost flat edges between the record nodes this drew before)."""
    prog = sg.trace(sg.grad(fun), np.float32(9.0))
    text = sg.to_dot(prog)
    g = parse(text)
    check_wellformed(g)
    assert {c for c in g.clusters if re.fullmatch(r"cluster_b\d+", c)} == {
        f"cluster_b{b.idx}" for b in prog.blocks
    }
    assert sorted(op_nodes(g).values()) == sorted(op.type for b in prog.blocks for op in b.ops)
    assert "shape=record" not in text
    _lays_out(text)


def test_tape_after_create_graph_shows_forward_and_backward_tapes() -> None:
    x = sg.tensor(np.ones((2, 3), np.float32), name="x")
    l1 = sg.nn.Linear(3, 3, act="relu", seed=0, name="linear1")
    with sg.autograd.record():
        loss = sg.mean(l1(x))
    loss.backward(create_graph=True)
    g = parse(sg.to_dot(sg.autograd.tape()))
    check_wellformed(g)
    ops = op_nodes(g)
    fwd = [t for n, t in ops.items() if g.node_cluster[n][-1] == "cluster_b0_forward"]
    assert fwd[:4] == ["transpose", "matmul", "add", "relu"]  # x @ w.T + b
    assert any(g.node_cluster[n][-1] == "cluster_b0_backward" for n in ops)


def test_labels_are_escaped() -> None:
    x = sg.tensor(np.ones(2), name='w<1>|{"q"}')
    with sg.autograd.record():
        sg.sum(x * 2.0)
    text = sg.to_dot(sg.autograd.tape())
    g = parse(text)
    check_wellformed(g)
    assert any('w<1>|{"q"}' in html.unescape(a.get("label", "")) for a in g.nodes.values())
    assert "w&lt;1&gt;|{&quot;q&quot;}" in text  # escaped in the op's HTML label


def test_to_dot_refuses_a_non_program() -> None:
    with pytest.raises(SrcgradError, match="takes an sg.Program"):
        sg.to_dot("not a program")  # type: ignore[arg-type]


# ---------------------------------------------------------------- render


def test_render_without_dot_says_how_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    prog, _ = _fluid_program()
    with pytest.raises(SrcgradError, match="apt-get install graphviz") as e:
        sg.render(prog, tmp_path / "p.svg")
    assert "brew install graphviz" in str(e.value) and not (tmp_path / "p.svg").exists()
    with pytest.raises(SrcgradError, match="format 'gif'"):
        sg.render(prog, tmp_path / "p.gif")


def _fake_dot(tmp_path) -> str:
    """A stand-in `dot` that records its arguments and writes its input to the -o file."""
    script = tmp_path / "bin" / "dot"
    script.parent.mkdir()
    script.write_text(
        "#!/bin/sh\n"
        'echo "$@" > "$(dirname "$0")/args"\n'
        'while [ "$#" -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
        'cat > "$out"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script.parent)


def test_render_runs_dot(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    if shutil.which("dot") is None:
        monkeypatch.setenv("PATH", _fake_dot(tmp_path) + os.pathsep + os.environ["PATH"])
    prog, _ = _fluid_program()
    out = sg.render(prog, tmp_path / "p.svg")
    assert out == str(tmp_path / "p.svg")
    written = (tmp_path / "p.svg").read_bytes()
    if (tmp_path / "bin" / "args").exists():  # the stand-in: it was handed the DOT text
        assert (tmp_path / "bin" / "args").read_text().split()[0] == "-Tsvg"
        assert written.decode() == sg.to_dot(prog)
    else:
        assert b"<svg" in written

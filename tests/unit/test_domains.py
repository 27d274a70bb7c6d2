"""Integer domains read off graph code (`replay/domains.py`): no torch, only `ast`."""

from __future__ import annotations

from growth import assert_linear

from tlview.replay import domains
from tlview.replay import graphcode as gc


def _chain(n: int) -> gc.GraphCode:
    """A graph whose integer input reaches an embedding of 7 rows after N views, and N
    gathers of a table of s0 rows (its hint 5)."""
    lines = [
        "class GraphModule(torch.nn.Module):",
        '    def forward(self, L_ids_: "i64[4][1]cpu", L_w_: "f32[7, 2][2, 1]cpu", '
        'L_t_: "f32[s0, 2][2, 1]cpu"):',
        "        v0 = L_ids_",
    ]
    for i in range(n):
        lines.append(f'        v{i + 1}: "i64[4][1]cpu" = v{i}.view(-1)')
        lines.append(f'        g{i}: "f32[4, 2][2, 1]cpu" = torch.index_select(L_t_, 0, v{i + 1})')
    lines.append(f'        e: "f32[4, 2][2, 1]cpu" = torch.nn.functional.embedding(v{n}, L_w_)')
    lines.append("        return (e,)")
    return gc.parse("\n".join(lines) + "\n")


def test_the_smallest_bound_over_all_uses_wins_through_views() -> None:
    d = domains.find(_chain(3), {"s0": 5})["L_ids_"]
    assert (d.bound, d.uses, d.empty) == (5, 4, False)
    assert d.why == "index_select of L_t_'s dim 0, 5 long (graph line 5)"


def test_an_added_arange_narrows_the_bound_and_a_counter_is_found() -> None:
    code = gc.parse(
        "class GraphModule(torch.nn.Module):\n"
        '    def forward(self, L_c_: "i64[][]cpu", L_k_: "f32[9, 4][4, 1]cpu", '
        'L_v_: "f32[6, 4][4, 1]cpu"):\n'
        '        arange: "i64[6][1]cpu" = torch.arange(6)\n'
        '        at: "i64[6][1]cpu" = arange + L_c_\n'
        '        out: "f32[9, 4][4, 1]cpu" = L_k_.index_copy_(0, at, L_v_)\n'
        "        return (out,)\n"
    )
    d = domains.find(code, {})["L_c_"]
    assert (d.bound, d.why) == (
        4,
        "index_copy_ of L_k_'s dim 0, 9 long (graph line 5) after adding up to 5",
    )


def test_finding_domains_grows_linearly_with_the_graph() -> None:
    assert_linear(_chain, lambda code: domains.find(code, {"s0": 5}), 100, "domains.find")

"""A drafter's token tree in the forms serving engines load: Medusa/EAGLE choices and a node list.

Pure functions (standard library only) over `trees.top_ranked_tree`; `specpim-cp export-tree` is the
command. Conventions (the same in both forms):

* the root, the last committed token, is not a node; the depth-1 nodes have parent -1;
* a rank is 0-based here (0: the drafter's most probable candidate), as in Medusa's ``medusa_choices`` and
  EAGLE's ``tree_choices``; `TreeNode.rank` and the acceptance vector's "rank r" are 1-based (rank 0 here is
  p_1, ``acceptance_vector[0]``);
* `check_engine` refuses a tree an engine cannot load (ranks 0..9: both hard-code a top-k of 10; Medusa:
  one head per depth); a scenario's ``[drafters.tree] max_children = 10`` keeps every optimum loadable;
* a node's path is the ranks from the root down to it, and the nodes are ordered as those engines sort
  their choices, by (len(path), path): depth by depth, then lexicographically, so a parent precedes its
  children and node id k is entry k of the choices list (the engines' tree position k + 1, after the root).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specpim_cp.errors import ScenarioError
from specpim_cp.problem.trees import TreeDraft, TreeNode, check_positional, depth_masses, top_ranked_tree

__all__ = [
    "CONVENTION",
    "ENGINES",
    "DrafterTree",
    "Engine",
    "check_engine",
    "choice_order",
    "choice_paths",
    "drafter_tree",
    "json_nodes",
    "output_metrics",
    "select_drafter",
    "tree_document",
    "tree_from_choices",
    "tree_from_json",
    "widths_of",
]

FORMAT = "specpim-cp token tree v1"

#: The conventions of `--format json`, stated once in its output.
CONVENTION = {
    "root": "the last committed token; not a node and not counted; the depth-1 nodes have parent -1",
    "rank": "0-based: 0 is the drafter's most probable candidate among its parent's; rank r is "
            "acceptance_vector[r] (rank r + 1 in the 1-based notation of p_1..p_R)",
    "path": "the ranks from the root down to the node; the list of paths is --format choices "
            "(Medusa medusa_choices, EAGLE tree_choices)",
    "order": "nodes sorted by (depth, path), as Medusa and EAGLE sort their choices; id = position in that "
             "order (the engines' tree position id + 1, the root being 0); a parent precedes its children",
    "path_probability": "P(the verifier accepts the whole path to this node) = product of acceptance_vector[rank] "
                        "along the path (at most one child of a node is accepted)",
    "acceptance_vector": "p_1..p_R: P(the verifier's next token is the drafter's rank-r candidate), the same at "
                         "every node; mutually exclusive, non-increasing",
    "depth_masses": "W(d) = P(at least d draft tokens accepted) = sum of the depth-d path probabilities",
    "tokens": "expected_tokens_per_round = 1 + sum_d W(d): the accepted draft tokens plus the verifier's own "
              "next token (the correction after a rejected node, or the bonus token after a fully accepted "
              "path), as EAGLE's acceptance length counts them, for this tree alone in a vanilla round; "
              "expected_accepted_draft_tokens = sum_d W(d) leaves the verifier's token out. design.tokens_per_round "
              "is the design's own figure (the evaluator's): the same count for all its drafters' drafts merged "
              "into one verification, minus P(the round continues) when the pipeline is on (a continued round "
              "drops the bonus token, BONUS-1)",
}


@dataclass(frozen=True)
class DrafterTree:
    """One drafter's draft as the design file records it: a top-ranked tree, or a chain (p = (alpha,),
    width 1 at every depth)."""

    index: int  # drafters[index] in the design
    model: str
    p: tuple[float, ...]
    widths: tuple[int, ...]
    chain: bool  # the design drafts a chain (draft_length), not a tree

    @property
    def draft(self) -> TreeDraft:
        return TreeDraft(self.p, self.widths)

    @property
    def nodes(self) -> tuple[TreeNode, ...]:
        return top_ranked_tree(self.p, self.widths)


# --------------------------------------------------------------------------- tree -> engine forms


def choice_order(path: Sequence[int]) -> tuple[int, tuple[int, ...]]:
    """The sort key of Medusa's and EAGLE's choices: (len(path), path)."""
    return len(path), tuple(path)


def _ordered(nodes: Sequence[TreeNode]) -> list[int]:
    """Indices of `nodes` in choice order."""
    return sorted(range(len(nodes)), key=lambda k: choice_order(nodes[k].ranks))


def choice_paths(nodes: Sequence[TreeNode]) -> list[list[int]]:
    """The tree as Medusa/EAGLE choices: one 0-based rank path per node, root excluded, in choice order."""
    return [[r - 1 for r in nodes[k].ranks] for k in _ordered(nodes)]


def json_nodes(nodes: Sequence[TreeNode]) -> list[dict]:
    """The tree as a node list in choice order: id, depth, parent (-1: the root), 0-based rank, path and
    path probability."""
    order = _ordered(nodes)
    new_id = {old: new for new, old in enumerate(order)}
    return [{"id": new_id[k], "depth": nodes[k].depth,
             "parent": -1 if nodes[k].parent < 0 else new_id[nodes[k].parent],
             "rank": nodes[k].rank - 1, "path": [r - 1 for r in nodes[k].ranks],
             "path_probability": nodes[k].path_probability} for k in order]


def tree_document(tree: DrafterTree, expected_tokens: float, design: Mapping) -> dict:
    """`--format json`: the conventions, the drafter, its profile and acceptance vector, the expected tokens
    (`expected_tokens` is the package's figure for this tree alone, vanilla) and the nodes."""
    return {
        "format": FORMAT,
        "convention": CONVENTION,
        "drafter": {"index": tree.index, "model": tree.model, "draft": "chain" if tree.chain else "tree"},
        "widths": list(tree.widths),
        "depth": len(tree.widths),
        "node_count": sum(tree.widths),
        "acceptance_vector": list(tree.p),
        "depth_masses": list(depth_masses(tree.p, tree.widths)),
        "expected_tokens_per_round": expected_tokens,
        "expected_accepted_draft_tokens": expected_tokens - 1.0,
        "design": dict(design),
        "nodes": json_nodes(tree.nodes),
    }


# --------------------------------------------------------------------------- what the engines load


@dataclass(frozen=True)
class Engine:
    """A serving engine's limits on the choices it loads: candidate ranks 0..top_k - 1 per node (its buffers
    index a top-k of the drafter's candidates, so a larger rank aliases another candidate), and whether the
    depth must not exceed the drafter model's head count (one Medusa head drafts one depth)."""

    name: str
    top_k: int
    depth_is_heads: bool
    source: str


#: The engines `export-tree --engine` checks for; Medusa is the stricter (its limits include EAGLE's).
ENGINES = {
    "medusa": Engine("Medusa", 10, True, "medusa/model/utils.py: TOPK = 10 in generate_medusa_buffers; "
                     "head k drafts depth k + 1"),
    "eagle": Engine("EAGLE", 10, False, "eagle/model/utils.py: TOPK = 10 in generate_tree_buffers"),
}

#: The scenario field that bounds a drafter's ranks (every candidate rank of the optimum is below it).
RANK_BOUND_FIELD = "[drafters.tree] max_children"


def check_engine(tree: DrafterTree, engine: str, heads: int | None, label: str) -> str | None:
    """Refuse (ScenarioError, one line) a tree `engine` cannot load: a node whose 0-based rank reaches its
    top-k, or (Medusa, `heads` given) a depth beyond the model's head count. Returns a note to show when a
    limit could not be checked (Medusa without `heads`: the depth the model's heads must cover), else None."""
    spec = ENGINES[engine]
    paths = choice_paths(tree.nodes)
    where = f"{label}: drafters[{tree.index}] ({tree.model})"
    over = [path for path in paths if path[-1] >= spec.top_k]
    if over:
        path, largest = over[0], max(p[-1] for p in over)
        raise ScenarioError(
            f"{where}: node {path} has rank {path[-1]} ({len(over)} nodes rank {spec.top_k} or more, up to "
            f"{largest}), but {spec.name} loads ranks 0..{spec.top_k - 1} (its top-k of {spec.top_k}; a larger "
            f"rank aliases another candidate); nothing written: set {RANK_BOUND_FIELD} = {spec.top_k} or less "
            "in the scenario and solve again")
    depth = len(tree.widths)
    if not spec.depth_is_heads:
        return None
    if heads is None:
        return (f"{spec.name} drafts depth k with head k: this tree has depth {depth}, so the model needs at "
                f"least {depth} Medusa heads (not checked; give --medusa-heads to check)")
    if depth > heads:
        raise ScenarioError(f"{where}: the tree has depth {depth}, but a {spec.name} model with {heads} heads "
                            f"drafts depth {heads} at most (one head per depth); nothing written: set the "
                            f"scenario's max_draft_length = {heads} or less and solve again")
    return None


# --------------------------------------------------------------------------- engine forms -> tree


def _rank_path(raw, where: str) -> tuple[int, ...]:
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ValueError(f"{where}: a path is a non-empty list of ranks, got {raw!r}")
    if any(isinstance(r, bool) or not isinstance(r, int) or r < 0 for r in raw):
        raise ValueError(f"{where}: ranks are integers >= 0, got {list(raw)!r}")
    return tuple(raw)


def _probability(p: tuple[float, ...], path: tuple[int, ...], where: str) -> float:
    if max(path) >= len(p):
        raise ValueError(f"{where}: rank {max(path)} but the acceptance vector has {len(p)} ranks (0..{len(p) - 1})")
    return math.prod(p[r] for r in path)


def tree_from_choices(paths: Sequence[Sequence[int]], p: Sequence[float]) -> tuple[TreeNode, ...]:
    """Rebuild a tree from Medusa/EAGLE choices (any order; 0-based ranks) and its acceptance vector.

    Nodes in choice order, each a `TreeNode` (1-based rank, as `top_ranked_tree` gives them). ValueError
    for an empty or repeated path, a rank outside p, or a path whose parent path is missing.
    """
    pv = check_positional(p)
    keyed = [_rank_path(raw, f"choices[{k}]") for k, raw in enumerate(paths)]
    if not keyed:
        raise ValueError("choices: a tree has at least one node")
    ordered = sorted(keyed, key=choice_order)
    index = {}
    for path in ordered:
        if path in index:
            raise ValueError(f"choices: {list(path)} appears twice")
        index[path] = len(index)
    nodes = []
    for path in ordered:
        parent = -1 if len(path) == 1 else index.get(path[:-1])
        if parent is None:
            raise ValueError(f"choices: {list(path)} has no parent {list(path[:-1])}")
        nodes.append(TreeNode(len(path), parent, path[-1] + 1, _probability(pv, path, "choices"),
                              tuple(r + 1 for r in path)))
    return tuple(nodes)


def tree_from_json(doc: Mapping) -> tuple[TreeNode, ...]:
    """Rebuild a tree from `--format json` by its parent links and ranks alone (paths recomputed, not read).

    ValueError unless node k has id k and its parent is -1 or an earlier node.
    """
    pv = check_positional(doc["acceptance_vector"], "acceptance_vector")
    nodes: list[TreeNode] = []
    for k, node in enumerate(doc["nodes"]):
        parent, rank = node["parent"], node["rank"]
        if node["id"] != k or not -1 <= parent < k:
            raise ValueError(f"nodes[{k}]: id {node['id']}, parent {parent}: want id {k} and a parent in -1..{k - 1}")
        path = (*(() if parent < 0 else tuple(r - 1 for r in nodes[parent].ranks)), rank)
        nodes.append(TreeNode(len(path), parent, rank + 1, _probability(pv, path, f"nodes[{k}]"),
                              tuple(r + 1 for r in path)))
    return tuple(nodes)


def widths_of(nodes: Sequence[TreeNode]) -> tuple[int, ...]:
    """Nodes per depth, 1..max depth (0 for a depth without nodes)."""
    depth = max((n.depth for n in nodes), default=0)
    return tuple(sum(1 for n in nodes if n.depth == d) for d in range(1, depth + 1))


# --------------------------------------------------------------------------- reading a design output


def _draft_text(tree: Sequence[int] | None, draft_length: int | None) -> str:
    if tree is not None:
        return f"tree {'-'.join(map(str, tree))}"
    return f"chain of {draft_length or 1}"


def select_drafter(drafters: Sequence[tuple[str, Sequence[int] | None, int | None]], pick: str | None,
                   label: str) -> int:
    """Which drafter to export: `pick` is a 0-based index or a model name; without one, the only drafter
    that drafts a tree. `drafters` holds (model, tree widths or None, draft_length) per drafter."""
    listing = ", ".join(f"{k} {m} ({_draft_text(t, g)})" for k, (m, t, g) in enumerate(drafters))
    if not drafters:
        raise ScenarioError(f"{label}: the design has no drafters (autoregressive decoding): no token tree")
    if pick is None:
        trees = [k for k, (_, t, _) in enumerate(drafters) if t is not None]
        if len(trees) == 1:
            return trees[0]
        if not trees:
            raise ScenarioError(f"{label}: the design drafts no token tree (drafters: {listing}); "
                                "export a chain with --drafter N")
        raise ScenarioError(f"{label}: {len(trees)} drafters draft token trees (drafters: {listing}); "
                            "pick one with --drafter N")
    if pick.isdigit():
        k = int(pick)
        if k < len(drafters):
            return k
        n = len(drafters)
        indices = "index 0" if n == 1 else f"indices 0..{n - 1}"
        raise ScenarioError(f"--drafter {pick}: out of range; the design has {n} drafter{'s' if n > 1 else ''}, "
                            f"{indices} (drafters: {listing})")
    named = [k for k, (m, _, _) in enumerate(drafters) if m == pick]
    if len(named) == 1:
        return named[0]
    if not named:
        raise ScenarioError(f"--drafter {pick}: no drafter of the design has this model (drafters: {listing})")
    raise ScenarioError(f"--drafter {pick}: {len(named)} drafters have this model; give the index (drafters: {listing})")


def output_metrics(entry: Mapping) -> tuple[list | None, float | None]:
    """(the breakdown's drafter records, the design's tokens per round) of one `--json` output entry:
    `solve`/`heuristic`/`baselines` nest them under `metrics`, `evaluate` holds them at the top; a bare
    design holds neither (None, None)."""
    metrics = entry.get("metrics") if isinstance(entry.get("metrics"), Mapping) else entry
    breakdown = metrics.get("breakdown")
    drafters = breakdown.get("drafters") if isinstance(breakdown, Mapping) else None
    tokens = metrics.get("tokens_per_round")
    return (drafters if isinstance(drafters, list) else None,
            float(tokens) if isinstance(tokens, (int, float)) and not isinstance(tokens, bool) else None)


def drafter_tree(index: int, model: str, widths: Sequence[int] | None, draft_length: int | None,
                 record: object, label: str) -> DrafterTree:
    """Drafter `index`'s draft from the design (its widths, or a chain's draft length) and its breakdown
    record (the acceptance vector `tree_vector` of a tree, the acceptance `alpha` of a chain)."""
    where = f"{label}: metrics.breakdown.drafters[{index}]"
    if not isinstance(record, Mapping):
        raise ScenarioError(f"{where}: missing; export from a `--json` output that holds the design's breakdown")
    if widths is None:
        key, raw, shape = "alpha", [record.get("alpha")], (1,) * operator.index(draft_length or 1)
    else:
        key, raw, shape = "tree_vector", record.get("tree_vector"), tuple(widths)
        if record.get("tree") != list(shape):
            raise ScenarioError(f"{where}.tree: {record.get('tree')!r}, but the design's drafters[{index}].tree is "
                                f"{list(shape)} (the breakdown is of another design)")
    if not isinstance(raw, list) or any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in raw):
        raise ScenarioError(f"{where}.{key}: {record.get(key)!r} is not {'a number' if widths is None else 'a list of numbers'}")
    try:
        p = check_positional(raw, key)
        TreeDraft(p, shape)
    except ValueError as exc:
        raise ScenarioError(f"{where}: {exc}") from None
    return DrafterTree(index, model, p, shape, widths is None)

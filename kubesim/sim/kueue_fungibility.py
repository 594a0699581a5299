"""Flavor fungibility, borrowing levels and capacity reserved by a workload that cannot
reclaim, for kubesim's Kueue controller (``kueue.py`` calls these from ``_assign`` and from
its admission passes).

Re-expressed in Python from Kueue (github.com/kubernetes-sigs/kueue, ``main``):

* ``pkg/scheduler/flavorassigner/flavorassigner.go``: ``findFlavorForPodSets`` (the flavor
  loop with the ``FlavorFungibility`` gate, GA), ``fitsResourceQuota`` (when a flavor that
  lacks unused quota counts as ``Preempt`` at all), ``granularMode``, ``isPreferred``,
  ``shouldTryNextFlavor``;
* ``pkg/scheduler/preemption/preemption_oracle.go`` ``SimulatePreemption`` (no candidates,
  priority preemption in the ClusterQueue, or reclamation in the cohort);
* ``pkg/scheduler/preemption/classical/hierarchical_preemption.go``
  ``FindHeightOfLowestSubtreeThatFits`` and ``getNodeHeight`` (the borrowing level, also
  the first key when a scheduling cycle orders its heads: ``scheduler.go``
  ``makeClassicalIterator``);
* ``pkg/scheduler/scheduler.go`` ``reserveCapacityForUnreclaimablePreempt`` and
  ``quotaResourcesToReserve``;
* the v1beta2 API (``apis/kueue/v1beta2/clusterqueue_types.go``): ``whenCanBorrow``
  (default ``MayStopSearch``) and ``whenCanPreempt`` (default ``TryNextFlavor``), each
  ``MayStopSearch`` or ``TryNextFlavor`` (v1beta1's ``Borrow``/``Preempt`` were renamed),
  and ``preference`` (``BorrowingOverPreemption``, the default, or
  ``PreemptionOverBorrowing``; only with both set to ``TryNextFlavor``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

# preemptionMode, worst to best (flavorassigner.go)
NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)


def fungibility(cq_spec: dict) -> tuple[str, str, str]:
    """(whenCanBorrow, whenCanPreempt, preference) with the v1beta2 defaults."""
    ff = cq_spec.get("flavorFungibility") or {}
    return (ff.get("whenCanBorrow") or "MayStopSearch",
            ff.get("whenCanPreempt") or "TryNextFlavor",
            ff.get("preference") or "BorrowingOverPreemption")


def node_height(cohort: Any) -> int:
    """``getNodeHeight``: 1 for a cohort with ClusterQueues only, +1 per level of cohorts."""
    h = min(len(cohort.children), 1)
    for child in cohort.children:
        if not child.is_cq:
            h = max(h, node_height(child) + 1)
    return h


def _borrowing_with(node: Any, fr: tuple, val: int) -> bool:
    if node.is_cq:
        return node.nominal(fr) < node.usage.get(fr, 0) + val
    return node.subtree.get(fr, 0) < node.usage.get(fr, 0) + val


def lowest_subtree_height(cq: Any, fr: tuple, val: int) -> tuple[int, bool]:
    """``FindHeightOfLowestSubtreeThatFits``: the borrowing level of ``val`` more of ``fr``
    in ClusterQueue ``cq`` (0: within its nominal quota), and whether that subtree is
    smaller than the whole cohort tree (``mayReclaimInHierarchy``)."""
    if cq.parent is None or not _borrowing_with(cq, fr, val):
        return 0, cq.parent is not None
    remaining = val - cq.local_available(fr)
    node = cq.parent
    while node is not None:
        if not _borrowing_with(node, fr, remaining):
            return node_height(node), node.parent is not None
        remaining -= node.local_available(fr)
        node = node.parent
    return node_height(cq.root()), False


def can_preempt_while_borrowing(cq_spec: dict) -> bool:
    """``canPreemptWhileBorrowing`` (without fair sharing)."""
    bwc = (cq_spec.get("preemption") or {}).get("borrowWithinCohort") or {}
    return bool(bwc) and (bwc.get("policy") or "Never") != "Never"


class Mode:
    """``granularMode`` of one flavor: ``kind`` is ``fit``, ``nofit`` or ``preempt``; for
    ``preempt`` the preemption mode (no candidates, preempt, reclaim) and the borrowing
    level after the preemptions come from the preemption oracle, run only when a decision
    needs them (``resolve``)."""

    __slots__ = ("_pm", "_resolve", "kind", "level")

    def __init__(self, kind: str, level: int,
                 resolve: Callable[[], tuple[int, int]] | None = None):
        self.kind = kind
        self.level = level
        self._pm: int | None = {"fit": FIT, "nofit": NO_FIT}.get(kind)
        self._resolve = resolve

    @property
    def pm(self) -> int:
        if self._pm is None:
            assert self._resolve is not None
            self._pm, self.level = self._resolve()
        return self._pm


def is_preferred(a: Mode | None, b: Mode | None, preference: str) -> bool:
    """``isPreferred``: is ``a`` a better flavor than ``b``."""
    if a is None or a.kind == "nofit":
        return False
    if b is None or b.kind == "nofit":
        return True
    if preference != "PreemptionOverBorrowing" and (a.kind == "fit") != (b.kind == "fit"):
        return a.kind == "fit"  # what follows gives this, without running the oracle
    a_none, b_none = a.pm == NO_CANDIDATES, b.pm == NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if preference == "PreemptionOverBorrowing":
        if a.level != b.level:
            return a.level < b.level
        return a.pm > b.pm
    if a.pm != b.pm:
        return a.pm > b.pm
    return a.level < b.level


def should_try_next(mode: Mode, when_borrow: str, when_preempt: str) -> bool:
    """``shouldTryNextFlavor``."""
    if mode.kind == "nofit":
        return True
    if mode.kind == "preempt":
        if when_preempt == "TryNextFlavor":
            return True  # whatever the oracle says (no candidates: try next as well)
        if mode.pm == NO_CANDIDATES:
            return True
    return mode.level > 0 and when_borrow == "TryNextFlavor"


def pick(candidates: Iterable[tuple[str, Mode]], cq_spec: dict) -> tuple[str, Mode] | None:
    """The flavor loop of ``findFlavorForPodSets``: ``candidates`` are the flavors of a
    resource group in order, each with its mode, produced as they are tried; ``None`` when
    none can be used (all ``NoFit``)."""
    when_borrow, when_preempt, preference = fungibility(cq_spec)
    best: tuple[str, Mode] | None = None
    for fl, mode in candidates:
        if not should_try_next(mode, when_borrow, when_preempt):
            return fl, mode
        if is_preferred(mode, best[1] if best else None, preference):
            best = (fl, mode)
    return best


def may_preempt(cq: Any, cq_spec: dict, fr: tuple, val: int) -> bool:
    """``fitsResourceQuota``: a flavor lacking unused quota counts as ``Preempt`` only when
    the request fits in the queue's nominal quota, or may be reclaimed below the root of
    the cohort tree, or the queue may preempt while borrowing; else it is ``NoFit``."""
    _level, may_reclaim = lowest_subtree_height(cq, fr, val)
    return cq.nominal(fr) >= val or may_reclaim or can_preempt_while_borrowing(cq_spec)


def simulate(cq: Any, fr: tuple, val: int, search: Callable[[dict], list],
             cqs: dict) -> tuple[int, int]:
    """``SimulatePreemption``: ``search(usage)`` is the controller's classical preemption
    search for a preemptor needing ``usage``. Returns (preemption mode, borrowing level
    after the preemptions)."""
    targets = search({fr: val})
    if not targets:
        return NO_CANDIDATES, lowest_subtree_height(cq, fr, val)[0]
    for w, _reason in targets:
        for f, v in w.usage.items():
            cqs[w.cq].remove_usage(f, v)
    try:
        after, _ = lowest_subtree_height(cq, fr, val)
    finally:
        for w, _reason in targets:
            for f, v in w.usage.items():
                cqs[w.cq].add_usage(f, v)
    if any(w.cq == cq.name for w, _r in targets):
        return PREEMPT, after
    return RECLAIM, after


def to_reserve(cq: Any, cq_spec: dict, usage: dict, level: int) -> dict:
    """``reserveCapacityForUnreclaimablePreempt``: what a workload that needs preemption
    but found no candidates holds for the rest of the cycle, so that workloads of other
    ClusterQueues do not take it (``quotaResourcesToReserve``); nothing when its queue
    can always reclaim (``reclaimWithinCohort: Any``, ``CanAlwaysReclaim``)."""
    if ((cq_spec.get("preemption") or {}).get("reclaimWithinCohort") or "Never") == "Any":
        return {}
    out = {}
    for fr, v in usage.items():
        nominal, borrowing_limit, _lend = cq.quotas.get(fr, (0, None, None))
        used = cq.usage.get(fr, 0)
        if level > 0:
            amount = v if borrowing_limit is None else min(v, nominal + borrowing_limit - used)
        else:
            amount = max(0, min(v, nominal - used))
        if amount > 0:
            out[fr] = amount
    return out


def _resolved(pm: int, level: int) -> Mode:
    m = Mode("fit" if pm == FIT else "nofit" if pm == NO_FIT else "preempt", level)
    m._pm = pm
    return m


def choose(flavors: list, try_flavor: Callable[..., tuple], args: tuple, cq: Any,
           cq_spec: dict, want: dict, assumed: dict,
           oracle: Callable[[], tuple[Callable[[dict], list], dict]]
           ) -> tuple[tuple | None, list[str], list[str], int]:
    """One resource group's flavor, as ``findFlavorForPodSets``. ``try_flavor(fl, *args)``
    is the controller's check of one flavor: ``(mode, reasons, reason, borrows, place)``
    with mode ``Fit``, ``Preempt`` (lacks unused quota) or ``NoFit``. Returns the chosen
    ``(mode, flavor, borrows, place)`` or ``None``, the reasons and pending reasons of the
    flavors tried that do not fit, and the borrowing level of the choice. ``oracle()``
    gives the preemption search and the quota tree it works on, asked for only when a
    decision needs to know whether preemption would find candidates."""
    _wb, _wp, preference = fungibility(cq_spec)
    results: dict[str, tuple] = {}
    reasons: list[str] = []
    tried: list[str] = []

    def mode_of(fl: str, r: tuple) -> Mode:
        if r[0] == "NoFit":
            return Mode("nofit", 1 << 30)
        vals = {(fl, res): assumed.get((fl, res), 0) + v for res, v in want.items()}
        level = max((lowest_subtree_height(cq, fr, v)[0] for fr, v in vals.items()), default=0)
        if r[0] == "Fit":
            return Mode("fit", level)
        short = {fr: v for fr, v in vals.items() if v > cq.available(fr)}
        if not all(may_preempt(cq, cq_spec, fr, v) for fr, v in short.items()):
            return Mode("nofit", level)

        def resolve() -> tuple[int, int]:
            search, cqs = oracle()
            rep = _resolved(FIT, 0)
            for fr, v in vals.items():  # the flavor's mode: its worst resource's
                if fr in short:
                    m = _resolved(*simulate(cq, fr, v, search, cqs))
                else:
                    m = _resolved(FIT, lowest_subtree_height(cq, fr, v)[0])
                if is_preferred(rep, m, preference):
                    rep = m
            return rep.pm, rep.level
        return Mode("preempt", level, resolve)

    def tries() -> Iterator[tuple[str, Mode]]:
        for fl in flavors:
            r = try_flavor(fl, *args)
            results[fl] = r
            if r[0] != "Fit":
                reasons.extend(r[1])
                tried.append(r[2])
            yield fl, mode_of(fl, r)

    chosen = pick(tries(), cq_spec)
    if chosen is None or chosen[1].kind == "nofit":
        return None, reasons, tried, 0
    fl, mode = chosen
    r = results[fl]
    return (r[0], fl, r[3], r[4]), reasons, tried, mode.level


# ---- the controller's side (``KueueController`` hooks) ---------------------------------------
def oracle(ctrl: Any, info: Any, node: Any, assignment: Callable[..., Any]
           ) -> tuple[Callable[[dict], list], dict]:
    """The controller's classical preemption search as ``SimulatePreemption`` runs it for
    one flavor (``simulate``), on the current pass's quota tree and admitted workloads
    (``assignment``: the controller's ``Assignment``, given so that this module does not
    import the controller's)."""
    cqs, admitted = ctrl._pass_ctx or (
        ctrl.cqs, {n: list(d.values()) for n, d in ctrl.admitted.items()})

    def search(usage: dict) -> list:
        return ctrl._search_targets(info, assignment("Preempt", [], usage, []), node, cqs,
                                    admitted)
    return search, cqs


def _bump(ctrl: Any, node: Any) -> None:
    root = ctrl._root_id(node)
    ctrl._rver[root] = ctrl._rver.get(root, 0) + 1


def reserve(ctrl: Any, spec: dict, asg: Any, node: Any, held: list) -> None:
    """A head needing preemption that found no candidates holds the quota it could have
    (``to_reserve``) for the rest of the cycle: the controller releases ``held`` after
    this round of heads, or after the pass for a StrictFIFO head, which is the head again
    in every cycle. ``spec``: the head's ClusterQueue's spec."""
    for fr, v in to_reserve(node, spec, asg.usage, asg.borrows).items():
        node.add_usage(fr, v)
        held.append((node, fr, v))
        _bump(ctrl, node)


def release(ctrl: Any, held: list) -> None:
    for node, fr, v in reversed(held):
        node.remove_usage(fr, v)
        _bump(ctrl, node)
    held.clear()

"""When a tracked curve emerges: its "emerges at" (``xlt report dynamics``).

"Emerges at" (docs/dynamics.md) is the first snapshot from which a curve stays clearly beyond its
random-encoder bound -- above it, or below it for a lower-is-better measure (dev perplexity) -- for
``persist`` snapshots in a row. "Clearly": the margin over the bound exceeds the largest of

* ``fraction`` of the largest margin the curve ever reaches (the rise is judged against the curve's
  own range, whatever the measure's units),
* ``floor`` of the measure's magnitude (the largest |value| or |bound| of the curve): a curve that
  only wanders around its bound has a tiny largest margin, and 20 % of it would be noise,
* the spread of the bound itself (max - min over the snapshots, where the bound differs between
  snapshots, e.g. a fine-tuned untrained encoder): a margin inside the bound's own noise is no signal.

A run's ordering line sorts what emerged by step, which answers the issue's question (perplexity,
alignment or transfer first, and which layer); a layered measure enters it at its earliest layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from xlt.report.dynamics_records import Curve, EmergenceRule, Run

AT, FIRST, NEVER, UNCONFIRMED, NO_BOUND = "at", "first", "never", "unconfirmed", "no bound"


@dataclass
class Emergence:
    status: str                        # AT, FIRST, NEVER, UNCONFIRMED (clear only at the last snapshots), NO_BOUND
    step: Optional[int] = None         # AT/FIRST: where it emerges; UNCONFIRMED: where the clear tail starts
    threshold: Optional[float] = None  # the margin a snapshot needed
    best_margin: Optional[float] = None

    @property
    def emerged(self) -> bool:
        return self.status in (AT, FIRST)

    def text(self) -> str:
        if self.status == AT:
            return steps_text(self.step)
        if self.status == FIRST:
            return f"at the first snapshot ({steps_text(self.step)})"
        if self.status == UNCONFIRMED:
            return f"unconfirmed (clear from {steps_text(self.step)}, the last snapshot(s))"
        return self.status


def steps_text(step: Optional[int]) -> str:
    return "" if step is None else f"{step:,}"


def margins(curve: Curve) -> list[Optional[float]]:
    """Per point: how far the value is beyond its bound, in the measure's better direction (None: no bound)."""
    sign = 1.0 if curve.higher_is_better else -1.0
    out = []
    for point in curve.points:
        bound = curve.bound_at(point)
        out.append(None if bound is None else sign * (point.value - bound))
    return out


def emergence(curve: Curve, rule: EmergenceRule) -> Emergence:
    """When ``curve`` (points sorted by step) first stays clearly beyond its bound (module docstring)."""
    beyond = margins(curve)
    known = [m for m in beyond if m is not None]
    if not known:
        return Emergence(NO_BOUND)
    best = max(known)
    bounds = curve.bounds()
    magnitude = max([abs(p.value) for p in curve.points] + [abs(b) for b in bounds])
    threshold = max(rule.fraction * best, rule.floor * magnitude, max(bounds) - min(bounds))
    if best <= 0 or best <= threshold:
        return Emergence(NEVER, threshold=threshold, best_margin=best)
    clear = [m is not None and m > threshold for m in beyond]
    n = len(clear)
    for i in range(n - rule.persist + 1):
        if all(clear[i:i + rule.persist]):
            status = FIRST if i == 0 else AT
            return Emergence(status, curve.points[i].step, threshold, best)
    tail = n
    while tail > 0 and clear[tail - 1]:
        tail -= 1
    if tail < n:   # clear at the end, for fewer snapshots than persist: a blip or the start of a rise
        return Emergence(UNCONFIRMED, curve.points[tail].step, threshold, best)
    return Emergence(NEVER, threshold=threshold, best_margin=best)


def curve_name(curve: Curve, with_layer: bool = True) -> str:
    """``cka (fr, layer 3)``, ``dev_ppl (en)``, ``word_p1 (layer 0)``."""
    details = [d for d in (curve.lang, None if curve.layer is None or not with_layer else f"layer {curve.layer}") if d]
    return curve.measure + (f" ({', '.join(details)})" if details else "")


@dataclass
class RunDynamics:
    run: Run
    emergences: list[Emergence]   # parallel to run.curves

    def ordering(self) -> str:
        """"first: dev_ppl (fr) at step 1,000, then cka (fr, layer 3) at 2,000, ...; never: ..."."""
        earliest: dict[tuple, tuple[Curve, Emergence]] = {}
        for curve, found in self._pairs():
            key = (curve.measure, curve.lang)
            if found.emerged and (key not in earliest or found.step < earliest[key][1].step):
                earliest[key] = (curve, found)   # curves are in layer order: the lowest layer wins a tie
        groups: dict[tuple[int, bool], list[str]] = {}
        for curve, found in sorted(earliest.values(), key=lambda cf: (cf[1].step, cf[1].status != FIRST)):
            groups.setdefault((found.step, found.status == FIRST), []).append(curve_name(curve))
        parts = []
        for i, ((step, first), names) in enumerate(groups.items()):
            where = f"already at the first snapshot (step {steps_text(step)})" if first else \
                f"at {'step ' if i == 0 else ''}{steps_text(step)}"
            parts.append(f"{' and '.join(names)} {where}")
        text = ("first: " + ", then ".join(parts)) if parts else "nothing emerges"
        # What did not emerge, by why: a rise at the last snapshot(s) may still be one, a curve without bound
        # cannot say.
        left: dict[str, list[str]] = {"never": [], "unconfirmed": [], "no bound": []}
        for curve, _ in self._pairs():
            key, name = (curve.measure, curve.lang), curve_name(curve, with_layer=False)
            if key in earliest or any(name in names for names in left.values()):
                continue
            statuses = {f.status for c, f in self._pairs() if (c.measure, c.lang) == key}
            left["unconfirmed" if UNCONFIRMED in statuses else "no bound" if statuses == {NO_BOUND} else "never"
                 ].append(name)
        return text + "".join(f"; {what}: {', '.join(names)}" for what, names in left.items() if names)

    def layers(self) -> list[str]:
        """Per layered measure (and language): its layers in order of emergence, e.g.
        ``cka (fr): layer 3 at 2,000, then layers 2, 4 at 2,500; not: layer 0``."""
        lines = []
        groups: dict[tuple, list[tuple[Curve, Emergence]]] = {}
        for curve, found in self._pairs():
            if curve.layer is not None:
                groups.setdefault((curve.measure, curve.lang), []).append((curve, found))
        for pairs in groups.values():
            at: dict[int, list[int]] = {}
            for curve, found in sorted((p for p in pairs if p[1].emerged), key=lambda p: p[1].step):
                at.setdefault(found.step, []).append(curve.layer)
            parts = [("layer " if len(ls) == 1 else "layers ") + ", ".join(map(str, ls)) + f" at {steps_text(step)}"
                     for step, ls in at.items()]
            never = [str(c.layer) for c, f in pairs if not f.emerged]
            text = ", then ".join(parts) if parts else "no layer emerges"
            if never and parts:
                text += "; not: layer" + ("s " if len(never) > 1 else " ") + ", ".join(never)
            lines.append(f"{curve_name(pairs[0][0], with_layer=False)}: {text}")
        return lines

    def _pairs(self) -> list[tuple[Curve, Emergence]]:
        return list(zip(self.run.curves, self.emergences))


def analyse(runs: list[Run], rule: EmergenceRule) -> list[RunDynamics]:
    return [RunDynamics(run, [emergence(curve, rule) for curve in run.curves]) for run in runs]

"""The JIT block of EXPLAIN, PostgreSQL 11 to 18, as one flat dict with fixed keys.

JSON: {"Functions": n, "Options": {"Inlining": b, ...}, "Timing": {"Generation": ..., "Inlining": ms,
"Optimization": ms, "Emission": ms, "Total": ms}}. `Generation` is a number up to PostgreSQL 16 and an
object {"Deform": ms, "Total": ms} from 17 on (deform time is part of generation time). 11 and 12 also put
"Worker Number" in the block (-1 for the plan's summary). Timing is only there with ANALYZE (and TIMING on).

Text: "JIT:" (11/12 per worker: "JIT for worker N:") then "Functions: n", "Options: Inlining true, ...",
"Timing: Generation 1.2 ms (Deform 0.3 ms), Inlining ..." (no "(Deform ...)" before 17).
"""

from __future__ import annotations

import re

from .errors import ExplainParseError

JIT_KEYS = (
    "functions",
    "inlining",
    "optimization",
    "expressions",
    "deforming",
    "generation_ms",
    "deform_ms",  # 17+ only
    "inlining_ms",
    "optimization_ms",
    "emission_ms",
    "total_ms",
)

_OPTIONS = ("Inlining", "Optimization", "Expressions", "Deforming")
_TIMINGS = ("Inlining", "Optimization", "Emission", "Total")

_NUM = r"(\d+(?:\.\d+)?)"
_OPTIONS_RE = re.compile(r"Options: " + ", ".join(rf"{name} (true|false)" for name in _OPTIONS))
_TIMING_RE = re.compile(
    rf"Timing: Generation {_NUM} ms(?: \(Deform {_NUM} ms\))?, Inlining {_NUM} ms, "
    rf"Optimization {_NUM} ms, Emission {_NUM} ms, Total {_NUM} ms"
)


def empty_jit() -> dict:
    return dict.fromkeys(JIT_KEYS)


def _number(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ExplainParseError(f"{where}: expected a number, got {value!r}")
    return float(value)


def jit_from_json(block, where: str = "JIT") -> dict:
    if not isinstance(block, dict) or not isinstance(block.get("Functions"), int):
        raise ExplainParseError(f"{where}: expected an object with an integer 'Functions', got {block!r}")
    jit = empty_jit()
    jit["functions"] = block["Functions"]
    options = block.get("Options")
    if not isinstance(options, dict):
        raise ExplainParseError(f"{where}.Options: expected an object, got {options!r}")
    for name in _OPTIONS:
        if not isinstance(options.get(name), bool):
            raise ExplainParseError(f"{where}.Options.{name}: expected true/false, got {options.get(name)!r}")
        jit[name.lower()] = options[name]
    timing = block.get("Timing")
    if timing is None:  # EXPLAIN without ANALYZE, or TIMING OFF
        return jit
    if not isinstance(timing, dict):
        raise ExplainParseError(f"{where}.Timing: expected an object, got {timing!r}")
    generation = timing.get("Generation")
    if isinstance(generation, dict):  # 17+
        jit["generation_ms"] = _number(generation.get("Total"), f"{where}.Timing.Generation.Total")
        jit["deform_ms"] = _number(generation.get("Deform"), f"{where}.Timing.Generation.Deform")
    else:
        jit["generation_ms"] = _number(generation, f"{where}.Timing.Generation")
    for name in _TIMINGS:
        jit[f"{name.lower()}_ms"] = _number(timing.get(name), f"{where}.Timing.{name}")
    return jit


def jit_from_text(lines: list[tuple[int, str]]) -> dict:
    """`lines` are the (line number, text) pairs indented under "JIT:"."""
    jit = empty_jit()
    for lineno, text in lines:
        if text.startswith("Functions:"):
            value = text.partition(":")[2].strip()
            if not value.isdigit():
                raise ExplainParseError(f"line {lineno}: bad JIT Functions count {value!r}")
            jit["functions"] = int(value)
        elif m := _OPTIONS_RE.fullmatch(text):
            for name, flag in zip(_OPTIONS, m.groups(), strict=True):
                jit[name.lower()] = flag == "true"
        elif m := _TIMING_RE.fullmatch(text):
            generation, deform, inlining, optimization, emission, total = m.groups()
            jit["generation_ms"] = float(generation)
            jit["deform_ms"] = None if deform is None else float(deform)
            jit["inlining_ms"], jit["optimization_ms"] = float(inlining), float(optimization)
            jit["emission_ms"], jit["total_ms"] = float(emission), float(total)
        else:
            raise ExplainParseError(f"line {lineno}: unrecognised JIT line {text!r}")
    if jit["functions"] is None or jit["inlining"] is None:
        first = lines[0][0] if lines else "?"
        raise ExplainParseError(f"line {first}: JIT block without 'Functions' and 'Options' lines")
    return jit

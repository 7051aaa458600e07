"""JUnit XML, the test-report format every CI reads (Jenkins, GitLab, Azure, GitHub actions that
publish test results): ``<testsuites>`` of ``<testsuite>`` of ``<testcase>``, each passing, or
with a ``<failure>`` (the check ran and found a problem), an ``<error>`` (it could not run) or
``<skipped>``. What is written fits the Jenkins/Ant JUnit schema (tests/data/junit.xsd).

Text from a recording may hold characters XML 1.0 cannot carry (most C0 controls, lone
surrogates): they are written as visible escapes (``\\x1b``), as on a terminal.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass, field

_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _text(value: str) -> str:
    """``value`` with what XML 1.0 cannot hold as visible escapes."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", value)


@dataclass
class Case:
    """One ``<testcase>``: passed unless it has a ``failure``, an ``error`` or ``skipped``."""

    name: str
    classname: str
    failure: str | None = None
    """The one-line message of a failure; ``detail`` holds the long text."""
    error: str | None = None
    skipped: str | None = None
    detail: str = ""
    """The failure's or error's text (the change list, the findings)."""
    kind: str = ""
    """The failure's or error's ``type`` attribute."""
    output: str = ""
    """``<system-out>``: what a passing case has to say."""
    time: float | None = None


@dataclass
class Suite:
    """One ``<testsuite>``."""

    name: str
    cases: list[Case] = field(default_factory=list)
    time: float | None = None

    def count(self, what: str) -> int:
        return sum(getattr(c, what) is not None for c in self.cases)


def _seconds(value: float | None) -> str:
    return f"{max(value or 0.0, 0.0):.3f}"


def to_xml(suites: Sequence[Suite], name: str) -> str:
    """The JUnit XML document of ``suites`` (an XML declaration, then ``<testsuites>``)."""
    root = ET.Element("testsuites", {
        "name": _text(name), "tests": str(sum(len(s.cases) for s in suites)),
        "failures": str(sum(s.count("failure") for s in suites)),
        "errors": str(sum(s.count("error") for s in suites)),
        "time": _seconds(sum(s.time or 0.0 for s in suites))})
    for i, suite in enumerate(suites):
        el = ET.SubElement(root, "testsuite", {
            "name": _text(suite.name), "tests": str(len(suite.cases)),
            "failures": str(suite.count("failure")), "errors": str(suite.count("error")),
            "skipped": str(suite.count("skipped")), "time": _seconds(suite.time),
            "id": str(i)})
        for case in suite.cases:
            attrs = {"name": _text(case.name), "classname": _text(case.classname)}
            if case.time is not None:
                attrs["time"] = _seconds(case.time)
            c = ET.SubElement(el, "testcase", attrs)
            if case.skipped is not None:
                ET.SubElement(c, "skipped", {"message": _text(case.skipped)})
            for tag, message in (("error", case.error), ("failure", case.failure)):
                if message is not None:
                    sub = ET.SubElement(c, tag, {"message": _text(message),
                                                 "type": _text(case.kind or tag)})
                    sub.text = _text(case.detail) if case.detail else None
            if case.output:
                ET.SubElement(c, "system-out").text = _text(case.output)
    ET.indent(root)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            + ET.tostring(root, encoding="unicode") + "\n")


__all__ = ["Case", "Suite", "to_xml"]

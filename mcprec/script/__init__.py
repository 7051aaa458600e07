"""Scripted sessions: mcprec as the client, for server authors with no client at hand.

- ``load_scenarios`` reads and checks scenario files (TOML; ``scenario``)
- ``record_scripts`` plays them against a server through the recording machinery (``run``)
- ``starter_scenario`` writes a first scenario from what a server lists (``starter``)
"""

from __future__ import annotations

from .client import ScriptedClient, StepFailed
from .run import ScriptRun, record_scripts
from .scenario import Scenario, ScenarioError, load_scenario, load_scenarios
from .starter import starter_scenario

__all__ = ["Scenario", "ScenarioError", "ScriptRun", "ScriptedClient", "StepFailed",
           "load_scenario", "load_scenarios", "record_scripts", "starter_scenario"]

"""`run --attack FILE` (docs/attacks.md): the attack put on the suite's tool-result seam, and
the attack figures of the finished run."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from callgate.gating.attack_gate import (
    AttackFigures,
    attack_checks,
    attack_figures,
    attack_messages,
    attack_outcomes,
)
from callgate.suites.attacks import Attack, load_attack, suite_transform


def attacked_suite(suite: Any, path: Path) -> tuple[Any, Attack]:
    """The suite with the attack file's transform on its seam (a bad file: InputError)."""
    attack = load_attack(path, suite.tools)
    return dataclasses.replace(suite, result_transform=suite_transform(attack)), attack


def attack_result(suite: Any, attack: Attack, live: Any, store: Any) -> AttackFigures:
    """The figures of the attacked attempts of the run just made, kept in its scores (the
    release's scores file carries them, and `gate` applies the attack gate to them)."""
    run_id = live.result.run_id
    found = attack_outcomes(suite, attack, live.result.verdicts,
                            lambda case_id, repeat: store.response_body(run_id, case_id, repeat))
    fingerprint = hashlib.sha256(attack.model_dump_json().encode()).hexdigest()
    figures = attack_figures(found, max_rise=attack.max_rise, ceiling=attack.ceiling,
                             fingerprint=fingerprint)
    store.set_run_attack(run_id, figures.model_dump(mode="json"))  # kept with the release
    return figures


def attack_lines(figures: AttackFigures) -> list[str]:
    """The attack figures as console lines (checked against zero: no baseline is read here)."""
    return attack_messages(attack_checks(figures, None), figures)

"""`run --attack FILE` (docs/attacks.md): the attack put on the suite's tool-result seam, and
the attack figures of the finished run."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

from callgate.errors import InputError
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


def clean_attempts(store: Any, suite: Any, agent: str, release: str
                   ) -> list[tuple[str, bool]]:
    """(case id, right arguments) of every scored attempt of the clean run `agent`'s `release`
    on this suite: the utility the attacked attempts are paired with (`--clean-release`).
    InputError when there is no such finished run, it ran another version of the suite, or it
    was itself attacked."""
    where = f"--clean-release {release}"
    run = store.find_stored_run(suite.name, agent, release)
    if run is None:
        raise InputError(where, f"no finished run of agent {agent!r} release {release!r} on "
                                f"suite {suite.name!r} in the store")
    if run["suite"] != suite.fingerprint:
        raise InputError(where, f"agent {agent!r} release {release!r} ran another version of "
                                f"suite {suite.name!r} (fingerprint {run['suite'][:12]}, this "
                                f"one {suite.fingerprint[:12]}): the cases are not the same")
    if run.scores is not None and run.scores.get("attack") is not None:
        raise InputError(where, f"agent {agent!r} release {release!r} was itself made with "
                                "--attack: give the clean run's release")
    return [(row["case_id"], bool(row["right_arguments"]))
            for row in store.verdicts(run["id"]) if row["status"] == "scored"]


def attack_result(suite: Any, attack: Attack, live: Any, store: Any,
                  clean: list[tuple[str, bool]] | None = None) -> AttackFigures:
    """The figures of the attacked attempts of the run just made, kept in its scores (the
    release's scores file carries them, and `gate` applies the attack gate to them); `clean`:
    the clean run's attempts (`clean_attempts`), for the paired utility."""
    run_id = live.result.run_id
    found = attack_outcomes(suite, attack, live.result.verdicts,
                            lambda case_id, repeat: store.response_body(run_id, case_id, repeat))
    fingerprint = hashlib.sha256(attack.model_dump_json().encode()).hexdigest()
    figures = attack_figures(found, clean, max_rise=attack.max_rise, ceiling=attack.ceiling,
                             fingerprint=fingerprint)
    store.set_run_attack(run_id, figures.model_dump(mode="json"))  # kept with the release
    return figures


def attack_lines(figures: AttackFigures) -> list[str]:
    """The attack figures as console lines (checked against zero: no baseline is read here)."""
    return attack_messages(attack_checks(figures, None), figures)

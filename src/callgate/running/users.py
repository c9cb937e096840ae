"""The simulated user's part in a live run (running.simulated_user): its player made for the
run, scenario cases refused without one, and a failed conversation the user is to blame for
recorded as the user's failure."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from callgate.checks.simulator_blame import Played
from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.judging.step import JudgeStep
from callgate.judging.user_fidelity import fidelity_payloads, judged_blame
from callgate.models.pacing import Pacers
from callgate.models.routes import route_for
from callgate.models.simulated_user import SimulatedUser
from callgate.running.cache import line_text
from callgate.running.conversation import Talk
from callgate.running.counters import StopSwitch
from callgate.running.model_source import ModelSource
from callgate.running.simulated_user import UserPlayer, blamed_line
from callgate.store.db import Store
from callgate.suites.responses import Response, parse_response
from callgate.suites.suite import Suite


def player_of(user: SimulatedUser, environ: Mapping[str, str], concurrency: int | None,
              pacers: Pacers, stop: StopSwitch | None = None) -> UserPlayer:
    """The player of a run: the user model as a source, paced with the run's pacers (one per
    endpoint: shared with the candidate's when they share one), sending nothing once the run
    is `stop`ped, as the candidate's model does."""
    route = route_for(user.candidate)
    return UserPlayer(user, ModelSource(user.candidate, route, environ=environ,
                                        concurrency=concurrency, pacers=pacers, stop=stop),
                      route)


@dataclass
class UserJudge:
    """The user_fidelity judge of a run (`run --user-judge`): the step, and where it reads."""

    step: JudgeStep
    store: Store
    suite: Suite

    async def faults(self, talk: Talk) -> list[str]:
        """Why the judge blames the conversation's simulated user (empty: it does not)."""
        case = self.suite.cases[talk.conversation.case_id]
        played = talk.played
        if case.scenario is None or not isinstance(played, Played):
            return []
        opening = self.suite.raw_cases[case.id]["messages"]
        payloads = fidelity_payloads(opening, case.scenario, played.transcript, played.texts)
        return await judged_blame(self.step, self.store, payloads)


async def blamed(talk: Talk, checked: Verdict | None, check: Callable[[Response], Verdict],
                 judge: UserJudge | None = None) -> tuple[Talk, Verdict | None]:
    """A conversation and its checks, as recorded: one that failed while its simulated user
    is at fault (`talk.user_faults`, or else the user_fidelity `judge`'s fail) becomes the
    user's failure (`checked` None: it is checked again as such)."""
    if talk.response.error is not None or not (talk.user_faults or judge is not None):
        return talk, checked
    if not isinstance(talk.played, Played):
        return talk, checked
    verdict = checked if checked is not None else await asyncio.to_thread(check, talk.response)
    if verdict.status != "scored" or verdict.right_arguments:
        return talk, verdict
    faults = talk.user_faults or (await judge.faults(talk) if judge is not None else [])
    if not faults:
        return talk, verdict
    line = blamed_line(json.loads(talk.line), faults)
    return replace(talk, response=parse_response(line), line=line_text(line)), None


def refuse_unplayed(suite: Suite, player: UserPlayer | None) -> None:
    """A live run of scenario cases needs a simulated user (against a model or a target)."""
    if player is None:
        for case_id, case in suite.cases.items():
            if case.scenario is not None:
                raise CallgateError(f"case {case_id!r} has a scenario: give --user SPEC (a "
                                    "simulated user, e.g. --user default) to play it")


def has_scenarios(suite: Suite) -> bool:
    """Whether a simulated user has anything to play: a suite with no scenario case simulates
    nothing, so no simulator is asked or kept (and another one next release is no change the
    gate names)."""
    return any(case.scenario is not None for case in suite.cases.values())

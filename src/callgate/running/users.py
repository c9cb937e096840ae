"""The simulated user's part in a live run (running.simulated_user): its player made for the
run, scenario cases refused without one, and a failed conversation the user is to blame for
recorded as the user's failure."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import replace

from callgate.checks.verdict import Verdict
from callgate.errors import CallgateError
from callgate.models.pacing import Pacers
from callgate.models.routes import route_for
from callgate.models.simulated_user import SimulatedUser
from callgate.running.cache import line_text
from callgate.running.conversation import Talk
from callgate.running.counters import StopSwitch
from callgate.running.model_source import ModelSource
from callgate.running.simulated_user import UserPlayer, blamed_line
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


async def blamed(talk: Talk, checked: Verdict | None, check: Callable[[Response], Verdict]
                 ) -> tuple[Talk, Verdict | None]:
    """A conversation and its checks, as recorded: one that failed while its simulated user
    is at fault (`talk.user_faults`) becomes the user's failure (`checked` None: it is
    checked again as such)."""
    if not talk.user_faults or talk.response.error is not None:
        return talk, checked
    verdict = checked if checked is not None else await asyncio.to_thread(check, talk.response)
    if verdict.status != "scored" or verdict.right_arguments:
        return talk, verdict
    line = blamed_line(json.loads(talk.line), talk.user_faults)
    return replace(talk, response=parse_response(line), line=line_text(line)), None


def refuse_unplayed(suite: Suite, player: UserPlayer | None) -> None:
    """A live run of scenario cases needs a simulated user (against a model or a target)."""
    if player is None:
        for case_id, case in suite.cases.items():
            if case.scenario is not None:
                raise CallgateError(f"case {case_id!r} has a scenario: give --user SPEC (a "
                                    "simulated user, e.g. --user default) to play it")

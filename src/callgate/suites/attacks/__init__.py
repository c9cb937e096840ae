"""Instructions injected into tool output (docs/attacks.md): a bundled library of published
attack templates, the attack file `run --attack FILE` reads, and the ToolResultTransform that
puts a filled template where a case's untrusted text enters (on the one seam,
suites.interception)."""

from callgate.suites.attacks.plan import (
    Attack,
    Goal,
    GoalCall,
    Untrusted,
    attack_transform,
    fill,
    inject,
    load_attack,
    suite_transform,
    template_of,
    templates,
)

__all__ = ["Attack", "Goal", "GoalCall", "Untrusted", "attack_transform", "fill", "inject",
           "load_attack", "suite_transform", "template_of", "templates"]

"""Faults on demand, for replay and for live recording alike.

``rules``: the rule grammar (``SELECTOR EFFECT [WHEN...]``) and the choice of a fault per
request; ``adversary``: the adversarial rewrites of an answer (poison, rug-pull,
schema-violation, oversize, empty); ``live``: the rules applied to a live server's messages by
``mcprec record``; ``follow``: what the client did after each fault. Nothing here is imported
unless faults are given.
"""

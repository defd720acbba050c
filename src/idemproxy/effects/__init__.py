"""The exactly-once feature: each effect claimed, sent once, its outcome recorded and replayed.

``proxy/`` moves the bytes (routing, forwarding, relaying, headers); this package decides what
an effectful request becomes. ``flow.py`` runs one request through it, ``context.py`` is the
request as every part sees it, ``answers.py`` and ``refusals.py`` are what the agent gets.

One word per meaning, in code, docs and messages alike:

- **claim**: take a record's key for one attempt. It comes to ``Claimed``, ``Standing`` (the
  record already there) or ``Paused`` (the agent is).
- **settle**: the attempt that holds the fence writes its own outcome. Only that.
- **release**: give a claim back unsent, settled ``not_applied``, because the store's replicas
  did not confirm it.
- **resolve**: close a record whose outcome is ``unknown``, by compare-and-set, whoever learned
  the outcome: an operator's decision, a recovery, or a reconcile.
- **reconcile**: learn an effect's true outcome from the upstream itself: a re-send under the
  upstream's own dedupe key, or a read-back. An answer whose status does not tell is
  reconciled at once (``reconcile_answer``); an unknown record when a repeat comes
  (``reconcile``); an append by the read-back its next attempt makes before sending.
- **read back**: the GET that shows what the upstream holds; a means of reconciling. What it
  found is a **finding** (present, absent, unsure).
- **plan**: how an adapter may reconcile an unknown outcome: re-send, read back, or review.
- **decision**: an operator's answer to a review item, ``applied`` or ``not_applied``.
- **clear**: delete a batch's ``not_applied`` records so its recovery may run again.
- **free**: said of a key that may be claimed again; never a verb.
- **replay**: answer a repeat with the recorded response. **coalesce**: a repeat that waited
  for the attempt in flight and got its result.
- **status rules** (``status.py``): what an upstream status says about the effect, and the
  settlement it makes.
"""

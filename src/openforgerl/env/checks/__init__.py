"""Declarative checks (`tests/checks.toml`): the spec and its parser (`spec`), and the judging of a spec
against the evidence a verifier gathered (`evaluate`). Each `kind` of check is one entry of
`spec.CHECK_KINDS`; the built-in ones (`record`, `no_record`, `called`, `not_called`, `file`, `answer`)
register in `evaluate`, and an environment registers its own kinds there too (Claw's graders).

Importing this package imports nothing else (the verifiers import it inside every sandbox).
"""

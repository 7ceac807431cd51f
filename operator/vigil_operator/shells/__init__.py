"""The operator's shells: one per feature of a resync, each owning its state and carrying out what its pure
decision (vigil_operator.domain) says. `vigil_operator.runtime` composes them."""

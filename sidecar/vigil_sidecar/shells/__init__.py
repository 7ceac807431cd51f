"""The sidecar's shells: one per feature, each owning its state and carrying out what its pure decision says
(the watchdog, the bridge engine, the budget ledger, the signals' judges). `vigil_sidecar.runtime` composes them."""

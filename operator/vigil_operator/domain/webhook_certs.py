"""When the operator's own webhook certificates change, so that the apiserver never meets a serving certificate it
does not trust (`--webhook-secret`: the operator keeps the CA and the serving certificate in a Secret and the CA
bundle in the webhook configurations).

A new CA is trusted before anything it signed is served, and an old one is trusted until nothing it signed can
still be served:

1. the new CA joins the bundle beside the old one (the Secret first, then the webhook configurations' caBundle);
2. once the apiservers have had `propagation` to read that bundle, the serving certificate is reissued from the
   new CA (every replica reloads it from the Secret within `propagation`);
3. once every replica serves the new certificate (`propagation` after it was issued), the old CA leaves the bundle.

A serving certificate renewed under the same CA changes no trust and is reissued at once. One step per call: the
caller applies it, records what it did, and asks again (`Wait` says until when nothing is due).

Taking over from the chart's certificate (what an upgrade to operator-kept certificates meets: the apiservers
trust the chart's CA, the replicas still running serve its certificate) is the same rotation begun half way: the
chart's CA and certificate are adopted as the outgoing ones, beside a new CA that signs nothing yet. One thing
differs: the replicas of the release before the upgrade serve the chart's certificate until the rollout has
replaced them, and they never reload from the Secret, so the chart's CA stays trusted until they are gone: the
caller says whether a pod of the release's earlier rollout is left (`old_replicas`). When it cannot tell (no pod to
read, no permission), the chart's CA stays trusted `HANDOVER_PROPAGATIONS` propagations after the takeover (10 min at
the chart's 120 s: a Deployment's default progress deadline, after which a rollout has failed). A time alone is not
enough: a rollout slower than it leaves an old replica serving a certificate the apiservers no longer trust.
"""

import datetime
from dataclasses import dataclass
from typing import Final

HANDOVER_PROPAGATIONS: Final = 5
"""How many propagations the chart's CA stays trusted after the takeover: the old replicas' rollout."""

ROTATE_ANNOTATION = "vigil.dev/rotate"
"""Set to any new value on the Secret to ask for a new CA now (e.g. `kubectl annotate --overwrite secret ...
vigil.dev/rotate=$(date +%s)`)."""


@dataclass(frozen=True)
class Cert:
    """What the plan needs of a certificate."""

    fingerprint: str
    not_before: datetime.datetime
    not_after: datetime.datetime
    issuer: str
    """The fingerprint of the CA that signed it (a CA: its own)."""

    def due(self, now: datetime.datetime, renew_at: float) -> bool:
        """Past `renew_at` (a fraction) of its validity: renewed then, long before it expires."""
        return now >= self.not_before + (self.not_after - self.not_before) * renew_at


@dataclass(frozen=True)
class Material:
    """The Secret's content as the plan sees it."""

    bundle: tuple[Cert, ...]
    """The trusted CAs, oldest first; the last is the one whose key the Secret holds (the signer)."""
    leaf: Cert
    bundle_published_at: datetime.datetime | None
    """When the webhook configurations took this bundle (None: not yet)."""
    leaf_issued_at: datetime.datetime
    rotate_requested: str = ""
    """The Secret's `vigil.dev/rotate` annotation."""
    rotated_for: str = ""
    """The request last honoured (a new CA made for it)."""
    adopted_at: datetime.datetime | None = None
    """When the chart's certificate was taken over, while its CA is in the bundle (None: not a takeover)."""

    @property
    def signer(self) -> Cert:
        return self.bundle[-1]


@dataclass(frozen=True)
class Predecessor:
    """The certificate served before the operator kept its own (the chart's Secret): its CA and its certificate."""

    ca: Cert
    leaf: Cert

    def servable(self, now: datetime.datetime) -> bool:
        """Its CA signed its certificate and neither has expired: worth serving on while a new CA becomes trusted."""
        return self.leaf.issuer == self.ca.fingerprint and now < min(self.leaf.not_after, self.ca.not_after)


@dataclass(frozen=True)
class Policy:
    ca_validity: datetime.timedelta = datetime.timedelta(days=365)
    leaf_validity: datetime.timedelta = datetime.timedelta(days=30)
    renew_at: float = 2 / 3
    propagation: datetime.timedelta = datetime.timedelta(minutes=2)
    """How long a change takes to reach every reader: the apiservers' view of the webhook configurations, and each
    replica's reload of the Secret (it reads it every `propagation / 4`)."""


@dataclass(frozen=True)
class Create:
    """No material yet (or none readable): a CA and a serving certificate, the bundle that CA alone."""

    why: str


@dataclass(frozen=True)
class Adopt:
    """No material yet, but the predecessor's certificate is trusted and served: its CA and certificate kept as the
    outgoing ones, a new CA beside them (the bundle both, unpublished), as after an `AddCA`."""

    why: str


@dataclass(frozen=True)
class Publish:
    """The webhook configurations' caBundle made the Secret's bundle."""

    why: str


@dataclass(frozen=True)
class AddCA:
    """A new CA appended to the bundle (it signs nothing yet)."""

    why: str


@dataclass(frozen=True)
class IssueLeaf:
    """A new serving certificate from the newest CA."""

    why: str


@dataclass(frozen=True)
class DropOldCAs:
    """The bundle cut to the newest CA, the only one that signed what is served."""

    why: str


@dataclass(frozen=True)
class Wait:
    until: datetime.datetime


Step = Create | Adopt | Publish | AddCA | IssueLeaf | DropOldCAs | Wait


def plan(
    material: Material | None,
    published: frozenset[str] | None,
    now: datetime.datetime,
    policy: Policy,
    predecessor: Predecessor | None = None,
    *,
    old_replicas: bool | None = None,
) -> Step:
    """The next step; `published` is the set of CA fingerprints in the webhook configurations' caBundle (None: a
    configuration is missing, or their bundles differ); `predecessor`, the certificate served before (read only
    while there is no material); `old_replicas`, during a takeover, whether a pod of the release's earlier rollout
    is left (None: unknown)."""
    if material is None:
        if predecessor is not None and predecessor.servable(now):
            return Adopt("the chart's certificate is served: its CA stays trusted until a new one has taken over")
        return Create("no webhook certificate yet")
    bundle = frozenset(ca.fingerprint for ca in material.bundle)
    if published != bundle or material.bundle_published_at is None:
        return Publish("the webhook configurations do not trust exactly the Secret's CAs")
    published_at = material.bundle_published_at
    return _rotating(material, published_at, now, policy, old_replicas) or _renewing(material, now, policy)


def _rotating(
    material: Material, published_at: datetime.datetime, now: datetime.datetime, policy: Policy,
    old_replicas: bool | None,
) -> Step | None:  # fmt: skip
    """A rotation under way: the serving certificate moves to the new CA once it is trusted, then the old CA goes
    once nothing it signed is served; None when none is under way."""
    if material.leaf.issuer != material.signer.fingerprint:
        trusted_since = published_at + policy.propagation
        if now < trusted_since:
            return Wait(trusted_since)
        return IssueLeaf("the new CA is trusted by now: the serving certificate moves to it")
    if len(material.bundle) > 1:
        served_since = material.leaf_issued_at + policy.propagation
        if material.adopted_at is not None:  # the old replicas serve the chart's certificate until replaced
            if old_replicas:
                return Wait(max(served_since, now + policy.propagation / 4))  # asked again then
            if old_replicas is None:
                served_since = max(served_since, material.adopted_at + policy.propagation * HANDOVER_PROPAGATIONS)
        if now < served_since:
            return Wait(served_since)
        return DropOldCAs("every replica serves the new CA's certificate by now")
    return None


def _renewing(material: Material, now: datetime.datetime, policy: Policy) -> Step:
    """One CA, its certificate served: a new CA when asked or due, a new certificate when due, else the wait."""
    if material.rotate_requested and material.rotate_requested != material.rotated_for:
        return AddCA(f"rotation asked ({ROTATE_ANNOTATION}={material.rotate_requested})")
    if material.signer.due(now, policy.renew_at):
        return AddCA(f"the CA expires at {material.signer.not_after.isoformat()}")
    if material.leaf.due(now, policy.renew_at):
        return IssueLeaf(f"the serving certificate expires at {material.leaf.not_after.isoformat()}")
    return Wait(min(_due_at(material.leaf, policy.renew_at), _due_at(material.signer, policy.renew_at)))


def _due_at(cert: Cert, renew_at: float) -> datetime.datetime:
    return cert.not_before + (cert.not_after - cert.not_before) * renew_at

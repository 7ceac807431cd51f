"""What a ConsumerGroup may make the operator do on its writer's behalf (pure).

Write access to a ConsumerGroup must not become "run any image" or "read any Secret and send it to any broker": the
operator injects the sidecar image a CR names into pods, mounts the Secrets it references into them, and reads
those Secrets itself to reach the broker the CR names. An image other than the operator's own is allowed only by a
pattern the platform team set (`--allowed-sidecar-image`); Secrets are always the CR's own namespace's, and, when
the team names patterns (`--allowed-secret`), only those; and the brokers a CR may name are, when the team names
patterns (`--allowed-bootstrap-server`), only those: a Secret goes to no broker the platform did not allow.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase

from vigil_operator.domain.spec import ConsumerGroupSpec, SecretKeyRef


@dataclass(frozen=True)
class Tenancy:
    default_image: str
    """The operator's own sidecar image (`--sidecar-image`): always allowed."""
    allowed_images: tuple[str, ...] = ()
    """Shell-style patterns (`fnmatch`, case-sensitive) of further images `spec.sidecar.image` may name."""
    allowed_secrets: tuple[str, ...] = ()
    """Patterns of the Secret names a ConsumerGroup may reference; none: any Secret of its namespace."""
    allowed_bootstrap_servers: tuple[str, ...] = ()
    """Patterns of the `host:port` each of `spec.kafka.bootstrapServers` must match (host names compared in lower
    case, as DNS does); none: any broker."""


def refusals(spec: ConsumerGroupSpec, tenancy: Tenancy) -> list[str]:
    """One line per field the platform's allow-lists refuse, naming it and what is allowed."""
    out: list[str] = []
    image = spec.sidecar.image
    if image is not None and image != tenancy.default_image and not _matches(image, tenancy.allowed_images):
        allowed = f"the operator's own {tenancy.default_image!r}" + "".join(f", {p!r}" for p in tenancy.allowed_images)
        out.append(f"spec.sidecar.image: {image!r} is not allowed (allowed: {allowed}; --allowed-sidecar-image)")
    if tenancy.allowed_secrets:
        patterns = ", ".join(repr(p) for p in tenancy.allowed_secrets)
        for field, ref in secret_refs(spec):
            if not _matches(ref.name, tenancy.allowed_secrets):
                out.append(f"{field}.name: Secret {ref.name!r} is not allowed (allowed: {patterns}; --allowed-secret)")
    if tenancy.allowed_bootstrap_servers:
        lowered = tuple(p.lower() for p in tenancy.allowed_bootstrap_servers)
        refused = [s for s in bootstrap_servers(spec) if not _matches(s.lower(), lowered)]
        if refused:
            patterns = ", ".join(repr(p) for p in tenancy.allowed_bootstrap_servers)
            out.append(
                f"spec.kafka.bootstrapServers: {', '.join(map(repr, refused))} not allowed (allowed: {patterns};"
                " --allowed-bootstrap-server)"
            )
    return out


def bootstrap_servers(spec: ConsumerGroupSpec) -> list[str]:
    """The CR's brokers, one `host:port` each, as Kafka clients split the list (commas, blanks around them)."""
    return [s.strip() for s in spec.kafka.bootstrap_servers.split(",") if s.strip()]


def secret_refs(spec: ConsumerGroupSpec) -> Iterator[tuple[str, SecretKeyRef]]:
    """Every Secret reference of the spec, with its field path as the CR spells it."""
    sasl, tls = spec.kafka.sasl, spec.kafka.tls
    if sasl is not None:
        if sasl.username_secret_ref is not None:
            yield "spec.kafka.sasl.usernameSecretRef", sasl.username_secret_ref
        yield "spec.kafka.sasl.passwordSecretRef", sasl.password_secret_ref
    if tls is not None:
        for field, ref in (("caSecretRef", tls.ca_secret_ref), ("certSecretRef", tls.cert_secret_ref),
                           ("keySecretRef", tls.key_secret_ref)):  # fmt: skip
            if ref is not None:
                yield f"spec.kafka.tls.{field}", ref


def _matches(value: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatchcase(value, p) for p in patterns)

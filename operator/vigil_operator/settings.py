"""The operator's settings: flags of `vigil operator`, validated once by the loader the sidecar uses too
(`vigil_core.settings`) and handed to the handlers module before it is imported (kopf registers handlers at import
time, and the admission webhook's registration depends on them). The handlers module imported another way (`kopf
run`) reads the same names as `VIGIL_OPERATOR_<NAME>` env vars."""

import ipaddress
import os
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from vigil_core import names, settings
from vigil_core.events import EVENTS_TOPIC_DEFAULT
from vigil_core.settings import Unset
from vigil_core.version import VERSION
from vigil_operator.domain.injection import InjectionConfig

ENV_PREFIX = "VIGIL_OPERATOR_"
POD_NAME_ENV = "VIGIL_POD_NAME"
"""The operator's pod name, from the downward API (`fieldRef: metadata.name`, set by the chart): its identity as the
Lease holder and in kopf's logs."""


def _ip_address(value: str) -> str:
    """A listen address as an IP literal: a host name would be resolved only when the server starts, inside kopf,
    which retries a failed startup forever instead of exiting with the flag named."""
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"expected an IP address to listen on (0.0.0.0: every address), got {value!r}") from None
    return value


def _names(value: object) -> object:
    """A comma-separated string (an env var) as its names; anything else as given."""
    if isinstance(value, str):
        return tuple(n.strip() for n in value.split(",") if n.strip())
    return value


KubeName = Annotated[str, AfterValidator(names.kubernetes_name)]
"""A Kubernetes object name: one the apiserver would refuse is refused as the flag is read, not on first use."""


class OperatorSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    resync_seconds: Annotated[float, Field(ge=1, le=3600)] = 30.0
    """How often each group is described (also at once on every spec change); its status is written when it changes."""
    namespace: Annotated[str, AfterValidator(names.namespace_name)] = "vigil-system"
    """The operator's own namespace: its pods are never injected; its leader Lease is there."""
    standalone: bool = False
    """Act without leader election: only for one replica run by hand (replicas of a Deployment elect a leader by the
    Lease, so only one acts, also while a rollout runs two)."""
    leader_lease: KubeName = "vigil-operator"
    """The Lease (in `namespace`) the replicas elect their leader by: only its holder resyncs ConsumerGroups."""
    events_topic: Annotated[str, AfterValidator(names.topic_or_off)] = EVENTS_TOPIC_DEFAULT
    """Where the sidecars publish stalls (read) and the operator publishes group snapshots ("" = off)."""
    sidecar_image: str = f"vigil-sidecar:{VERSION}"
    """The injected sidecar's image (a ConsumerGroup's `spec.sidecar.image` overrides it)."""
    sidecar_image_pull_secret: Annotated[tuple[KubeName, ...], BeforeValidator(_names)] = ()
    """An imagePullSecret the injected pod gets for the sidecar image (a Secret in the pod's namespace), added to its
    `spec.imagePullSecrets` unless there (env: comma-separated)."""
    allowed_sidecar_image: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], BeforeValidator(_names)] = ()
    """A pattern (shell-style: `registry.example/vigil-sidecar:*`) of further images a ConsumerGroup's
    `spec.sidecar.image` may name; repeatable (env: comma-separated). None: only `--sidecar-image`."""
    allowed_secret: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], BeforeValidator(_names)] = ()
    """A pattern of the Secret names a ConsumerGroup may reference (always in its own namespace); repeatable (env:
    comma-separated). None: any Secret of the ConsumerGroup's namespace."""
    allowed_bootstrap_server: Annotated[tuple[Annotated[str, Field(min_length=1)], ...], BeforeValidator(_names)] = ()
    """A pattern (shell-style: `kafka-*.kafka.svc:9093`) of the `host:port` a ConsumerGroup's
    `spec.kafka.bootstrapServers` may name, each of them; repeatable (env: comma-separated). None: any broker."""
    reject_unknown_group: bool = False
    """A labelled pod naming a ConsumerGroup that does not exist: reject it (else admit it unchanged, warn)."""
    state_dir: Path = Path("/tmp/vigil-operator")  # noqa: S108 - private 0700 dir for credential files
    """Where the operator keeps the Kafka credentials it reads from Secrets (mode 0600)."""
    metrics_bind: Annotated[str, AfterValidator(_ip_address)] = "0.0.0.0"  # noqa: S104 - scraped from outside the pod
    """Where Prometheus `/metrics` listens: every address, as it is scraped from outside the pod."""
    metrics_port: Annotated[int, Field(ge=0, le=65535)] = 8081
    """Prometheus `/metrics` port (0: off)."""
    webhook: bool = True
    """Serve the admission webhooks: sidecar injection into pods, and the ConsumerGroup checks CEL cannot make."""
    webhook_bind: Annotated[str, AfterValidator(_ip_address)] = "0.0.0.0"  # noqa: S104 - called from outside the pod
    """Where the webhooks listen: every address, as the apiserver calls in from outside the pod."""
    webhook_port: Annotated[int, Field(ge=1, le=65535)] = 9443
    """The webhooks' HTTPS port."""
    webhook_host: Annotated[str | None, Unset("the bind address, 127.0.0.1 when that is every address")] = None
    """The host name the apiserver uses to reach the webhook (managed mode: written into the configuration)."""
    webhook_cert: Annotated[Path | None, Unset("generated with a throwaway CA")] = None
    """The webhooks' PEM certificate (e.g. from the chart / cert-manager), with its key."""
    webhook_key: Annotated[Path | None, Unset("generated with the certificate")] = None
    """The PEM key of the webhooks' certificate."""
    webhook_ca: Path | None = None
    """The CA that signed the webhooks' certificate, for the webhook configurations (managed mode); a generated
    certificate's is its throwaway CA."""
    webhook_secret: KubeName | None = None
    """Keep the webhooks' CA and certificate in this Secret of `namespace` (it must exist; the chart creates it
    empty), make them when it is empty, rotate them before they expire without a moment the apiserver would not
    trust what is served, and reload them in place; the webhook configurations `webhook_configuration` get the CA
    bundle. Instead of `webhook_cert` (the chart's `webhook.operatorCertificates`)."""
    webhook_adopt_secret: KubeName | None = None
    """A Secret of `namespace` holding the certificate served before `webhook_secret` was used (the chart's own,
    `ca.crt`/`tls.crt`/`tls.key`): while `webhook_secret` is empty, its CA and certificate are taken over as the
    outgoing ones of a rotation to a new CA, so a switch to operator-kept certificates never serves a certificate
    the apiserver does not trust yet. Missing or unusable: a new CA and certificate are made."""
    webhook_configuration: KubeName | None = None
    """The Mutating- and ValidatingWebhookConfiguration (one name for both) whose caBundle the operator keeps, with
    `webhook_secret`."""
    webhook_ca_days: Annotated[int, Field(ge=1, le=36500)] = 365
    """Validity of a CA the operator makes (`webhook_secret`); a new one is made at two thirds of it."""
    webhook_cert_days: Annotated[int, Field(ge=1, le=3650)] = 30
    """Validity of a serving certificate the operator makes (`webhook_secret`); renewed at two thirds of it."""
    webhook_cert_propagation: Annotated[float, Field(ge=1, le=3600)] = 120.0
    """Seconds a certificate change takes to reach every apiserver and replica (`webhook_secret`): a new CA is
    trusted that long before it signs the served certificate, an old one that long after it signed the last; each
    replica reads the Secret every quarter of it."""
    webhook_managed: bool = False
    """Write the (Mutating|Validating)WebhookConfiguration itself (local runs); the chart owns it in production."""
    webhook_failure_policy: Literal["Ignore", "Fail"] = "Ignore"
    """Managed mode: the injection webhook's failurePolicy. Ignore: an operator outage never stops pods from
    starting (they start without the sidecar). Fail: they wait for the operator (a coordinated restart's
    replacement pod then always gets its sidecar)."""

    @model_validator(mode="after")
    def _one_certificate_source(self) -> "OperatorSettings":
        if (self.webhook_secret is None) != (self.webhook_configuration is None):
            raise ValueError("--webhook-secret and --webhook-configuration go together")
        if self.webhook_secret is not None and self.webhook_cert is not None:
            raise ValueError("--webhook-secret (the operator keeps the certificate) or --webhook-cert, not both")
        if self.webhook_adopt_secret is not None and self.webhook_secret is None:
            raise ValueError("--webhook-adopt-secret hands a certificate over to --webhook-secret: set both")
        if self.webhook_secret is not None and self.webhook_managed:
            raise ValueError("--webhook-secret keeps the caBundle of the chart's webhooks: not with --webhook-managed")
        return self

    def injection(self) -> InjectionConfig:
        return InjectionConfig(
            sidecar_image=self.sidecar_image,
            image_pull_secrets=self.sidecar_image_pull_secret,
            allowed_sidecar_images=self.allowed_sidecar_image,
            allowed_secrets=self.allowed_secret,
            allowed_bootstrap_servers=self.allowed_bootstrap_server,
            operator_namespace=self.namespace,
            events_topic=self.events_topic,
            reject_unknown_group=self.reject_unknown_group,
        )


def from_flags(flags: Mapping[str, object]) -> OperatorSettings:
    """The settings `vigil operator`'s flags give (by field name; None: not given, the default applies); ConfigError
    (one line naming the flag) if invalid. An empty value is a value ("" turns the events topic off)."""
    return settings.load(OperatorSettings, prefix=ENV_PREFIX, flags=flags, keep_empty=True)


def from_env(env: Mapping[str, str]) -> OperatorSettings:
    """The settings in `VIGIL_OPERATOR_<NAME>` variables, read by name: other `VIGIL_OPERATOR_*` variables are not
    ours to refuse (Kubernetes adds `<SERVICE>_SERVICE_HOST`, `_PORT_443_TCP`... for every Service in the
    namespace, and a release named `vigil-operator` has a Service `vigil-operator-webhook`)."""
    return settings.load(OperatorSettings, prefix=ENV_PREFIX, env=env, keep_empty=True)


_configured: list[OperatorSettings] = []
"""What `use` handed over (none or one)."""


def use(chosen: OperatorSettings) -> None:
    """Hand `vigil operator`'s settings to the handlers module (call before importing it)."""
    _configured[:] = [chosen]


def identity(env: Mapping[str, str]) -> str:
    """This replica among others (the Lease holder, kopf's logs): its pod name (a restarted container is the same
    replica), else host and pid."""
    return env.get(POD_NAME_ENV) or f"{socket.gethostname()}/{os.getpid()}"


def configured(env: Mapping[str, str]) -> OperatorSettings:
    """The settings `vigil operator` handed over (`use`), else the ones in `env` (`from_env`)."""
    return _configured[0] if _configured else from_env(env)


def refused(problem: str, code: int = 2) -> int:
    """`code`, after the one stderr line a refused setting gets, however the operator was started (`vigil operator`
    or `kopf run`)."""
    print(f"vigil operator: {problem}", file=sys.stderr)
    return code

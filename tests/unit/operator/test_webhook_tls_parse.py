"""What the operator reads back from its webhook certificates' Secret and from the configurations' caBundles."""

import base64
from typing import Any

import pytest

from vigil_operator import pki
from vigil_operator.domain.webhook_certs import ROTATE_ANNOTATION
from vigil_operator.webhook_tls import (
    ISSUED_AT,
    PUBLISHED_AT,
    ROTATED_FOR,
    common_name,
    fingerprints,
    parse,
    predecessor,
    service_names,
)

CA, OTHER = pki.new_ca("a"), pki.new_ca("b")
LEAF = pki.issue(CA, "svc.ns.svc", hosts=["svc.ns.svc"], server=True)


def secret(pems: dict[str, bytes], **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"resourceVersion": "7", "annotations": annotations},
        "data": {key: base64.b64encode(value).decode() for key, value in pems.items()},
    }


def b64(*pems: bytes) -> str:
    return base64.b64encode(b"".join(pems)).decode()


WRITTEN = {"ca.crt": CA.cert_pem(), "ca.key": CA.key_pem(), "tls.crt": LEAF.cert_pem(), "tls.key": LEAF.key_pem()}


def test_what_the_operator_wrote_reads_back_as_its_plan_sees_it() -> None:
    stored = parse(secret(WRITTEN, **{PUBLISHED_AT: "2026-11-26T10:00:00+00:00", ROTATE_ANNOTATION: "x",
                                      ROTATED_FOR: "x", ISSUED_AT: "2026-11-26T09:00:00+00:00"}))  # fmt: skip
    assert stored.resource_version == "7"
    material = stored.material
    assert material is not None
    assert [c.fingerprint for c in material.bundle] == [pki.fingerprint(CA.cert)]
    assert material.leaf.issuer == material.signer.fingerprint
    assert material.bundle_published_at is not None
    assert material.bundle_published_at.hour == 10
    assert (material.rotate_requested, material.rotated_for) == ("x", "x")


@pytest.mark.parametrize(
    ("pems", "why"),
    [
        ({}, "the chart's empty Secret"),
        ({**WRITTEN, "ca.key": OTHER.key_pem()}, "a CA key that is not the newest CA's"),
        ({**WRITTEN, "ca.crt": b"not a certificate"}, "garbage"),
        ({k: v for k, v in WRITTEN.items() if k != "tls.crt"}, "no serving certificate"),
    ],
)
def test_a_secret_without_usable_material_reads_as_none(pems: dict[str, bytes], why: str) -> None:
    assert parse(secret(pems)).material is None, why


CHART = {"ca.crt": CA.cert_pem(), "tls.crt": LEAF.cert_pem(), "tls.key": LEAF.key_pem()}
"""The chart's own Secret (kubernetes.io/tls with its CA; no CA key)."""


def test_the_chart_s_certificate_reads_as_a_predecessor_to_take_over() -> None:
    found = predecessor(secret(CHART))
    assert found is not None
    assert found.facts.ca.fingerprint == pki.fingerprint(CA.cert)
    assert found.facts.leaf.issuer == found.facts.ca.fingerprint
    assert (found.ca_pem, found.cert_pem, found.key_pem) == (CA.cert_pem(), LEAF.cert_pem(), LEAF.key_pem())


@pytest.mark.parametrize(
    ("found", "why"),
    [
        (None, "no Secret"),
        (secret({}), "an empty Secret"),
        (secret({k: v for k, v in CHART.items() if k != "tls.key"}), "no key to serve with"),
        (secret({**CHART, "tls.crt": b"not a certificate"}), "garbage"),
    ],
)
def test_no_predecessor_without_a_readable_certificate_and_key(found: dict[str, Any] | None, why: str) -> None:
    assert predecessor(found) is None, why


def test_a_predecessor_whose_ca_did_not_sign_its_certificate_is_not_servable() -> None:
    found = predecessor(secret({**CHART, "ca.crt": OTHER.cert_pem()}))
    assert found is not None
    assert found.facts.leaf.issuer == ""
    assert not found.facts.servable(found.facts.leaf.not_before)


def test_a_certificate_no_trusted_ca_signed_has_no_issuer_and_an_unpublished_bundle_no_time() -> None:
    foreign = pki.issue(OTHER, "svc.ns.svc", hosts=["svc.ns.svc"], server=True)
    material = parse(secret({**WRITTEN, "tls.crt": foreign.cert_pem(), "tls.key": foreign.key_pem()})).material
    assert material is not None
    assert material.leaf.issuer == ""
    assert material.bundle_published_at is None


def test_the_bundle_both_configurations_trust() -> None:
    both = b64(CA.cert_pem(), OTHER.cert_pem())
    assert fingerprints([both, b64(OTHER.cert_pem(), CA.cert_pem())]) == {
        pki.fingerprint(CA.cert),
        pki.fingerprint(OTHER.cert),
    }
    assert fingerprints([b64(CA.cert_pem()), b64(OTHER.cert_pem())]) is None  # they disagree
    assert fingerprints(["", ""]) == frozenset()  # as the chart renders them: no CA yet
    assert fingerprints(None) is None  # a configuration missing


@pytest.mark.parametrize(
    ("host", "names"),
    [
        ("vigil-webhook.vigil-system.svc", ["vigil-webhook", "vigil-webhook.vigil-system",
                                            "vigil-webhook.vigil-system.svc",
                                            "vigil-webhook.vigil-system.svc.cluster.local"]),
        ("webhook.example.com", ["webhook.example.com"]),
        ("127.0.0.1", ["127.0.0.1"]),
    ],
)  # fmt: skip
def test_the_names_a_serving_certificate_is_for(host: str, names: list[str]) -> None:
    assert service_names(host) == names


def test_a_long_release_and_namespace_still_get_a_certificate() -> None:
    """A CN holds at most 64 characters: the e2e release `vigil-webhook-certificates` in its namespace of that name
    made `...svc.cluster.local` 79 long, and the certificate could not be made."""
    hosts = service_names("vigil-webhook-certificates-webhook.vigil-webhook-certificates.svc")
    name = common_name(hosts)
    assert len(name) <= 64
    assert name == "vigil-webhook-certificates-webhook.vigil-webhook-certificates"
    leaf = pki.issue(CA, name, hosts=hosts, server=True)
    assert leaf.cert.subject.rfc4514_string() == f"CN={name}"

"""The ConsumerGroup custom resource's names (`crds/consumergroups.vigil.dev.yaml`): the operator reconciles it,
the report writes its `status.report`, `vigil rollout` reads it. Pure constants."""

from typing import Final

API_GROUP: Final = "vigil.dev"
VERSION: Final = "v1alpha1"
KIND: Final = "ConsumerGroup"
PLURAL: Final = "consumergroups"
SINGULAR: Final = "consumergroup"
SHORT_NAME: Final = "kcg"

{{/* What the operator does in the namespaces it watches; every verb is a call it makes. */}}
{{- define "vigil.operatorRules" -}}
# kopf: watch and index ConsumerGroups, annotate them (progress, diff base) and manage its finalizer.
- apiGroups: ["vigil.dev"]
  resources: ["consumergroups"]
  verbs: ["get", "list", "watch", "patch", "update"]
# status by server-side apply, field manager vigil-operator.
- apiGroups: ["vigil.dev"]
  resources: ["consumergroups/status"]
  verbs: ["get", "patch", "update"]
# pods naming a group (index, events); delete: departed members' pods and coordinated restarts (uid precondition).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "delete"]
# Kafka credentials referenced by a ConsumerGroup's spec.kafka.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# Events on ConsumerGroups (condition changes, stalls, rollouts, removals).
- apiGroups: ["", "events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# the workload of a static group: revision, updateStrategy, replicas.
- apiGroups: ["apps"]
  resources: ["statefulsets"]
  verbs: ["get"]
# the eviction budget per group: the Lease (server-side apply; read and replace for the operator's removals) ...
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "patch", "update"]
# ... and the Role + RoleBinding that let the workload's ServiceAccount get/update exactly that Lease.
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["get", "create", "patch"]
{{- end -}}
{{- define "vigil.clusterRules" -}}
# the nodes' kubelet versions (native sidecars need >= 1.29).
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list", "watch"]
# kopf's discovery of the resources it serves.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- end -}}
{{- define "vigil.reportRules" -}}
# the report's summary in status.report (server-side apply, field manager vigil-report).
- apiGroups: ["vigil.dev"]
  resources: ["consumergroups"]
  verbs: ["get", "list"]
- apiGroups: ["vigil.dev"]
  resources: ["consumergroups/status"]
  verbs: ["get", "patch"]
{{- end -}}

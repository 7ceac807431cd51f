{{/* The chart's name. */}}
{{- define "vigil.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every object's name. */}}
{{- define "vigil.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "vigil.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "vigil.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "vigil.operatorSelector" -}}
app.kubernetes.io/name: {{ include "vigil.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "vigil.serviceAccountName" -}}
{{- default (include "vigil.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "vigil.reportServiceAccountName" -}}
{{- printf "%s-report" (include "vigil.fullname" .) -}}
{{- end -}}

{{- define "vigil.webhookService" -}}
{{- printf "%s-webhook" (include "vigil.fullname" .) -}}
{{- end -}}

{{- define "vigil.webhookSecret" -}}
{{- printf "%s-webhook-tls" (include "vigil.fullname" .) -}}
{{- end -}}

{{/* The Secret the operator keeps its own webhook certificates in (webhook.operatorCertificates): another name
than the chart-generated one's, whose type (kubernetes.io/tls) could not change to the Opaque this one is. */}}
{{- define "vigil.webhookCertsSecret" -}}
{{- printf "%s-webhook-certs" (include "vigil.fullname" .) -}}
{{- end -}}

{{/*
With the operator's own certificates (webhook.operatorCertificates): what the cluster holds now, by lookup (nothing
under `helm template`), as YAML:
- `caBundle`: the CA bundle the webhook configurations trust — the operator's Secret's once it has written one,
  else the chart-generated Secret's CA while switching from it (the operator then takes that certificate over) —
  rendered so that no upgrade removes it;
- `handOver`: the chart-generated Secret's data while the operator has not taken it over yet (its own Secret still
  empty), rendered as found so that the switching upgrade does not delete it before the operator reads it (the
  next upgrade lets it go). Only this release's own: a Secret cert-manager wrote is not Helm's to render (the
  upgrade leaves it alone, and the operator takes it over all the same).
*/}}
{{- define "vigil.operatorCertsInPlace" -}}
{{- $own := lookup "v1" "Secret" .Release.Namespace (include "vigil.webhookCertsSecret" .) -}}
{{- $chart := lookup "v1" "Secret" .Release.Namespace (include "vigil.webhookSecret" .) -}}
{{- $ownBundle := "" -}}
{{- if and $own $own.data }}{{ $ownBundle = index $own.data "ca.crt" | default "" }}{{ end -}}
{{- $chartData := dict -}}
{{- $annotations := dict -}}
{{- if $chart }}{{ $chartData = $chart.data | default dict }}{{ $annotations = $chart.metadata.annotations | default dict }}{{ end -}}
{{- $ours := eq (index $annotations "meta.helm.sh/release-name" | default "") .Release.Name -}}
{{- $out := dict -}}
{{- with $ownBundle | default (index $chartData "ca.crt") }}{{ $_ := set $out "caBundle" . }}{{ end -}}
{{- if and (not $ownBundle) $ours (index $chartData "tls.crt") }}{{ $_ := set $out "handOver" $chartData }}{{ end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* "true" when the operator keeps the webhook's certificates (webhook.operatorCertificates, the default;
cert-manager, when enabled, takes precedence). */}}
{{- define "vigil.operatorWebhookCerts" -}}
{{- if and .Values.webhook.enabled .Values.webhook.operatorCertificates.enabled (not .Values.webhook.certManager.enabled) -}}true{{- end -}}
{{- end -}}

{{/* "true" when the chart generates the webhook's TLS material itself (neither cert-manager nor the operator). */}}
{{- define "vigil.chartWebhookTLS" -}}
{{- if and .Values.webhook.enabled (not .Values.webhook.certManager.enabled) (not .Values.webhook.operatorCertificates.enabled) -}}true{{- end -}}
{{- end -}}

{{/* The namespaces the operator watches with `rbac.scope: namespaced`, as a list. */}}
{{- define "vigil.watchNamespaces" -}}
{{- if .Values.rbac.namespaces -}}
{{- toJson .Values.rbac.namespaces -}}
{{- else -}}
{{- toJson (list .Release.Namespace) -}}
{{- end -}}
{{- end -}}

{{/*
An image reference from `image` ({repository, tag, digest}) and the chart (`root`): `image.registry` before the
repository when set; the digest, when set, instead of the tag (`repo@sha256:...`); else the tag, by default the
chart's appVersion. The operator's, the report's and the injected sidecar's (`--sidecar-image`) alike.
*/}}
{{- define "vigil.image" -}}
{{- $repository := .image.repository -}}
{{- with .root.Values.image.registry -}}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository -}}
{{- end -}}
{{- if .image.digest -}}
{{- printf "%s@%s" $repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .root.Chart.AppVersion .image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The pod fields every vigil pod of `component` (operator, report) shares: pull secrets and scheduling; `spread`
(the operator's Deployment) adds the default anti-affinity when the values give none. */}}
{{- define "vigil.podPlacement" -}}
{{- $values := index .root.Values .component -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $values.affinity }}
affinity:
  {{- toYaml $values.affinity | nindent 2 }}
{{- else if .spread }}
affinity:  # the replicas preferably on different nodes: a lost node takes one webhook server, not every one
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- include "vigil.operatorSelector" .root | nindent 14 }}
{{- end }}
{{- end -}}

{{/* The pod and container security settings every vigil pod uses: non-root, read-only root, no privileges. */}}
{{- define "vigil.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "vigil.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* resources without empty values (an empty limit means none). */}}
{{- define "vigil.resources" -}}
{{- $out := dict -}}
{{- range $kind, $values := . -}}
{{- $kept := dict -}}
{{- range $k, $v := $values -}}
{{- if $v -}}{{- $_ := set $kept $k $v -}}{{- end -}}
{{- end -}}
{{- if $kept -}}{{- $_ := set $out $kind $kept -}}{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
The webhook's TLS material as YAML {ca.crt, tls.crt, tls.key} (base64): the existing Secret's when there is one
(generated once, kept across upgrades), else a new CA and a serving certificate for the Service's DNS names.
`helm template` and `helm lint` cannot look up, so they always show freshly generated material. Computed once
per render (kept in .Values under a private key), so the Secret, the caBundle and the Deployment's checksum agree.
*/}}
{{- define "vigil.webhookTLS" -}}
{{- if not (hasKey .Values "__vigilWebhookTLS") -}}
{{- $_ := set .Values "__vigilWebhookTLS" (include "vigil.webhookTLSNew" .) -}}
{{- end -}}
{{- index .Values "__vigilWebhookTLS" -}}
{{- end -}}

{{- define "vigil.webhookTLSNew" -}}
{{- $existing := lookup "v1" "Secret" .Release.Namespace (include "vigil.webhookSecret" .) -}}
{{- if and $existing $existing.data (index $existing.data "tls.crt") (index $existing.data "tls.key") (index $existing.data "ca.crt") -}}
ca.crt: {{ index $existing.data "ca.crt" }}
tls.crt: {{ index $existing.data "tls.crt" }}
tls.key: {{ index $existing.data "tls.key" }}
{{- else -}}
{{- $svc := include "vigil.webhookService" . -}}
{{- $ns := .Release.Namespace -}}
{{- $days := int .Values.webhook.certValidityDays -}}
{{- $ca := genCA (printf "%s webhook CA" (include "vigil.fullname" .)) $days -}}
{{- $names := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" $svc $ns) nil $names $days $ca -}}
ca.crt: {{ $ca.Cert | b64enc }}
tls.crt: {{ $cert.Cert | b64enc }}
tls.key: {{ $cert.Key | b64enc }}
{{- end -}}
{{- end -}}

{{/* Whether the report's Spark runs its executors as pods (report.master "kubernetes" or a k8s:// URL): "true" or "". */}}
{{- define "vigil.reportOnKubernetes" -}}
{{- $master := .Values.report.master | toString -}}
{{- if or (eq $master "kubernetes") (hasPrefix "k8s://" $master) }}true{{ end -}}
{{- end -}}

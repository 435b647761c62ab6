{{/*
The chart's name, Helm's convention with our own default: the chart is called
ome-resources, as OME's is, so "ome-routing" keeps our labels off OME's objects.
*/}}
{{- define "ome-resources.name" -}}
{{- default "ome-routing" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every name, Helm's convention: fullnameOverride, else the release name when
it holds the chart's name, else both ("ome-routing" for the release ome-routing).
*/}}
{{- define "ome-resources.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "ome-resources.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The Deployment's name (OME's is ome-controller-manager: never ours). */}}
{{- define "ome-resources.controllerName" -}}{{ include "ome-resources.fullname" . }}{{- end -}}

{{/* The ConfigMap the controller reads (--config-map); OME's manager reads inferenceservice-config. */}}
{{- define "ome-resources.configMapName" -}}{{ include "ome-resources.fullname" . | trunc 56 | trimSuffix "-" }}-config{{- end -}}

{{/* The metrics Service. */}}
{{- define "ome-resources.metricsServiceName" -}}{{ include "ome-resources.fullname" . | trunc 55 | trimSuffix "-" }}-metrics{{- end -}}

{{/* The Role and RoleBinding in endpoint.routeNamespace (Service and EndpointSlice writes). */}}
{{- define "ome-resources.publisherRoleName" -}}{{ include "ome-resources.fullname" . | trunc 53 | trimSuffix "-" }}-publisher{{- end -}}

{{/* The namespaced Role and RoleBinding (ConfigMap and Lease). */}}
{{- define "ome-resources.roleName" -}}{{ include "ome-resources.fullname" . }}{{- end -}}

{{/* The Grafana dashboard's ConfigMap. */}}
{{- define "ome-resources.dashboardName" -}}{{ include "ome-resources.fullname" . | trunc 53 | trimSuffix "-" }}-dashboard{{- end -}}

{{/*
Cluster-scoped objects carry the namespace, so that two installs do not collide; OME's
are named ome-manager-role, ome-proxy-role, ome-metrics-* and never start like ours.
*/}}
{{- define "ome-resources.clusterName" -}}
{{- printf "%s-%s" (include "ome-resources.fullname" .) .Release.Namespace | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "ome-resources.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ome-resources.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ome-resources.labels" -}}
{{ include "ome-resources.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Select only this release's pods: OME's carry control-plane: ome-controller-manager. */}}
{{- define "ome-resources.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ome-resources.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The `multicluster` key of the ConfigMap: the `ome.multicluster` values as YAML.

Helm drops a key that a values file sets to null, so an observer limit "removed with
null" would otherwise fall back to its default. The chart defines all five limits, so a
missing one was removed on purpose: it is written as null, and the controller refuses it.
*/}}
{{- define "ome-resources.multicluster" -}}
{{- $mc := deepCopy (default dict .Values.ome.multicluster) -}}
{{- $config := default dict (get $mc "config") -}}
{{- $routing := default dict (get $config "routing") -}}
{{- $observer := default dict (get $routing "observer") -}}
{{- range $key := list "maxConcurrentReconciles" "maxConcurrentRequests" "maxResponseBytes" "minPeriod" "maxSamples" -}}
{{- if not (hasKey $observer $key) -}}
{{- $_ := set $observer $key nil -}}
{{- end -}}
{{- end -}}
{{- include "ome-resources.pollTrustFiles" (dict "trust" (default dict .Values.pollTrust) "observer" $observer) -}}
{{- $_ := set $routing "observer" $observer -}}
{{- if (.Values.journal).enabled -}}
{{- $_ := set $routing "journal" (dict "enabled" true) -}}
{{- end -}}
{{- if .Values.shadowRouting -}}
{{- /* Not OME: the chart-wide shadow routing policy (docs/routing-changes.md) */ -}}
{{- $_ := set $routing "shadow" .Values.shadowRouting -}}
{{- end -}}
{{- include "ome-resources.ramp" (dict "ramp" (default dict .Values.ramp) "routing" $routing) -}}
{{- $_ := set $config "routing" $routing -}}
{{- $_ := set $mc "config" $config -}}
{{- toYaml $mc -}}
{{- end -}}

{{/*
The chart's ramp (ours, off by default): ramp.maxIncreasePerPeriod, rendered as
routing.ramp.maxIncreasePerPeriod only when set, so that a chart without it renders the
same config as before.
*/}}
{{- define "ome-resources.ramp" -}}
{{- $value := .ramp.maxIncreasePerPeriod -}}
{{- if not (or (kindIs "invalid" $value) (eq (toString $value) "")) -}}
{{- $_ := set .routing "ramp" (dict "maxIncreasePerPeriod" (toString $value)) -}}
{{- end -}}
{{- end -}}

{{/* Where the pollTrust Secrets and ConfigMaps are mounted in the controller's pod. */}}
{{- define "ome-resources.pollTrustDir" -}}/etc/ome-routing/poll-trust{{- end -}}

{{/*
The pollTrust sources that are set, as a list of (name, secretName, configMapName): the
volumes and mounts of the Deployment, one directory each under pollTrustDir.
*/}}
{{- define "ome-resources.pollTrustSources" -}}
{{- $trust := default dict .Values.pollTrust -}}
{{- $ca := default dict $trust.caBundle -}}
{{- $cert := default dict $trust.clientCertificate -}}
{{- $token := default dict $trust.bearerToken -}}
{{- $sources := list -}}
{{- if or $ca.secretName $ca.configMapName -}}
{{- $sources = append $sources (dict "name" "ca" "secretName" ($ca.secretName | default "") "configMapName" ($ca.configMapName | default "")) -}}
{{- end -}}
{{- if $cert.secretName -}}
{{- $sources = append $sources (dict "name" "client" "secretName" $cert.secretName "configMapName" "") -}}
{{- end -}}
{{- if $token.secretName -}}
{{- $sources = append $sources (dict "name" "token" "secretName" $token.secretName "configMapName" "") -}}
{{- end -}}
{{- toYaml (dict "sources" $sources) -}}
{{- end -}}

{{/*
Name the mounted pollTrust files in routing.observer (ours, not OME's keys), for the
controller to read. A file named both ways is refused: the two would disagree.
*/}}
{{- define "ome-resources.pollTrustFiles" -}}
{{- $dir := include "ome-resources.pollTrustDir" . -}}
{{- $observer := .observer -}}
{{- $ca := default dict .trust.caBundle -}}
{{- $cert := default dict .trust.clientCertificate -}}
{{- $token := default dict .trust.bearerToken -}}
{{- if and $ca.secretName $ca.configMapName -}}
{{- fail (printf "pollTrust.caBundle: set secretName (%q) or configMapName (%q), not both" $ca.secretName $ca.configMapName) -}}
{{- end -}}
{{- $files := list -}}
{{- if or $ca.secretName $ca.configMapName -}}
{{- $files = append $files (list "caBundleFile" (printf "%s/ca/%s" $dir ($ca.key | default "ca.crt")) "pollTrust.caBundle") -}}
{{- end -}}
{{- if $cert.secretName -}}
{{- $files = append $files (list "clientCertFile" (printf "%s/client/%s" $dir ($cert.certKey | default "tls.crt")) "pollTrust.clientCertificate") -}}
{{- $files = append $files (list "clientKeyFile" (printf "%s/client/%s" $dir ($cert.keyKey | default "tls.key")) "pollTrust.clientCertificate") -}}
{{- end -}}
{{- if $token.secretName -}}
{{- $files = append $files (list "bearerTokenFile" (printf "%s/token/%s" $dir ($token.key | default "token")) "pollTrust.bearerToken") -}}
{{- end -}}
{{- range $files -}}
{{- $key := index . 0 -}}
{{- if get $observer $key -}}
{{- fail (printf "%s mounts the file of routing.observer.%s, which is set too (%q): set one of the two" (index . 2) $key (get $observer $key)) -}}
{{- end -}}
{{- $_ := set $observer $key (index . 1) -}}
{{- end -}}
{{- end -}}

{{/*
The controller's --lease-name: the name of the leader Lease, or with sharding the group
that prefixes the member and shard Leases. The controller's default unless
controller.extraArgs sets it (as --lease-name=NAME or --lease-name NAME; the last wins, as
for the controller), so that the sharded grant names the Leases the controller uses.
*/}}
{{- define "ome-resources.leaseName" -}}
{{- $name := "ome-routing-controller" -}}
{{- $next := false -}}
{{- range (.Values.controller.extraArgs | default list) -}}
{{- $arg := toString . -}}
{{- if $next -}}
{{- $name = $arg -}}
{{- $next = false -}}
{{- else if eq $arg "--lease-name" -}}
{{- $next = true -}}
{{- else if hasPrefix "--lease-name=" $arg -}}
{{- $name = trimPrefix "--lease-name=" $arg -}}
{{- end -}}
{{- end -}}
{{- $name -}}
{{- end -}}

{{/* "true" with controller.sharding.enabled (ours, off by default), else "". */}}
{{- define "ome-resources.sharding" -}}
{{- if ((.Values.controller).sharding | default dict).enabled -}}true{{- end -}}
{{- end -}}

{{/* The shard count of controller.sharding.shards (64 if left out). */}}
{{- define "ome-resources.shards" -}}
{{- $shards := ((.Values.controller).sharding | default dict).shards -}}
{{- if kindIs "invalid" $shards -}}64{{- else -}}{{ int $shards }}{{- end -}}
{{- end -}}

{{/*
"true" when the controller gets a PodDisruptionBudget: controller.podDisruptionBudget.enabled,
or when it is null (the default) with more than one replica.
*/}}
{{- define "ome-resources.podDisruptionBudget" -}}
{{- $pdb := (.Values.controller.podDisruptionBudget | default dict) -}}
{{- if kindIs "bool" $pdb.enabled -}}
{{- if $pdb.enabled -}}true{{- end -}}
{{- else if gt (int .Values.controller.replicas) 1 -}}true{{- end -}}
{{- end -}}

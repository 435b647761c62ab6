{{/* The Deployment's name: fixed, so that `kubectl rollout status deployment ome-controller-manager` works. */}}
{{- define "ome-resources.controllerName" -}}ome-controller-manager{{- end -}}

{{/* Cluster-scoped objects carry the namespace, so that two installs do not collide. */}}
{{- define "ome-resources.clusterName" -}}ome-routing-{{ .Release.Namespace }}{{- end -}}

{{- define "ome-resources.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ome-resources.controllerName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ome-resources.labels" -}}
app.kubernetes.io/name: ome-routing
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ome-resources.selectorLabels" -}}
control-plane: ome-controller-manager
app.kubernetes.io/name: ome-routing
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
{{- $_ := set $routing "observer" $observer -}}
{{- $_ := set $config "routing" $routing -}}
{{- $_ := set $mc "config" $config -}}
{{- toYaml $mc -}}
{{- end -}}

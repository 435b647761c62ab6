{{- define "ome-capacity-reporter.fullname" -}}
{{- if contains "ome-capacity-reporter" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-ome-capacity-reporter" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ome-capacity-reporter.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ome-capacity-reporter.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ome-capacity-reporter.labels" -}}
app.kubernetes.io/name: ome-capacity-reporter
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ome-capacity-reporter.selectorLabels" -}}
app.kubernetes.io/name: ome-capacity-reporter
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The routes to write, as a YAML list of {namespace, name, host, path}: the listed services
by `hostScheme` (or their `url`), then the services that match `selector`, by their
`status.url`. The path is the service's URL path joined with the poll path, as OME joins
the endpoint and the poll's path.
*/}}
{{- define "ome-capacity-reporter.routes" -}}
{{- $routes := list -}}
{{- $poll := .Values.pollPath -}}
{{- range .Values.route.services -}}
{{- $host := "" -}}
{{- $prefix := "" -}}
{{- if .url -}}
{{- $u := urlParse .url -}}
{{- $host = regexReplaceAll ":[0-9]+$" $u.host "" -}}
{{- $prefix = trimSuffix "/" $u.path -}}
{{- else if eq $.Values.route.hostScheme "perServiceSubdomain" -}}
{{- $host = printf "%s.%s.%s" .name .namespace (required "route.domain is required for perServiceSubdomain" $.Values.route.domain) -}}
{{- else -}}
{{- $host = required "route.sharedHost is required for sharedHost" $.Values.route.sharedHost -}}
{{- $prefix = printf "/%s/%s" .namespace .name -}}
{{- end -}}
{{- $routes = append $routes (dict "namespace" .namespace "name" .name "host" $host "path" (printf "%s%s" $prefix $poll)) -}}
{{- end -}}
{{- with .Values.route.selector.matchLabels -}}
{{- $want := . -}}
{{- $found := lookup "ome.io/v1beta1" "InferenceService" "" "" -}}
{{- range ($found.items | default list) -}}
{{- $labels := .metadata.labels | default dict -}}
{{- $match := true -}}
{{- range $k, $v := $want -}}
{{- if ne (get $labels $k) (toString $v) -}}{{- $match = false -}}{{- end -}}
{{- end -}}
{{- $url := "" -}}
{{- if .status -}}{{- $url = .status.url | default "" -}}{{- end -}}
{{- if and $match $url -}}
{{- $u := urlParse $url -}}
{{- $routes = append $routes (dict "namespace" .metadata.namespace "name" .metadata.name "host" (regexReplaceAll ":[0-9]+$" $u.host "") "path" (printf "%s%s" (trimSuffix "/" $u.path) $poll)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "routes" $routes) -}}
{{- end -}}

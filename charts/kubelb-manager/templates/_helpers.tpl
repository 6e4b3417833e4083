{{/* Chart name, truncated to a valid label value. */}}
{{- define "kubelb-manager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects. */}}
{{- define "kubelb-manager.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "kubelb-manager.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubelb-manager.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubelb
{{- end }}

{{- define "kubelb-manager.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubelb-manager.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kubelb-manager.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubelb-manager.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kubelb-manager.image" -}}
{{ with .Values.image.registry }}{{ trimSuffix "/" . }}/{{ end }}{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}


{{/* The pods' affinity: .Values.affinity, plus the podAntiAffinity preset on the manager's
selector labels unless .Values.affinity has its own podAntiAffinity. */}}
{{- define "kubelb-manager.affinity" -}}
{{- $affinity := deepCopy (.Values.affinity | default dict) }}
{{- $preset := .Values.podAntiAffinity | default dict }}
{{- if and $preset.type (not (hasKey $affinity "podAntiAffinity")) }}
{{- $term := dict "topologyKey" ($preset.topologyKey | default "kubernetes.io/hostname") "labelSelector" (dict "matchLabels" (include "kubelb-manager.selectorLabels" . | fromYaml)) }}
{{- if eq $preset.type "preferred" }}
{{- $_ := set $affinity "podAntiAffinity" (dict "preferredDuringSchedulingIgnoredDuringExecution" (list (dict "weight" 100 "podAffinityTerm" $term))) }}
{{- else if eq $preset.type "required" }}
{{- $_ := set $affinity "podAntiAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (list $term)) }}
{{- end }}
{{- end }}
{{- toYaml $affinity }}
{{- end }}

{{/* The address provider's values as YAML when one is on (addressProvider.type other than
none), "" otherwise; fails on values the provider cannot honour. */}}
{{- define "kubelb-manager.addressProvider" -}}
{{- $p := .Values.addressProvider | default dict }}
{{- $type := $p.type | default "none" }}
{{- if not (has $type (list "none" "node-ip" "ipam")) }}
{{- fail (printf "addressProvider.type must be none, node-ip or ipam, not %q" $type) }}
{{- end }}
{{- if and $p.nodeIPNAT (ne $type "node-ip") }}
{{- fail "addressProvider.nodeIPNAT applies to addressProvider.type=node-ip only" }}
{{- end }}
{{- if and (kindIs "slice" $p.reservedPorts) (ne $type "node-ip") }}
{{- fail "addressProvider.reservedPorts applies to addressProvider.type=node-ip only" }}
{{- end }}
{{- if and $p.class (eq $type "none") }}
{{- fail "addressProvider.class needs addressProvider.type node-ip or ipam" }}
{{- end }}
{{- if ne $type "none" }}
{{- toYaml (merge (dict "type" $type) $p) }}
{{- end }}
{{- end }}

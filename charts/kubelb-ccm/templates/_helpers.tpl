{{/* Chart name, truncated to a valid label value. */}}
{{- define "kubelb-ccm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects. */}}
{{- define "kubelb-ccm.fullname" -}}
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

{{- define "kubelb-ccm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "kubelb-ccm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: kubelb
{{- end }}

{{- define "kubelb-ccm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubelb-ccm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kubelb-ccm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kubelb-ccm.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "kubelb-ccm.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The tenant's namespace on the hub; fails without kubelb.tenantName. */}}
{{- define "kubelb-ccm.clusterName" -}}
tenant-{{ required "kubelb.tenantName is required: the name of this cluster's Tenant on the hub" .Values.kubelb.tenantName }}
{{- end }}

{{/* "true" in the standalone mode (no hub), "" in the hub mode; fails on values the
standalone mode cannot honour. */}}
{{- define "kubelb-ccm.standalone" -}}
{{- if eq .Values.mode "standalone" }}
{{- if not .Values.kubelb.enableCloudProvider }}
{{- fail "kubelb.enableCloudProvider=false cannot be used with mode=standalone: in the standalone mode the ccm is the load balancer implementation" }}
{{- end }}
{{- if and .Values.standalone.nodeIPNAT (ne .Values.standalone.addressProvider "node-ip") }}
{{- fail "standalone.nodeIPNAT applies to standalone.addressProvider=node-ip only" }}
{{- end }}
{{- if and (kindIs "slice" .Values.standalone.reservedPorts) (ne .Values.standalone.addressProvider "node-ip") }}
{{- fail "standalone.reservedPorts applies to standalone.addressProvider=node-ip only" }}
{{- end }}
true
{{- end }}
{{- end }}

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

{{/* The ccm's command-line flags, one list item a line: the Deployment's, and those of the
release hook Job (ccm release takes the ccm's flags). */}}
{{- define "kubelb-ccm.args" -}}
{{- $k := .Values.kubelb }}
{{- $standalone := include "kubelb-ccm.standalone" . }}
{{- $s := .Values.standalone }}
{{- if $standalone }}
{{- /* No hub: none of the hub's flags (the ccm would warn that it ignores them). The
provider's flags are passed only when they differ from the ccm's defaults. */}}
- --mode=standalone
{{- if ne $s.addressProvider "node-ip" }}
- {{ printf "--address-provider=%v" $s.addressProvider | quote }}
{{- else }}
{{- if kindIs "slice" $s.reservedPorts }}
- {{ printf "--reserved-ports=%v" (join "," $s.reservedPorts) | quote }}
{{- end }}
{{- if $s.nodeIPNAT }}
- --node-ip-nat=true
{{- end }}
{{- end }}
{{- else }}
- {{ printf "--cluster-name=%v" (include "kubelb-ccm.clusterName" .) | quote }}
- --kubelb-kubeconfig=/etc/kubelb/kubeconfig
{{- if $k.persistRenewedToken }}
- {{ printf "--kubelb-kubeconfig-secret=%v/%v" .Release.Namespace $k.kubeconfigSecretName | quote }}
- {{ printf "--kubelb-kubeconfig-secret-key=%v" $k.kubeconfigSecretKey | quote }}
{{- end }}
{{- end }}
- {{ printf "--leader-election-namespace=%v" (.Release.Namespace) | quote }}
- {{ printf "--enable-leader-election=%v" (.Values.leaderElection.enabled) | quote }}
- --metrics-addr=:{{ .Values.ports.metrics }}
- --health-probe-bind-address=:{{ .Values.ports.probes }}
- {{ printf "--use-loadbalancer-class=%v" ($k.useLoadBalancerClass) | quote }}
{{- if not $standalone }}
- {{ printf "--node-address-type=%v" ($k.nodeAddressType) | quote }}
- {{ printf "--enable-cloud-provider=%v" ($k.enableCloudProvider) | quote }}
- {{ printf "--disable-ingress-controller=%v" (not $k.ingress.enabled) | quote }}
- {{ printf "--use-ingress-class=%v" ($k.ingress.useIngressClass) | quote }}
- {{ printf "--enable-gateway-api=%v" ($k.gatewayAPI.enabled) | quote }}
{{- if $k.gatewayAPI.enabled }}
- {{ printf "--use-gateway-class=%v" ($k.gatewayAPI.useGatewayClass) | quote }}
- {{ printf "--install-gateway-api-crds=%v" ($k.gatewayAPI.installCRDs) | quote }}
- {{ printf "--gateway-api-crds-channel=%v" ($k.gatewayAPI.crdsChannel) | quote }}
- {{ printf "--disable-gateway-controller=%v" (not $k.gatewayAPI.gateway) | quote }}
- {{ printf "--disable-httproute-controller=%v" (not $k.gatewayAPI.httpRoute) | quote }}
- {{ printf "--disable-grpcroute-controller=%v" (not $k.gatewayAPI.grpcRoute) | quote }}
- {{ printf "--disable-tlsroute-controller=%v" (not $k.gatewayAPI.tlsRoute) | quote }}
- {{ printf "--disable-tcproute-controller=%v" (not $k.gatewayAPI.tcpRoute) | quote }}
- {{ printf "--disable-udproute-controller=%v" (not $k.gatewayAPI.udpRoute) | quote }}
- {{ printf "--disable-gateway-services=%v" (not $k.gatewayAPI.gatewayServices) | quote }}
{{- end }}
- {{ printf "--enable-secret-synchronizer=%v" ($k.enableSecretSynchronizer) | quote }}
{{- end }}
- {{ printf "--log-format=%v" (.Values.logFormat) | quote }}
- {{ printf "--log-level=%v" (.Values.logLevel) | quote }}
- {{ printf "--kube-api-qps=%v" (.Values.kubeAPI.qps) | quote }}
- {{ printf "--kube-api-burst=%v" (.Values.kubeAPI.burst) | quote }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
